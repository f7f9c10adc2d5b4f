"""`sqlmesh`, for project files written for SQLMesh, when SQLMesh itself is not installed.

A SQLMesh project's Python files say `from sqlmesh import model, macro, SQL, ExecutionContext,
signal, DatetimeRanges`, `from sqlmesh.core.model.kind import ModelKindName`, `from
sqlmesh.core.macros import MacroEvaluator` or `from sqlmesh.utils.date import to_ds`. So that such
files load unmodified, these names (and only these: `NAMES`) are answered with mesh_dagster's own
under the module names SQLMesh gives them. The finder is appended to `sys.meta_path`, after every
other one: an installed SQLMesh is always found first and never shadowed. Anything else of
SQLMesh's is a `ModuleNotFoundError` or `AttributeError` naming what this namespace provides.

Values are resolved on first use by module path (like `mesh_dagster`'s own lazy exports), so the
names of layers above this one (`signal`) cost nothing until a file asks for them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from mesh_dagster.core.config import python_config
from mesh_dagster.core.models import sqlmesh_kinds
from mesh_dagster.core.time.dates import TimeLike, to_datetime, to_ds, to_ms  # noqa: F401 - to_ds: sqlmesh.utils.date

DatetimeRanges = list[tuple[datetime, datetime]]  # what a signal receives and may return


def to_date(value: TimeLike) -> date:
    """SQLMesh's `to_date`: the UTC date of any time value."""
    return to_datetime(value).date()


def to_timestamp(value: TimeLike) -> int:
    """SQLMesh's `to_timestamp`: epoch milliseconds."""
    return to_ms(value)


_PYTHON_MODEL = "mesh_dagster.core.models.python_model"
_MACROS = "mesh_dagster.core.macros.user"
_HERE = __name__
_KIND = ("mesh_dagster.core.models.kinds_base", "KindName")
_CONFIG = python_config.__name__
_CONFIG_NAMES = ("Config", "ModelDefaultsConfig", "GatewayConfig", "SparkConnectionConfig", "DuckDBConnectionConfig",
                 "LinterConfig", "PlanConfig", "NameInferenceConfig", "CategorizerConfig", "AutoCategorizationMode",
                 "EnvironmentSuffixTarget")
_COMMON = ("VirtualEnvironmentMode", "TableNamingConvention")
_CONNECTIONS = tuple(n for n in python_config.OTHER_CLASSES if n.endswith("ConnectionConfig"))
_LINTER = "mesh_dagster.core.project.lint_rules"
_KIND_CLASSES = {name: (sqlmesh_kinds.__name__, name) for name in sqlmesh_kinds.NAMES}  # SQLMesh's kind classes
# module -> its names -> (where ours is defined, our name)
NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "sqlmesh": {"model": (_PYTHON_MODEL, "model"), "ExecutionContext": (_PYTHON_MODEL, "ExecutionContext"),
                "macro": (_MACROS, "macro"), "SQL": ("mesh_dagster.core.macros.coercion", "SQL"),
                "signal": ("mesh_dagster.core.project.signals", "signal"), "DatetimeRanges": (_HERE, "DatetimeRanges")},
    "sqlmesh.core": {},
    "sqlmesh.core.model": {"model": (_PYTHON_MODEL, "model"), "ModelKindName": _KIND, **_KIND_CLASSES},
    "sqlmesh.core.model.kind": {"ModelKindName": _KIND, **_KIND_CLASSES},
    "sqlmesh.core.macros": {"macro": (_MACROS, "macro"), "MacroEvaluator": ("mesh_dagster.core.macros.evaluator",
                                                                            "MacroEvaluator")},
    "sqlmesh.core.context": {"ExecutionContext": (_PYTHON_MODEL, "ExecutionContext")},
    "sqlmesh.core.signal": {"signal": ("mesh_dagster.core.project.signals", "signal")},
    "sqlmesh.core.config": {name: (_CONFIG, name) for name in (*_CONFIG_NAMES, *_COMMON, *_CONNECTIONS)},
    "sqlmesh.core.config.common": {name: (_CONFIG, name) for name in ("EnvironmentSuffixTarget", *_COMMON)},
    "sqlmesh.core.config.connection": {name: (_CONFIG, name) for name in (
        "SparkConnectionConfig", "DuckDBConnectionConfig", *_CONNECTIONS)},
    "sqlmesh.core.config.linter": {"LinterConfig": (_CONFIG, "LinterConfig")},
    "sqlmesh.core.notification_target": {name: (_CONFIG, name) for name in (
        "NotificationEvent", *(n for n in python_config.OTHER_CLASSES if n.endswith("NotificationTarget")))},
    "sqlmesh.core.user": {name: (_CONFIG, name) for name in ("User", "UserRole")},
    "sqlmesh.core.linter": {},
    "sqlmesh.core.linter.rule": {name: (_LINTER, name) for name in ("Rule", "RuleViolation")},  # linter/*.py
    "sqlmesh.utils": {},
    "sqlmesh.utils.date": {name: (_HERE, name) for name in ("to_date", "to_ds", "to_datetime", "to_timestamp",
                                                             "DatetimeRanges")},
}
NAMES["sqlmesh.core.model"]["Model"] = (_LINTER, "LintModel")  # what a linter rule's `check_model` receives
MARK = "__mesh_dagster_names__"  # set on the modules this finder makes
# SQLMesh names that cannot work here, and what to use instead (refused by name, at the import's line).
_CUSTOM_MATERIALIZATION = ("SQLMesh's CustomMaterialization works on SQLMesh's engine adapters, which mesh_dagster "
                           "does not have: subclass mesh_dagster.Materialization instead (`from mesh_dagster import "
                           "Materialization`; NAME = '...', insert(self, table, query, context); see the README)")
