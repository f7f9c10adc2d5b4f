"""mesh_dagster uses Dagster's public API only: private modules (`dagster._core…`, `dagster._utils…`,
and the same in Dagster's libraries) change without notice, and moving to the next Dagster
release must stay a version bump. The one exception is dagster/compat.py, which holds every use
the public API does not cover (its `INTERNALS`), each checked against the installed Dagster
(tests/unit/test_dagster_internals.py), its behaviour tested (tests/dagster/test_compat.py), with a
fallback when it is gone."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mesh_dagster"
# `import dagster._x`, `from dagster._x import y`, `from dagster_postgres._x import y`, and
# `importlib.import_module("dagster._x")`
PRIVATE = re.compile(r"""(?:^\s*(?:from|import)\s+|import_module\(\s*["'])(dagster(?:_\w+)?\._\w*)""", re.M)
# `from dagster.components.utils import x`: a submodule of Dagster's; its public names are `dagster`'s own
SUBMODULE = re.compile(r"^\s*(?:from|import)\s+(dagster(?:_\w+)?\.[\w.]+)", re.M)


def private_imports(text: str) -> list[str]:
    return [m.group(1) for m in PRIVATE.finditer(text)]


def submodule_imports(text: str) -> list[str]:
    return [m.group(1) for m in SUBMODULE.finditer(text)]


def test_the_pattern_catches_private_imports():
    assert private_imports("from dagster._core.events import DagsterEventType\n") == ["dagster._core"]
    assert private_imports("    import dagster._utils.warnings as w\n") == ["dagster._utils"]
    assert private_imports("from dagster_postgres._x import y\n") == ["dagster_postgres._x"]
    assert private_imports('importlib.import_module("dagster._core.storage")') == ["dagster._core"]
    assert private_imports("from dagster import AssetKey\nfrom mesh_dagster.dagster._x import y\n") == []


COMPAT = "mesh_dagster/dagster/compat.py"


def test_no_module_but_compat_imports_a_private_dagster_module():
    found = {str(path.relative_to(PACKAGE.parent)): hits for path in sorted(PACKAGE.rglob("*.py"))
             if (hits := private_imports(path.read_text()))}
    assert set(found) <= {COMPAT}, found


def test_the_submodule_pattern_catches_imports_of_dagster_submodules():
    assert submodule_imports("from dagster.components.utils import TranslatorResolvingInfo\n") == [
        "dagster.components.utils"]
    assert submodule_imports("import dagster_graphql.schema\n") == ["dagster_graphql.schema"]
    assert submodule_imports("from dagster import AssetKey\nimport dagster\n") == []
    assert submodule_imports("from mesh_dagster.dagster.compat import x\n") == []


def test_no_module_but_compat_imports_from_a_dagster_submodule():
    """Dagster's public names are those `dagster` exports; a submodule's may move without notice."""
    found = {str(path.relative_to(PACKAGE.parent)): hits for path in sorted(PACKAGE.rglob("*.py"))
             if (hits := submodule_imports(path.read_text()))}
    assert set(found) <= {COMPAT}, found
