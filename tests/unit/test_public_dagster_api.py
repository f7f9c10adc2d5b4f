"""mesh_dagster uses Dagster's public API only: private modules (`dagster._core…`, `dagster._utils…`,
and the same in Dagster's libraries) change without notice, and moving to the next Dagster
release must stay a version bump. The one exception is dagster/compat.py, which holds every use
the public API does not cover, each tested against the installed Dagster (tests/dagster/test_compat.py)
with a fallback when it is gone."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mesh_dagster"
# `import dagster._x`, `from dagster._x import y`, `from dagster_postgres._x import y`, and
# `importlib.import_module("dagster._x")`
PRIVATE = re.compile(r"""(?:^\s*(?:from|import)\s+|import_module\(\s*["'])(dagster(?:_\w+)?\._\w*)""", re.M)


def private_imports(text: str) -> list[str]:
    return [m.group(1) for m in PRIVATE.finditer(text)]


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