REFUSED_NAMES = {"CustomMaterialization": _CUSTOM_MATERIALIZATION, "CustomKind": _CUSTOM_MATERIALIZATION}
REFUSED_MODULES = {"sqlmesh.core.snapshot": _CUSTOM_MATERIALIZATION}  # and its submodules (`.evaluator`)


class _Names(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and makes the modules of `NAMES` (packages: every one may have submodules)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "sqlmesh" and not fullname.startswith("sqlmesh."):
            return None
        top = sys.modules.get("sqlmesh")
        if top is not None and not getattr(top, MARK, False):
            return None  # SQLMesh is installed: its package is never filled with ours
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        refused = next((why for name, why in REFUSED_MODULES.items()
                        if spec.name == name or spec.name.startswith(name + ".")), None)
        if refused is not None:
            raise ModuleNotFoundError(f"No module named '{spec.name}': {refused}", name=spec.name)
        if spec.name not in NAMES:
            raise ModuleNotFoundError(f"No module named '{spec.name}': SQLMesh is not installed, and mesh_dagster "
                                      f"provides only {_offered()}", name=spec.name)
        module = types.ModuleType(spec.name, f"mesh_dagster's SQLMesh names ({__name__})")
        module.__path__ = []  # a package: `sqlmesh.core` etc. are found by this finder too
        setattr(module, MARK, True)
        module.__getattr__ = _resolver(spec.name)  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _resolver(module_name: str) -> Any:
    def resolve(name: str) -> Any:
        found = NAMES[module_name].get(name)
        if found is None and name in REFUSED_NAMES:
            raise ImportError(f"cannot import {name} from {module_name}: {REFUSED_NAMES[name]}", name=module_name)
        if found is None:
            if name.startswith("__"):
                raise AttributeError(name)  # what tools probe (`__wrapped__`...): plainly absent
            # ImportError, not AttributeError, so that `from sqlmesh import X` shows this line
            raise ImportError(f"cannot import {name} from {module_name}: SQLMesh is not installed, and mesh_dagster "
                              f"provides only {_offered()}", name=module_name)
        return getattr(importlib.import_module(found[0]), found[1])

    return resolve


def _offered() -> str:
    return "; ".join(f"{module} ({', '.join(names)})" for module, names in NAMES.items() if names)


_FINDER = _Names()


def install() -> None:
    """Answer `import sqlmesh...` with these names where nothing else does (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
