"""SQLMesh's Python configuration, `config.py`: its `Config` classes (ours), and the settings they
stand for.

A SQLMesh project may configure itself with a `config.py` that builds a
`sqlmesh.core.config.Config(...)` object (named `config`). When SQLMesh is not installed, the
names such files import (`Config`, `ModelDefaultsConfig`, `GatewayConfig`, `LinterConfig`, ...:
`CLASSES`) are these lightweight classes, which only collect their keyword arguments and where
they were written (core/models/sqlmesh_names.py answers `from sqlmesh.core.config import ...` with
them). `settings` turns the object into the very dict `config.yaml` would give, so the same
`ProjectConfig` validation applies with the same refusals, each reported at the line of the
keyword that caused it (`PythonSource.line`).
"""

from __future__ import annotations

import ast
import copy
import sys
import traceback
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

from mesh_dagster.core.config.files import read_text
from mesh_dagster.core.errors import ConfigError

CONFIG_PY = "config.py"
CONFIG_NAME = "config"  # the object SQLMesh reads from config.py unless told another (`--config`)

Loc = tuple[str | int, ...]
_Span = tuple[int, int, int, int]  # lineno, end_lineno, col_offset, end_col_offset of a call


class ConfigObject:
    """One of SQLMesh's config classes: its keyword arguments, kept as given (validation is
    `ProjectConfig`'s, as for config.yaml), and the span of the call that made it."""

    FIXED: ClassVar[dict[str, Any]] = {}  # settings the class itself stands for (a connection's `type`)

    _OWN = ("settings", "made_at")

    def __init__(self, **settings: Any):
        object.__setattr__(self, "settings", settings)
        object.__setattr__(self, "made_at", _call_site(sys._getframe(1)))

    def __getattr__(self, name: str) -> Any:
        # Only for names that are not attributes: the settings given (`config.model_defaults.dialect`).
        if name.startswith("__") or name in self._OWN:
            raise AttributeError(name)
        try:
            return self.settings[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no setting '{name}' (mesh_dagster's SQLMesh config "
                                 f"classes hold the settings given: {', '.join(self.settings) or 'none'})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        # `config.variables = {...}` after the call: a setting like any other (never a silent no-op).
        self.settings[name] = value

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.settings.items())
        return f"{type(self).__name__}({args})"

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> ConfigObject:
        """SQLMesh's configs are pydantic models: `base.model_copy(update={...})` derives another, whose
        settings are `update` over this one's (refusals then point at the line of that call)."""
        settings = {**(copy.deepcopy(self.settings) if deep else self.settings), **(update or {})}
        derived = object.__new__(type(self))
        object.__setattr__(derived, "settings", settings)
        object.__setattr__(derived, "made_at", _call_site(sys._getframe(1)))
        return derived

    copy = model_copy  # pydantic 1's name for it, which SQLMesh projects still write


class Config(ConfigObject):
    """The project configuration (`config.yaml`'s root keys as keywords)."""


class ModelDefaultsConfig(ConfigObject):
    """`model_defaults`."""


class GatewayConfig(ConfigObject):
    """A gateway: `connection`, `state_connection`, `variables`, ..."""


class LinterConfig(ConfigObject):
    """`linter`: `enabled`, `rules`, `warn_rules`, `ignored_rules`."""


class PlanConfig(ConfigObject):
    """`plan`: `auto_categorize_changes`, `include_unmodified`, ..."""


class CategorizerConfig(ConfigObject):
    """`plan.auto_categorize_changes`: `sql`, `python`, `seed`, `external`."""


class NameInferenceConfig(ConfigObject):
    """`model_naming` (SQLMesh's `infer_names`)."""


class SparkConnectionConfig(ConfigObject):
    """A Spark connection: `type: spark` with the keywords as its settings."""

    FIXED = {"type": "spark"}


class DuckDBConnectionConfig(ConfigObject):
    """A DuckDB connection: `type: duckdb`, accepted as in config.yaml (a gateway of another engine,
    refused only when selected)."""

    FIXED = {"type": "duckdb"}


def _fixed(class_name: str, type_name: str, what: str) -> type[ConfigObject]:
    return type(class_name, (ConfigObject,), {"FIXED": {"type": type_name}, "__module__": __name__,
                                             "__doc__": f"SQLMesh's {class_name}: {what} `type: {type_name}`."})


# Other engines' connections and SQLMesh's notification targets: their `type`, as config.yaml writes
# it; the settings say what is refused and where (a gateway of another engine is refused only when
# selected; a notification target other than a webhook at its line).
OTHER_CLASSES: dict[str, type[ConfigObject]] = {
    name: _fixed(name, type_name, what) for name, type_name, what in (
        *((f"{engine}ConnectionConfig", type_name, "a connection of") for engine, type_name in (
            ("MotherDuck", "motherduck"), ("Snowflake", "snowflake"), ("Databricks", "databricks"),
            ("BigQuery", "bigquery"), ("GCPPostgres", "gcp_postgres"), ("Redshift", "redshift"),
            ("Postgres", "postgres"), ("MySQL", "mysql"), ("MSSQL", "mssql"), ("AzureSQL", "azuresql"),
            ("Fabric", "fabric"), ("Trino", "trino"), ("Clickhouse", "clickhouse"), ("Athena", "athena"),
            ("Risingwave", "risingwave"), ("StarRocks", "starrocks"), ("Db2", "db2"))),
        *((f"{kind}NotificationTarget", type_name, "a notification target of") for kind, type_name in (
            ("Console", "console"), ("SlackWebhook", "slack_webhook"), ("SlackApi", "slack_api"),
            ("BasicSMTP", "smtp"), ("Generic", "generic"))),
    )
}
globals().update(OTHER_CLASSES)  # importable by name, as sqlmesh_names resolves them


class User(ConfigObject):
    """SQLMesh's `User(username=..., roles=[...])`, for `users=[...]` (which mesh_dagster refuses by
    name: its approvals are `mesh plans approve`'s)."""


class UserRole(str, Enum):
    REQUIRED_APPROVER = "required_approver"


class NotificationEvent(str, Enum):
    APPLY_START = "apply_start"
    APPLY_END = "apply_end"
    RUN_START = "run_start"
    RUN_END = "run_end"
    MIGRATION_START = "migration_start"
    MIGRATION_END = "migration_end"
    APPLY_FAILURE = "apply_failure"
    RUN_FAILURE = "run_failure"
    AUDIT_FAILURE = "audit_failure"
    MIGRATION_FAILURE = "migration_failure"


class VirtualEnvironmentMode(str, Enum):
    FULL = "full"
    DEV_ONLY = "dev_only"


class TableNamingConvention(str, Enum):
    SCHEMA_AND_TABLE = "schema_and_table"
    TABLE_ONLY = "table_only"
    HASH_MD5 = "hash_md5"


class AutoCategorizationMode(str, Enum):
    FULL = "full"
    SEMI = "semi"
    OFF = "off"


class EnvironmentSuffixTarget(str, Enum):
    SCHEMA = "schema"
    TABLE = "table"
    CATALOG = "catalog"


CLASSES: tuple[type, ...] = (
    Config, ModelDefaultsConfig, GatewayConfig, LinterConfig, PlanConfig, CategorizerConfig, NameInferenceConfig,
    SparkConnectionConfig, DuckDBConnectionConfig, AutoCategorizationMode, EnvironmentSuffixTarget,
)


@dataclass(frozen=True)
class _CallSite:
    file: str
    span: _Span


def _call_site(frame: FrameType | None) -> _CallSite | None:
    """Where the calling code made the object: its file and the span of the call expression."""
    if frame is None:
        return None
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if index >= len(positions) or any(p is None for p in positions[index]):
        return _CallSite(frame.f_code.co_filename, (frame.f_lineno or 0, 0, -1, -1))
    line, end_line, col, end_col = positions[index]
    return _CallSite(frame.f_code.co_filename, (line or 0, end_line or 0, col or 0, end_col or 0))


# -- the settings an object stands for, and the line of each ------------------------------------


@dataclass
class PythonSource:
    """The lines of config.py's settings: each key's path (as in config.yaml) → its line."""

    file: Path
    lines: dict[Loc, int] = field(default_factory=dict)
    _keywords: dict[_Span, dict[str, int]] = field(default_factory=dict)

    def line(self, loc: Loc) -> int | None:
        """The line of the keyword at `loc`, or of the closest enclosing one written in config.py."""
        for end in range(len(loc), -1, -1):
            found = self.lines.get(tuple(loc[:end]))
            if found is not None:
                return found
        return None

    def keyword_lines(self, site: _CallSite | None) -> tuple[int | None, dict[str, int]]:
        """The line of a call made in config.py, and of each of its keywords (none elsewhere)."""
        if site is None or Path(site.file).resolve() != self.file.resolve():
            return None, {}
        if not self._keywords:
            self._keywords.update(_calls(read_text(self.file, CONFIG_PY, ConfigError)))
        exact = self._keywords.get(site.span)
        if exact is None:  # a position Python did not give precisely: the call's first line
            return site.span[0], {}
        return site.span[0], exact


def _calls(text: str) -> dict[_Span, dict[str, int]]:
    """Every call of config.py by span: its keywords' lines."""
    out: dict[_Span, dict[str, int]] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            span = (node.lineno, node.end_lineno or node.lineno, node.col_offset, node.end_col_offset or 0)
            out[span] = {kw.arg: kw.lineno for kw in node.keywords if kw.arg is not None}
    return out


def settings(value: Any, source: PythonSource, loc: Loc = (), line: int | None = None) -> Any:
    """`value` as config.yaml would hold it (objects as mappings, enums as their values), noting in
    `source` the line of each key: `line` is that of the keyword holding `value` (None: a mapping's
    entry, which has the line of the object it is, else of the mapping)."""
    if isinstance(value, ConfigObject):
        made, keywords = source.keyword_lines(value.made_at)
        line = line or made
    if line is not None:
        source.lines.setdefault(loc, line)
    if isinstance(value, ConfigObject):
        out = dict(value.FIXED)
        for key, item in value.settings.items():
            out[key] = settings(item, source, loc + (key,), keywords.get(key) or line)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {key: settings(item, source, loc + (str(key),)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [settings(item, source, loc + (index,)) for index, item in enumerate(value)]
    return value


# -- running config.py --------------------------------------------------------------------------


def read_python_config(project_dir: Path, name: str = CONFIG_NAME) -> tuple[dict[str, Any], PythonSource]:
    """The settings of the `Config` object `name` of `project_dir/config.py`, and their lines.

    The file runs as SQLMesh runs it (its imports resolved against the project root, which the
    caller has put on the import path, and SQLMesh's names, which it has installed). A file that
    raises is refused at its line; so is a `config` that is missing or not a `Config`."""
    path = project_dir / CONFIG_PY
    namespace = _run(path)
    found = namespace.get(name)
    if not isinstance(found, Config):
        configs = sorted(k for k, v in namespace.items() if isinstance(v, Config))
        if found is None:
            known = f"it defines {', '.join(configs)}" if configs else "it defines no Config object"
            raise ConfigError(f"config.py has no `{name}` (the Config object mesh reads, as SQLMesh does by "
                              f"default): {known}; name the one to use `{name}`", CONFIG_PY, 1)
        theirs = "" if type(found).__name__ != "Config" else " (SQLMesh's own, installed: mesh reads only the " \
                                                                "Config of its compatibility names)"
        raise ConfigError(f"`{name}` in config.py is a {type(found).__name__}, not a "
                          f"sqlmesh.core.config.Config{theirs}", CONFIG_PY, _assignment_line(path, name))
    source = PythonSource(path)
    raw = settings(found, source)
    return raw, source


def _run(path: Path) -> dict[str, Any]:
    """config.py's top-level names after running it; an error is refused at the file's line."""
    text = read_text(path, CONFIG_PY, ConfigError)
    try:
        code = compile(text, str(path), "exec")
    except SyntaxError as e:
        raise ConfigError(f"Invalid Python: {e.msg}", CONFIG_PY, e.lineno) from None
    namespace: dict[str, Any] = {"__name__": "mesh_user_config", "__file__": str(path)}
    try:
        exec(code, namespace)  # noqa: S102 - the user's own configuration file, as SQLMesh runs it
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path.resolve()]
        line = frames[-1].lineno if frames else None
        raise ConfigError(f"config.py failed: {type(e).__name__}: {e}", CONFIG_PY, line) from None
    return namespace


def _assignment_line(path: Path, name: str) -> int | None:
    for node in ast.walk(ast.parse(read_text(path, CONFIG_PY, ConfigError))):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.lineno
    return None
