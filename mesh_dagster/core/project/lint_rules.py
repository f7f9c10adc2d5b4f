"""Linter rules: SQLMesh's `Rule` and `RuleViolation` (ours), the `LintModel` a rule checks, and
the built-in rules.

A rule is a subclass of `Rule` whose `check_model(model)` returns a `RuleViolation` (made by
`self.violation(...)`) or None; its name is its class name in lower case, and its docstring's first
line is the message of a violation that gives none. Project rules live in `linter/*.py` and import
these classes as SQLMesh's (`from sqlmesh.core.linter.rule import Rule, RuleViolation`: the names
of core/models/sqlmesh_names.py), so SQLMesh projects' rules load unmodified.

The built-in rules are those of SQLMesh's documentation, with its names: `ambiguousorinvalidcolumn`,
`invalidselectstarexpansion`, `noselectstar`, `nomissingaudits`, `nomissingowner`,
`nomissingexternalmodels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from mesh_dagster.core.models.kinds import BaseKind
from mesh_dagster.core.sql.query_columns import table_key


@dataclass
class LintModel:
    """What `check_model(model)` receives: a model as SQLMesh rules use it.

    `query` is the model's query as written, its macros rendered (a sqlglot expression; None for
    Python models and seeds: `is_sql`), and `render_query()` a copy of the query as it runs (its
    `SELECT *` expanded where the parents' columns are known); `columns_to_types` its output columns as sqlglot
    `DataType`s (`UNKNOWN` where the type cannot be known; None when the columns cannot); `audits`
    `(name, {arg: SQL})` pairs as SQLMesh gives them; `kind` has `.name` (`ModelKindName`) and the
    kind's flags (`is_view`, `is_incremental`, ...). The remaining fields serve the built-in rules:
    the parents' columns (`parent_columns`, None when unknown) and the tables it reads that no file
    declares (`undeclared_tables`)."""

    name: str
    kind: BaseKind
    dialect: str
    owner: str | None = None
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    audits: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    query: exp.Query | None = None
    rendered: exp.Query | None = None
    columns_to_types: dict[str, exp.DataType] | None = None
    depends_on: set[str] = field(default_factory=set)
    path: str | None = None
    line: int = 1
    query_line: int = 1
    is_python: bool = False
    parent_columns: dict[str, dict[str, str | None] | None] = field(default_factory=dict)
    undeclared_tables: list[str] = field(default_factory=list)

    @property
    def is_sql(self) -> bool:
        return self.query is not None

    def render_query(self) -> exp.Query | None:
        """The query as it runs, a copy the rule may change."""
        found = self.rendered if self.rendered is not None else self.query
        return found.copy() if found is not None else None

    def render_query_or_raise(self) -> exp.Query:
        if self.query is None:
            raise ValueError(f"Model {self.name} has no query")
        return self.render_query()  # type: ignore[return-value]


class RuleViolation:
    """A rule's finding on one model: its message, and the line it points at (default: the model's)."""

    def __init__(self, rule: Rule, violation_msg: str, line: int | None = None):
        self.rule = rule
        self.violation_msg = violation_msg
        self.line = line

    def __repr__(self) -> str:
        return f"{self.rule.name}: {self.violation_msg}"


class Rule:
    """The base class of a rule: name it by its class, describe it in its docstring, and return
    `self.violation()` from `check_model` when a model breaks it."""

    def __init__(self, context: Any = None):
        self.context = context  # the project being linted (core/project/linter.py's `LintContext`)

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    @property
    def summary(self) -> str:
        """The docstring's first line: the message of a violation that says nothing else."""
        doc = (type(self).__doc__ or "").strip()
        return doc.splitlines()[0] if doc else self.name

    def check_model(self, model: LintModel) -> RuleViolation | None:
        raise NotImplementedError(f"linter rule {type(self).__name__} defines no check_model(self, model)")

    def violation(self, violation_msg: str | None = None, line: int | None = None) -> RuleViolation:
        return RuleViolation(self, violation_msg or self.summary, line)


def _outer_selects(query: exp.Expr) -> list[exp.Select]:
    """The outermost SELECTs: one, or each branch of a set operation."""
    while isinstance(query, (exp.Subquery, exp.Paren)):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _outer_selects(query.this) + _outer_selects(query.expression)
    return [query] if isinstance(query, exp.Select) else []


def _has_star(select: exp.Select) -> bool:
    return any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
               for p in select.expressions)


class NoSelectStar(Rule):
    """Query should not contain SELECT * on its outer most projections, even if it can be expanded."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        if model.query is None or not any(_has_star(s) for s in _outer_selects(model.query)):
            return None
        return self.violation(line=model.query_line)


class InvalidSelectStarExpansion(Rule):
    """SELECT * on the outermost projections can only be used when every column it stands for is known."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        if model.query is None or not any(_has_star(s) for s in _outer_selects(model.query)):
            return None
        unknown = sorted(parent for parent, columns in model.parent_columns.items() if columns is None)
        if model.columns_to_types is not None and not unknown:
            return None
        tables = f": the columns of {', '.join(unknown)} are unknown (declare them in external_models.yaml)" \
            if unknown else ""
        return self.violation(f"SELECT * cannot be expanded{tables}", line=model.query_line)


class AmbiguousOrInvalidColumn(Rule):
    """A column is ambiguous (in more than one of the tables read) or is in none of them."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        if model.query is None:
            return None
        query = model.render_query_or_raise()
        ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
        read = {table_key(t) for t in query.find_all(exp.Table) if t.args.get("db") or t.name.lower() not in ctes}
        if any(model.parent_columns.get(t) is None for t in read):
            return None  # a table whose columns are unknown (its own, an undeclared one): nothing is sure
        schema: dict[str, Any] = {}
        for table in read:
            schema_name, _, table_name = table.rpartition(".")
            schema.setdefault(schema_name or "default", {})[table_name] = {
                c: (t or "string") for c, t in (model.parent_columns[table] or {}).items()}
        try:
            qualify(query, schema=schema or None, dialect="spark",
                    validate_qualify_columns=True)
        except OptimizeError as e:
            tables = ", ".join(sorted(read)) or "no table"
            return self.violation(f"{str(e).split('. Line:')[0]}: it is in none, or in more than one, of the "
                                  f"tables read ({tables})", line=model.query_line)
        except SqlglotError:
            return None  # not ours to judge: Spark's analysis of the query reports it
        return None


class NoMissingAudits(Rule):
    """Model `audits` must be set to test data quality."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        return self.violation() if not model.audits and not model.kind.is_symbolic else None


class NoMissingOwner(Rule):
    """Model owner should always be specified."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        return self.violation() if not model.owner else None


class NoMissingExternalModels(Rule):
    """All external tables a model reads must be declared in external_models.yaml."""

    def check_model(self, model: LintModel) -> RuleViolation | None:
        if not model.undeclared_tables:
            return None
        return self.violation(f"{', '.join(model.undeclared_tables)} not declared in external_models.yaml "
                              f"(`mesh create_external_models` declares them)")


BUILTIN_RULES: dict[str, type[Rule]] = {rule.__name__.lower(): rule for rule in (
    AmbiguousOrInvalidColumn, InvalidSelectStarExpansion, NoSelectStar, NoMissingAudits, NoMissingOwner,
    NoMissingExternalModels)}
# SQLMesh's other built-in rules, named when asked for rather than reported as unknown.
NOT_BUILT_IN = {"nomissingunittest": "is not available in mesh_dagster yet",
                "noambiguousprojections": "is not available in mesh_dagster yet (mesh refuses a query's unnamed "
                                          "or duplicate columns when it loads)"}
