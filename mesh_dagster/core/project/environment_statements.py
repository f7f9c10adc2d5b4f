"""`before_all` / `after_all`: SQL the project runs at the start and at the end of every apply and run.

They are lists in `config.yaml` (SQLMesh's "environment statements"). Each entry is SQL in the
project's dialect (`model_defaults.dialect`) that may use macros: the project's variables and
Python macros, the built-ins, and three values that describe the environment being worked on:

- `@this_env`: its name, a string literal (`'prod'`, `'dev'`);
- `@views`: its view names, an array of string literals (`ARRAY('db__dev.orders', ...)`);
- `@schemas`: the distinct schemas of those views, an array of string literals.

A Python macro reads the same values as `evaluator.this_env`, `evaluator.views` and
`evaluator.schemas` (a string and lists of strings), and `@runtime_stage` is `'before_all'` or
`'after_all'`. An entry that is one macro call may produce several statements (a macro returning
a list, `@IF(@this_env = 'prod', @grants())`) or none (`@IF(false, ...)`); an entry may also hold
several statements separated by `;`.

Names in the statements are run as written: unlike a model's query, a model's name is not
rewritten to its physical table (SQLMesh does that; a GRANT on `@views` would then need its
`replace=false` escape). Use `@views` / `@schemas` for the environment's objects.

Statements are checked as early as they can be: an entry without macros must parse when
`config.yaml` loads; one with macros is rendered when it is about to run. Every error names
the key and the entry's index as config errors do (`before_all.1`: the second entry) and its line in
`config.yaml`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.config.statements import parse_statements
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.evaluator import MacroEvaluator
from mesh_dagster.core.macros.syntax import Arg, temporal_locals
from mesh_dagster.core.macros.user import MacroRegistry


class Stage(str, Enum):
    """When the statements run; also the config key that holds them and `@runtime_stage`."""

    BEFORE_ALL = "before_all"
    AFTER_ALL = "after_all"


class EnvironmentStatementError(MeshError):
    """A `before_all` / `after_all` entry cannot be rendered or failed when it ran."""


@dataclass(frozen=True)
class EnvironmentNaming:
    """What `@this_env`, `@views` and `@schemas` stand for."""

    environment: str
    views: tuple[str, ...]

    @classmethod
    def of(cls, environment: str, models: Iterable[str]) -> EnvironmentNaming:
        """The naming of `environment` showing views of `models` (model names, in their order)."""
        return cls(environment, tuple(view_name(m, environment) for m in models))

    @property
    def schemas(self) -> tuple[str, ...]:
        """The views' schemas, each once, sorted."""
        return tuple(sorted({v.rpartition(".")[0] or "default" for v in self.views}))


@dataclass(frozen=True)
class StatementSource:
    """Where the entries were written, for messages: the config file and each entry's line."""

    path: str | None = None
    lines: Mapping[tuple[Stage, int], int] | None = None

    def line(self, stage: Stage, index: int) -> int | None:
        return (self.lines or {}).get((stage, index))

    @classmethod
    def of_config(cls, project_dir: Path, config: ProjectConfig) -> StatementSource:
        """The line of every entry of the project's config file."""
        shown, _ = config.where(())
        lines = {(stage, index): config.where((stage.value, index))[1]
                 for stage in Stage for index in range(len(config.statements(stage.value)))}
        return cls(shown, {key: line for key, line in lines.items() if line is not None})

    def error(self, stage: Stage, index: int, message: str, line: int | None = None) -> EnvironmentStatementError:
        return EnvironmentStatementError(f"{stage.value}.{index}: {message}", self.path,
                                         line or self.line(stage, index))


class EnvironmentMacroEvaluator(MacroEvaluator):
    """The evaluator `before_all` / `after_all` macros get: it knows the environment."""

    def __init__(self, naming: EnvironmentNaming, stage: Stage, **kwargs: Any):
        super().__init__(runtime_stage=stage.value, **kwargs)
        self.this_env: str = naming.environment
        self.views: list[str] = list(naming.views)
        self.schemas: list[str] = list(naming.schemas)
        self.locals["this_env"] = naming.environment
        self.locals["views"] = _string_array(naming.views)
        self.locals["schemas"] = _string_array(naming.schemas)


def _string_array(values: Sequence[str]) -> exp.Array:
    return exp.Array(expressions=[exp.Literal.string(v) for v in values])


def render_environment_statements(
    stage: Stage,
    statements: Sequence[str],
    naming: EnvironmentNaming,
    *,
    macros: MacroRegistry,
    variables: Mapping[str, Any],
    dialect: str,
    gateway: str | None = None,
    execution_time: datetime | None = None,
    source: StatementSource | None = None,
) -> list[tuple[int, str]]:
    """Each entry's statements in Spark SQL, as `(entry index, sql)`, in order."""
    source = source or StatementSource()
    evaluator = EnvironmentMacroEvaluator(
        naming, stage, dialect=dialect, registry=macros, variables=variables, gateway=gateway,
        locals=temporal_locals(None, None, execution_time), path=source.path,
    )
    out: list[tuple[int, str]] = []
    for index, text in enumerate(statements):
        line = source.line(stage, index) or 1
        try:
            out += [(index, sql) for sql in _render_entry(evaluator, text, line, dialect)]
        except EnvironmentStatementError:
            raise
        except MeshError as e:  # a macro failed: its message, at the entry's line
            raise source.error(stage, index, e.message, e.line) from None
        except (ParseError, TokenError) as e:
            raise source.error(stage, index, f"Cannot parse statement: {describe(e)}") from None
    return out


def _render_entry(evaluator: MacroEvaluator, text: str, line: int, dialect: str) -> list[str]:
    text = text.strip()
    value = evaluator.evaluate(Arg(text, line)) if text.startswith("@") else SQL(evaluator.expand(text, line))
    sqls: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        rendered = "" if item is None else evaluator.to_sql(item).strip()
        if rendered:
            sqls += [tree.sql(dialect=get_dialect("spark")) for tree in parse_statements(rendered, dialect)]
    return sqls
