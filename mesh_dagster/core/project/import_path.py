"""The project root on Python's import path, as SQLMesh puts it there, and SQLMesh's names.

SQLMesh projects import their own helpers by module name from the project root (`from helper
import fmt`, `from macros.utils import x`) and SQLMesh's names (`from sqlmesh import model`): both
must work when such a project is loaded unmodified. The root is appended (not prepended) to
`sys.path`, so a project file never shadows an installed module of the same name. A process loads
one project after another (tests, a code server reloading): the modules imported from the previous
root are forgotten when another root takes its place, so two projects' `helper` never mix.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mesh_dagster.core.models import sqlmesh_names

_CURRENT: list[Path] = []  # the root the last project loaded put on the path


def use_project_root(root: Path) -> None:
    """Make the project at `root` importable by module name (and SQLMesh's names importable)."""
    sqlmesh_names.install()
    root = root.resolve()
    previous = _CURRENT[0] if _CURRENT else None
    if previous is not None and previous != root:
        _forget(previous)
    if str(root) not in sys.path:
        sys.path.append(str(root))
    _CURRENT[:] = [root]


def _forget(root: Path) -> None:
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        path = Path(file).resolve() if file else None
        if path is not None and path.is_relative_to(root) and not {"site-packages", "dist-packages"} & set(path.parts):
            del sys.modules[name]  # installed packages in a virtualenv inside the project stay
    while str(root) in sys.path:
        sys.path.remove(str(root))
