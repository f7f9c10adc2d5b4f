"""User macros: the `@macro` decorator, the registry of a project's macros, and their loader.

Functions in the project's `macros/*.py` are only tagged by the decorator (no global registry), so
loading a project twice, or two projects in one process, never mixes their macros.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mesh_dagster.core.config.user_modules import UserPackage
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.jinja import JinjaMacros, load_jinja_macros

USER_MACROS_PACKAGE = "mesh_user_macros"
REPO_PACKAGE_MARK = "__repo"  # `mesh_user_macros__repo1`: the macros of a second repository
_MACRO_ATTR = "__mesh_macro__"


@dataclass(frozen=True)
class MacroSpec:
    name: str
    metadata_only: bool = False


# ---------------------------------------------------------------------------------------------
# User macros: decorator, registry, loader


def macro(name: str | Callable | None = None, *, metadata_only: bool = False):
    """Mark a function in `macros/*.py` as a macro: `@macro()` or `@macro("name")`.

    The function is only tagged, not put in a global registry, so loading a project twice (or two
    projects in one process) never mixes their macros.
    """

    if callable(name):  # bare `@macro`
        return macro()(name)

    def tag(fn: Callable) -> Callable:
        setattr(fn, _MACRO_ATTR, MacroSpec((name or fn.__name__).lower(), metadata_only))
        return fn

    return tag


class MacroRegistry:
    """A project's user macros by lower-case name, and its Jinja macros (`macros/*.sql`)."""

    def __init__(self, jinja: JinjaMacros | None = None) -> None:
        self._functions: dict[str, Callable] = {}
        self._specs: dict[str, MacroSpec] = {}
        self._sources: dict[str, str] = {}
        self.jinja = jinja or JinjaMacros()

    def register(self, fn: Callable, name: str | None = None, metadata_only: bool | None = None) -> None:
        spec = getattr(fn, _MACRO_ATTR, None)
        spec = spec if isinstance(spec, MacroSpec) else MacroSpec((name or fn.__name__).lower())
        key = (name or spec.name).lower()
        self._functions[key] = fn
        self._specs[key] = MacroSpec(key, spec.metadata_only if metadata_only is None else metadata_only)
        self._sources.pop(key, None)

    def get(self, name: str) -> Callable | None:
        return self._functions.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._functions

    def __len__(self) -> int:
        return len(self._functions)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def is_metadata_only(self, name: str) -> bool:
        spec = self._specs.get(name.lower())
        return bool(spec and spec.metadata_only)

    def source(self, name: str) -> str:
        """The macro's source code: it goes into the fingerprint of every model that calls it."""
        key = name.lower()
        if key not in self._sources:
            fn = self._functions[key]
            try:
                self._sources[key] = inspect.getsource(fn)
            except (OSError, TypeError):
                code = getattr(fn, "__code__", None)
                self._sources[key] = repr(code.co_code) if code is not None else repr(fn)
        return self._sources[key]

    def used_by(self, sql_text: str) -> list[str]:
        """Names of the user macros `sql_text` calls (sorted)."""
        if not self._functions or "@" not in sql_text:
            return []
        return sorted({m.lower() for m in _CALL_NAMES.findall(sql_text) if m.lower() in self._functions})


_CALL_NAMES = re.compile(r"@([A-Za-z_]\w*)[ \t]*\(")


def load_macros(macros_dir: Path, repo: int = 0, shown: str | None = None) -> MacroRegistry:
    """Import `macros/` as the package `mesh_user_macros` (its `__init__.py` included) and every
    `macros/*.py` as `mesh_user_macros.<stem>`, and collect their `@macro` functions.

    A file the package's `__init__.py` already imported (`from .helpers import x`) is not run a
    second time. A file that fails to import is one error naming the file and line. The Jinja
    macros of `macros/*.sql` come with them (core/macros/jinja.py). The `repo`-th repository of
    a multi-repo project (core/project/repos.py) has a package of its own (`macros_package`), its
    files shown as `shown` (`../repo_2/macros`).
    """
    registry = MacroRegistry(load_jinja_macros(Path(macros_dir)))
    package = UserPackage(macros_package(repo), Path(macros_dir), "macros", shown)
    for module in package.import_all():
        _collect(module, registry, package)
    return registry


def macros_package(repo: int) -> str:
    """The package the macros of the `repo`-th repository of a project are imported as."""
    return USER_MACROS_PACKAGE if repo == 0 else f"{USER_MACROS_PACKAGE}{REPO_PACKAGE_MARK}{repo}"


def _collect(module: types.ModuleType, registry: MacroRegistry, package: UserPackage) -> None:
    for value in list(vars(module).values()):
        spec = getattr(value, _MACRO_ATTR, None) if callable(value) else None
        if not isinstance(spec, MacroSpec):
            continue
        existing = registry.get(spec.name)
        if existing is not None and package.defined_in(existing) == package.defined_in(value):
            continue  # one definition reached under two module names (`from macros.utils import x`)
        if existing is not None:
            raise ModelError(f"Macro '{spec.name}' is defined twice (also in {package.defined_in(existing)[0]})",
                             *package.defined_in(value))
        registry.register(value)


