"""What an environment's `before_all` / `after_all` may reach: its own objects only.

A development environment's statements run with the same Spark (and rights) as prod's, so a
statement naming prod's view — or a pushed branch's — would change another environment without
anyone reviewing that environment's plan. Rendered statements are therefore checked, at plan time
(with the plan's execution time, so a plan that would reach outside is refused before anything is
recorded) and again each time they are about to run (a macro may render differently on another
day), before any of the stage's statements runs. A statement is refused when it names:

- a view of another environment: a name in a schema of the project's models (`schema.model`: prod's)
  or in `<schema>__<env>` for another environment — or such a schema itself (`DROP SCHEMA`, `USE`);
- a physical table (`mesh__<schema>`) other than those of the versions the environment serves, or a
  physical schema itself.

Everything else is the user's and stays allowed: tables in schemas of no environment, `SET`, the
environment's own views and schemas (`@views`, `@schemas`), unqualified names (the current schema,
which a `USE` may only move to an allowed one). Names are found with sqlglot in every part of a
statement (the targets of CREATE, DROP, ALTER, INSERT, GRANT, ... and what they read). A statement
sqlglot has no grammar for (`MSCK REPAIR TABLE`, `ADD JAR`, `EXECUTE IMMEDIATE '...'`) cannot be
analysed: every name in its text, quoted strings included, is checked as if it named an object, so
it is refused if any could be another environment's (it is allowed only when none is).

Python code of a macro is reviewed code like a model's: what it does besides returning SQL is not
checked here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlglot import exp

from mesh_dagster.core.config.names import PHYSICAL_SCHEMA_PREFIX, PROD, view_schema
from mesh_dagster.core.config.statements import parse_statements
from mesh_dagster.core.project.environment_statements import (
    EnvironmentNaming,
    EnvironmentStatementError,
    Stage,
    StatementSource,
)
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.statements import EnvironmentStatements

# A dotted name in a statement's text (backquotes removed): what a statement sqlglot cannot parse may name.
_NAME = re.compile(r"[A-Za-z_][\w$]*(?:\s*\.\s*[A-Za-z_][\w$]*)*")
_SCHEMA_KINDS = frozenset({"SCHEMA", "DATABASE", "NAMESPACE"})


class StatementScopeError(EnvironmentStatementError):
    """A statement names an object of another environment, or a physical table it does not serve."""


@dataclass(frozen=True)
class StatementScope:
    """The objects one environment's statements may not name, as its record describes them."""

    environment: str
    model_schemas: frozenset[str]  # the schemas of its models with a view: prod's view schemas
    tables: frozenset[str]  # the physical tables of the versions it serves

    @classmethod
    def of(cls, env: Environment) -> StatementScope:
        """Its models with a physical table (an external or embedded one has no view: its schema may
        be anyone's), their schemas and tables."""
        tables = {s.name: s.table_name.lower() for s in env.snapshots if s.table_name}
        return cls(env.name, frozenset(name.rpartition(".")[0].lower() or "default" for name in tables),
                   frozenset(tables.values()))

    def check(self, stage: Stage, rendered: list[tuple[int, str]], source: StatementSource) -> None:
        """Raise StatementScopeError for the first rendered statement reaching outside the environment."""
        for index, sql in rendered:
            for tree in parse_statements(sql, "spark"):
                reason = self.refusal(tree)
                if reason is not None:
                    raise StatementScopeError(
                        f"{stage.value}.{index}: {reason}. The statements of '{self.environment}' may only "
                        "reach its own views (@views, in @schemas), the physical tables of the versions it "
                        "serves, and tables of no environment", source.path, source.line(stage, index))

    def refusal(self, tree: exp.Expr) -> str | None:
        """Why `tree` reaches outside the environment (the object it names, and whose it is), or None."""
        if isinstance(tree, exp.Command):
            return self._text_refusal(tree.sql(dialect="spark"))
        for table in tree.find_all(exp.Table):
            reason = self._object_refusal(*_named(tree, table))
            if reason is not None:
                return reason
        return None

    def _text_refusal(self, text: str) -> str | None:
        for match in _NAME.finditer(text.replace("`", "")):
            parts = [part.strip() for part in match.group().split(".")]
            reason = self._object_refusal(*(parts[-2:] if len(parts) > 1 else (parts[0], "")))
            if reason is not None:
                return f"{reason} (sqlglot cannot analyse this statement, so every name in its text counts)"
        return None

    def _object_refusal(self, schema: str, name: str) -> str | None:
        """Why the object `schema.name` (a schema when `name` is empty) is not this environment's."""
        schema, name = schema.lower(), name.lower()
        shown = f"{schema}.{name}" if name else schema
        if schema.startswith(PHYSICAL_SCHEMA_PREFIX):
            if name and f"{schema}.{name}" in self.tables:
                return None
            what = "a physical table of a version" if name else "the schema of physical tables of versions"
            return f"it names {shown}, {what} '{self.environment}' does not serve"
        owner = self._owner(schema)
        if owner is None:
            return None
        return f"it names {shown}, {'a view' if name else 'the schema of the views'} of environment '{owner}'"

    def _owner(self, schema: str) -> str | None:
        """The other environment whose views `schema` holds; None for this one's or a schema of no
        environment (an unqualified name is in the current schema: empty)."""
        if not schema or schema in {view_schema(s, self.environment) for s in self.model_schemas}:
            return None
        if schema in self.model_schemas:
            return PROD
        return next((schema[len(s) + 2:] for s in sorted(self.model_schemas)
                     if schema.startswith(f"{s}__") and len(schema) > len(s) + 2), None)


def _named(statement: exp.Expr, table: exp.Table) -> tuple[str, str]:
    """`(schema, name)` of an object a statement names; `name` is empty for a schema (`DROP SCHEMA s`,
    `USE s`), `schema` for an unqualified name."""
    if table.db:
        return table.db, table.name
    kind = statement.args.get("kind")
    kind_name = (kind.name if isinstance(kind, exp.Expr) else str(kind or "")).upper()
    if (isinstance(statement, exp.Use) and kind_name != "CATALOG") or kind_name in _SCHEMA_KINDS:
        return table.name, ""
    return "", table.name


def render_in_scope(statements: EnvironmentStatements, stage: Stage, env: Environment, *, root: Path | None,
                    gateway: str | None, execution_time: datetime | None) -> list[tuple[int, str]]:
    """The stage's statements rendered for `env` (its name and views), refused with
    StatementScopeError, naming the entry and its line, if one reaches outside the environment."""
    rendered = statements.render(stage, EnvironmentNaming.of(env.name, env.promoted), root=root,
                                 gateway=gateway, execution_time=execution_time)
    StatementScope.of(env).check(stage, rendered, statements.source())
    return rendered
