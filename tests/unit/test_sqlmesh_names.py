"""A SQLMesh project's Python files load unmodified (issue 22): `from sqlmesh import model, macro,
signal, DatetimeRanges`, `ModelKindName`, `sqlmesh.utils.date`, and helpers imported by module
name from the project root, whose code is stored with the model (an edit to them is a change)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.project.project import load_project

HELPER = "def fmt(value):\n    return value * 2\n"
PY_MODEL = '''
import pandas as pd
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName
from sqlmesh.utils.date import to_ds

from helper import fmt


@model("s.py_model", kind=dict(name=ModelKindName.FULL), columns={"v": "int", "day": "string"})
def execute(context: ExecutionContext, start, end, execution_time, **kwargs):
    return pd.DataFrame({"v": [fmt(21)], "day": [to_ds(execution_time)]})
'''
MACRO = '''
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator


@macro()
def doubled(evaluator: MacroEvaluator, column):
    return f"{column} * 2"
'''
SIGNAL = '''
from sqlmesh import DatetimeRanges, signal


@signal()
def always(batch: DatetimeRanges) -> bool:
    return True
'''
SQL_MODEL = "MODEL (name s.sql_model, kind FULL, signals (always()));\nSELECT @doubled(1) AS two\n"


def _project(root: Path) -> Path:
    return write_project(root, {"helper.py": HELPER, "models/py_model.py": PY_MODEL, "macros/m.py": MACRO,
                                "signals/s.py": SIGNAL, "models/sql_model.sql": SQL_MODEL}, CONFIG)


def test_sqlmesh_files_load_unmodified(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path / "p"), use_cache=False)
    model = project.models["s.py_model"]
    assert model.kind.name.value == "FULL"
    stored = "\n".join(piece.text for piece in model.python.env.values())
    assert "def fmt(value)" in stored  # the helper's code, not an import of it
    assert "from sqlmesh.utils.date import to_ds" in stored  # a library name: imported where it runs
    assert "s.sql_model" in project.models and "doubled" in project.macros.names()


def test_an_edit_to_a_root_helper_changes_the_model(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    before = load_project(root, use_cache=False).models["s.py_model"].python
    (root / "helper.py").write_text(HELPER.replace("* 2", "* 3"))
    after = load_project(root, use_cache=False).models["s.py_model"].python
    assert before != after


def test_the_stored_code_runs_in_a_fresh_process_namespace(tmp_path: Path) -> None:
    model = load_project(_project(tmp_path / "p"), use_cache=False).models["s.py_model"]
    for name in [n for n in sys.modules if n == "sqlmesh" or n.startswith("sqlmesh.")]:
        del sys.modules[name]  # as in another process: the stored imports find the names again
    frame = model.python.function()(None, None, None, "2024-05-06")
    assert frame.to_dict("records") == [{"v": 42, "day": "2024-05-06"}]


def test_what_sqlmesh_has_and_we_do_not_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "models" / "other.py").write_text("from sqlmesh.core.engine_adapter import EngineAdapter\n")
    with pytest.raises(MeshError) as e:
        load_project(root, use_cache=False)
    assert "models/other.py:1:" in str(e.value) and "sqlmesh.core.engine_adapter" in str(e.value)
    assert "mesh_dagster provides only sqlmesh (model" in str(e.value)
