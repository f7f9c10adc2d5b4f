"""Importing a folder of the user's Python files (`macros/`, `signals/`) as a package of its own.

Each folder becomes one package under a name of ours (`mesh_user_macros`, `mesh_user_signals`), its
`__init__.py` included, so its files can import each other (`from .helpers import x`) without the
project being on `sys.path`. A file that fails to import is one `ModelError` naming the file and
line where it failed (not a traceback through our loader), and a package is forgotten before the
next project is loaded, so two projects in one process (tests, a Dagster code server reloading)
never see each other's functions.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mesh_dagster.core.errors import ModelError


@dataclass(frozen=True)
class UserPackage:
    """`folder` imported as the package `name`; `what` names its files in errors ("macros")."""

    name: str
    folder: Path
    what: str
    label: str | None = None  # the folder as messages show it, when not its name (another repository's)

    def import_all(self) -> list[types.ModuleType]:
        """The package and each of its `*.py` files (`__init__.py` aside), in file name order.

        A file the package's `__init__.py` (or another file) already imported is not run twice.
        The modules of a previous project are forgotten first; on an error, these are too.
        """
        self.forget()
        if not self.folder.is_dir():
            return []
        try:
            modules = [self._import_package()]
            for file in sorted(self.folder.glob("*.py")):
                if not file.name.startswith("__"):
                    modules.append(self._import_file(file))
        except ModelError:
            self.forget()
            raise
        return modules

    def forget(self) -> None:
        """Drop the package's modules from `sys.modules`."""
        for module in [n for n in sys.modules if n == self.name or n.startswith(self.name + ".")]:
            del sys.modules[module]

    def shown(self, file: str | Path) -> str:
        """A file of the folder as users see it: `macros/x.py`."""
        return f"{self.label or self.folder.name}/{Path(file).name}"

    def defined_in(self, fn: Callable) -> tuple[str, int | None]:
        """The file (as shown) and line where a function of the package is defined."""
        code = getattr(fn, "__code__", None)
        if code is None:
            return self.folder.name, None
        return self.shown(code.co_filename), code.co_firstlineno

    def failure_location(self, error: BaseException, fallback: str | Path | None = None) -> tuple[str, int | None]:
        """Where in the folder `error` was raised: a syntax error's own file, else the innermost
        frame inside the folder (a file imported by the one being imported counts)."""
        if isinstance(error, SyntaxError) and error.filename:
            return self.shown(error.filename), error.lineno
        root = str(self.folder.resolve())
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if str(Path(f.filename).resolve()).startswith(root)]
        if frames:
            return self.shown(frames[-1].filename), frames[-1].lineno
        return (self.shown(fallback) if fallback is not None else self.folder.name), None

    def _import_package(self) -> types.ModuleType:
        """The package itself: `__init__.py` when there is one, else an empty package."""
        init = self.folder / "__init__.py"
        if not init.is_file():
            package = types.ModuleType(self.name)
            package.__path__ = [str(self.folder)]
            sys.modules[self.name] = package
            return package
        spec = importlib.util.spec_from_file_location(self.name, init, submodule_search_locations=[str(self.folder)])
        return self._execute(spec, init)

    def _import_file(self, file: Path) -> types.ModuleType:
        name = f"{self.name}.{file.stem}"
        if name in sys.modules:  # imported by __init__.py or by another file of the folder
            return sys.modules[name]
        return self._execute(importlib.util.spec_from_file_location(name, file), file)

    def _execute(self, spec: importlib.machinery.ModuleSpec | None, file: Path) -> types.ModuleType:
        if spec is None or spec.loader is None:
            raise ModelError(f"Cannot import {self.what} file", self.shown(file))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything while importing
            sys.modules.pop(spec.name, None)
            where, line = self.failure_location(e, file)
            raise ModelError(f"Cannot import {self.what}: {import_failure(e, self.folder.parent)}", where,
                             line) from None
        return module


def import_failure(error: BaseException, root: Path) -> str:
    """What went wrong importing a user's file, in words: `Type: message`, and for a module that
    cannot be found, where Python looked for it. SQLMesh projects import their helpers by module
    name from the project root, which is on the import path (core/project/import_path.py): the
    hint says so, and which other directories Python searched."""
    message = error.msg if isinstance(error, SyntaxError) else str(error)
    text = f"{type(error).__name__}: {message}"
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return text
    top = error.name.split(".")[0]
    others = [p for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() != root.resolve()]
    shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return (f"{text}. The import path holds the project root {root} (so `import {top}` reads {root / top}.py or the "
            f"folder {root / top}/) and the Python environment's directories ({shown}): add the module to the "
            "project, or install the package that provides it")


def innermost_line(error: BaseException, filenames: set[str]) -> int | None:
    """The line of the innermost traceback frame in one of `filenames` (None if none is)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in filenames]
    return frames[-1].lineno if frames else None
