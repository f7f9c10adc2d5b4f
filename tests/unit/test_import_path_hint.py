"""A module a project's Python file imports that Python cannot find: the error names the file and
the line, and says where Python looked (SQLMesh puts the project root on the import path)."""

from __future__ import annotations

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.project.project import load_project


@pytest.mark.parametrize(("rel", "what"), [("models/m.py", "the Python model file"),
                                           ("models/sub/m.py", "the Python model file"), ("macros/m.py", "macros"),
                                           ("signals/m.py", "signals")])
def test_a_missing_module_names_the_file_the_line_and_the_import_path(tmp_path, rel: str, what: str) -> None:
    """SQLMesh puts the project root on the import path: a missing helper says where Python looked."""
    root = write_project(tmp_path / "p", {rel: "import os\nfrom helpers.fmt import pretty\n"})
    with pytest.raises(ModelError) as e:
        load_project(root, use_cache=False)
    text = str(e.value)
    assert text.startswith(f"{rel}:2: Cannot import {what}: ModuleNotFoundError: No module named 'helpers'"), text
    assert f"the project root {root.resolve()}" in text
    assert f"{root.resolve() / 'helpers'}.py" in text and "install the package" in text
