"""The project root on Python's import path, as SQLMesh puts it there, and SQLMesh's names.

SQLMesh projects import their own helpers by module name from the project root (`from helper
import fmt`, `from macros.utils import x`) and SQLMesh's names (`from sqlmesh import model`): both
must work when such a project is loaded unmodified. The root is appended (not prepended) to
`sys.path`, so a project file never shadows an installed module of the same name. A process loads
one project after another (tests, a code server reloading, a plan after an edit): the modules
imported from the project's root are forgotten at every load, so two projects' `helper` never mix
and a load never runs a helper module as an earlier load imported it. A macro's rendering must use
the helper constant the file holds now (`from macros.utils import PRECISION`): the plan stores
that text with the snapshot, and compares renderings to categorize the change.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from mesh_dagster.core.models import sqlmesh_names

_NEVER_FORGOTTEN = {"mesh_dagster", "sqlmesh"}
_CURRENT: list[Path] = []  # the roots the last project loaded put on the path


def use_project_root(root: Path, *others: Path) -> None:
    """Make the project at `root` importable by module name (and SQLMesh's names importable); with
    `others`, the other repositories of a multi-repo project too (core/project/repos.py)."""
    sqlmesh_names.install()
    roots = [path.resolve() for path in (root, *others)]
    for previous in _CURRENT:
        _forget(previous)  # the same roots too: their files may have changed since
    for path in roots:
        if str(path) not in sys.path:
            sys.path.append(str(path))
    _CURRENT[:] = roots


def _forget(root: Path) -> None:
    """Forget the modules of `root`'s files and folders: a namespace package (`macros/` without
    `__init__.py`) left behind would answer the next project's `from macros.utils import ...`."""
    inside = str(root).rstrip(os.sep) + os.sep  # `root` is resolved: a real path's prefix
    real = real_paths()
    gone = []  # all found first: a namespace package's folders are worked out from its parent's
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in _NEVER_FORGOTTEN:
            continue  # our own code, when a project lives inside our checkout
        paths = [real(f) for f in _module_files(module)]
        if paths and all((path + os.sep).startswith(inside) and not {"site-packages", "dist-packages"} &
                         set(path.split(os.sep)) for path in paths):
            gone.append(name)  # installed packages in a virtualenv inside the project stay
    for name in gone:
        del sys.modules[name]
    while str(root) in sys.path:
        sys.path.remove(str(root))


def _module_files(module: object) -> list[str]:
    """Where a module comes from: its file, or the folders of a namespace package (a folder without
    `__init__.py`, such as a project's `macros/`, has no file); nothing for a built-in."""
    file = getattr(module, "__file__", None)
    if file:
        return [file]
    spec = getattr(module, "__spec__", None)
    return list(getattr(module, "__path__", None) or []) if spec is not None and spec.origin is None else []


def real_paths() -> Callable[[str], str]:
    """`os.path.realpath` for many files, each directory resolved once: a load looks at the file of
    every module the process imported (1,500 in a Dagster code server, most in a few packages'
    folders), and resolving each path whole stats every folder above it, every time (40 ms a load).
    A file that is itself a symbolic link is resolved whole; the result is realpath's. For one
    scan: folders are not re-read, so a link changed meanwhile is seen by the next scan."""
    folders: dict[str, str] = {}

    def real(file: str) -> str:
        head, base = os.path.split(file)
        if base in ("", ".", "..") or os.path.islink(file):
            return os.path.realpath(file)
        folder = folders.get(head)
        if folder is None:
            folder = folders[head] = os.path.realpath(head)
        return os.path.join(folder, base)

    return real


def project_modules(root: Path) -> list[str]:
    """The project's own Python modules imported so far (macros' helpers among them), each as its
    name and its file's content: what the project's cache keys must follow, since a macro's output
    may come from a helper module's constant."""
    inside, cache = str(root.resolve()) + os.sep, str(root.resolve() / ".mesh") + os.sep
    found = []
    real = real_paths()  # os.path on strings: pathlib's resolve of every module imported (800 of them) took 30 ms
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or name.split(".")[0] in _NEVER_FORGOTTEN:
            continue
        path = real(file)
        if not path.startswith(inside) or path.startswith(cache) \
                or {"site-packages", "dist-packages"} & set(path.split(os.sep)):
            continue
        try:
            found.append(f"{name}:{Path(path).read_text(errors='replace')}")
        except OSError:
            found.append(f"{name}:?")
    return found
