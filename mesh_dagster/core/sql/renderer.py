"""Rendering a model's query for a stage: macros expanded, references rewritten, Spark SQL out.

Rendering is on the hot path of every plan (a thousand models must load in seconds), so it parses
each distinct text once (a small cache), walks the tree once to collect what it rewrites, and runs
sqlglot's optimizer only where hand-written rules cannot be sure (`*` over USING / NATURAL joins,
PIVOT, LATERAL VIEW: see core/sql/query_columns.py). Transpiling from the model's dialect is sqlglot's
generator's job: the tree is dialect-neutral, `.sql(dialect="spark")` writes Spark.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.depth import def_line_key
from mesh_dagster.core.macros.evaluator import MacroEvaluator
from mesh_dagster.core.macros.jinja import JinjaValues, is_jinja, line_key
from mesh_dagster.core.macros.jinja import render as render_jinja
from mesh_dagster.core.macros.syntax import lookup, normalize_name, temporal_locals
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.dialect_fixes import fix_transpilation
from mesh_dagster.core.sql.query_columns import expand_stars, query_columns, table_key
from mesh_dagster.core.time.time_column import TimeColumnError, find_type, interval_condition

SPARK = get_dialect("spark")
T = TypeVar("T")
_MAX_EMBEDDING_DEPTH = 32


@dataclass
class RenderContext:
    """Everything a render depends on besides the model itself."""

    start: datetime | None = None  # inclusive, UTC
    end: datetime | None = None  # EXCLUSIVE, UTC
    execution_time: datetime | None = None
    runtime_stage: str = "loading"
    # model name 'schema.table' -> fully qualified 'schema.table' to read instead (table or view)
    table_mapping: dict[str, str] = field(default_factory=dict)
    this_model: str | None = None  # physical table of the model being rendered
    variables: dict[str, Any] = field(default_factory=dict)
    # model name -> ordered column -> Spark type text (None if unknown)
    schemas: dict[str, dict[str, str | None]] = field(default_factory=dict)
    embedded: dict[str, Model] = field(default_factory=dict)  # EMBEDDED models, inlined as subqueries
    gateway: str | None = None
    # Type of the model's time column in its physical table (what decides interval bounds, see
    # core/time/time_column.py); None when no table is at hand, then the declared `columns` decide.
    time_column_type: str | None = None


# ---------------------------------------------------------------------------------------------
# Public API


def render_query(model: Model, ctx: RenderContext, macros: MacroRegistry) -> exp.Query:
    """The model's query as a tree to be written with `.sql(dialect="spark")` (the caller owns it)."""
    return _render_query(model, ctx, macros, 0)


def read_rendered(model: Model, ctx: RenderContext, macros: MacroRegistry, reader: Callable[[exp.Query], T]) -> T:
    """What `reader` finds in the model's rendered query; it must leave the tree as it is.

    When rendering changes nothing in the parsed tree (no `*` to expand, no table to map, no
    model to inline), the reader sees the parse cache's own tree, which stays there: the plan
    rendering the same query next (its canonical text) takes it instead of parsing the query a
    second time, a seventh of a cold `mesh plan` of 1,000 models."""
    if ctx.table_mapping or ctx.embedded:
        return reader(render_query(model, ctx, macros))
    text = expand_query(model, ctx, macros)
    found = _parse_query(text, model.dialect, model.path, model.query_line,
                         reader=lambda tree: _MISSING if tree.find(exp.Star) else reader(tree))
    return reader(_render_text(text, model, ctx, macros, 0)) if found is _MISSING else found


def render_sql(model: Model, ctx: RenderContext, macros: MacroRegistry, pretty: bool = False) -> str:
    return render_query(model, ctx, macros).sql(dialect=SPARK, pretty=pretty, copy=False)


def render_statements(statements: list[str], model: Model, ctx: RenderContext, macros: MacroRegistry) -> list[str]:
    """Pre/post statements in Spark SQL; statements a macro removed (`@IF(false, ...)`) are dropped."""
    out: list[str] = []
    evaluator: MacroEvaluator | None = None
    for text in statements:
        if is_jinja(text):
            text = _jinja(text, model, ctx, macros, model.line_of(line_key(text)))
        if "@" in text:
            evaluator = evaluator or _model_evaluator(model, ctx, macros, model.line)
            text = evaluator.expand(text, model.line)
        text = text.strip().rstrip(";").strip()
        if not text:
            continue
        for statement in _parse_statements(text, model.dialect, model.path, model.line):
            _rewrite_references(statement, ctx, macros, _collect(statement), 0)
            out.append(statement.sql(dialect=SPARK, copy=False))
    return out


def render_audit(
    query: str,
    dialect: str,
    args: Mapping[str, str | exp.Expr],
    model: Model,
    ctx: RenderContext,
    macros: MacroRegistry,
    *,
    path: str | None = None,
    line: int = 1,
) -> str:
    """An audit's query in Spark SQL.

    `@this_model` is the model's table; for an INCREMENTAL_BY_TIME_RANGE model rendered for an
    interval it becomes a subquery holding only that interval's rows, so an audit never fails on
    rows some other run wrote. `args` (`@column`...) are parsed values (or SQL texts) and shadow
    everything else.
    """
    this_model = ctx.this_model or model.name
    evaluator = _evaluator(ctx, macros, dialect or model.dialect, this_model, model.kind.name.value,
                           path or model.path, line, model.blueprint_variables)
    for name, value in args.items():
        evaluator.locals[name.lower()] = SQL(value) if isinstance(value, str) else value
    text = evaluator.expand(audit_jinja(query, model, ctx, macros, path or model.path, line), line)
    tree = _parse_query(text, dialect or model.dialect, path or model.path, line, "audit")
    if model.time_column and ctx.start is not None and ctx.end is not None:
        _filter_this_model(tree, model, ctx, normalize_name(this_model))
    collected = _collect(tree)
    if collected.has_star:
        expand_stars(tree, ctx.schemas, collected.ctes)
    _rewrite_references(tree, ctx, macros, collected, 0)
    return tree.sql(dialect=SPARK, copy=False)


def referenced_tables(model: Model, macros: MacroRegistry, variables: dict) -> set[str]:
    """Lower-case names of the tables the query reads (CTEs and the model itself excluded)."""
    names = query_references(model, macros, variables)
    names.discard(model.name)
    return names


def query_references(model: Model, macros: MacroRegistry, variables: dict) -> set[str]:
    """Lower-case names of the tables the query reads, CTEs excluded, the model's own name included
    when it reads itself (a self-referencing model)."""
    if model.query is None:
        return set()
    text = expand_query(model, RenderContext(variables=variables), macros)
    return set(_parse_query(text, model.dialect, model.path, model.query_line, reader=_table_names))


def _table_names(tree: exp.Query) -> set[str]:
    names: set[str] = set()
    ctes: set[str] = set()
    for node in tree.walk():
        if type(node) is exp.Table:
            if isinstance(node.this, exp.Identifier):
                names.add(table_key(node))
        elif type(node) is exp.CTE:
            ctes.add(node.alias_or_name.lower())
    return names - ctes


def output_columns(
    model: Model, macros: MacroRegistry, variables: dict, schemas: dict[str, dict[str, str | None]]
) -> dict[str, str | None] | None:
    """Ordered output columns → Spark type (None when not cheaply known); None if undeterminable."""
    if model.columns:
        return dict(model.columns)
    if model.query is None:
        return None
    tree = render_query(model, RenderContext(variables=variables, schemas=schemas), macros)
    return query_columns(tree, schemas)


def expand_query(model: Model, ctx: RenderContext, macros: MacroRegistry) -> str:
    """The query text with macros expanded, still in the model's dialect."""
    if model.query is None:
        raise ModelError(f"Model {model.name} has no SQL query", model.path, model.line)
    text = model.query
    if is_jinja(text):  # Jinja first, then the `@` macros it may have written or left, as in SQLMesh
        text = _jinja(text, model, ctx, macros, model.query_line)
    if "@" not in text:
        return text
    evaluator = _model_evaluator(model, ctx, macros, model.query_line)
    return evaluator.expand(text, model.query_line)


def check_jinja_statements(model: Model, macros: MacroRegistry, variables: dict) -> None:
    """Render the model's Jinja statements as loading does its query (placeholder times), so that
    an undefined name in one is refused when the project loads, at its line."""
    for text in (*model.pre_statements, *model.post_statements):
        if is_jinja(text):
            _jinja(text, model, RenderContext(variables=variables), macros, model.line_of(line_key(text)))


def audit_jinja(query: str, model: Model, ctx: RenderContext, macros: MacroRegistry, path: str | None,
                line: int) -> str:
    """An audit's query with its Jinja rendered (`{{ this_model }}`: the audited table), if it is a block."""
    return _jinja(query, model, ctx, macros, line, path) if is_jinja(query) else query


def _jinja(text: str, model: Model, ctx: RenderContext, macros: MacroRegistry, line: int,
           path: str | None = None) -> str:
    values = JinjaValues(start=ctx.start, end=ctx.end, execution_time=ctx.execution_time, variables=ctx.variables,
                         this_model=ctx.this_model or model.name, table_mapping=ctx.table_mapping,
                         runtime_stage=ctx.runtime_stage, gateway=ctx.gateway, dialect=model.dialect)
    return render_jinja(text, macros.jinja, values, path or model.path, line)


def model_evaluator(model: Model, ctx: RenderContext, macros: MacroRegistry) -> MacroEvaluator:
    """An evaluator with the model's `@DEF`s applied (for Python models and tests)."""
    return _model_evaluator(model, ctx, macros, model.line)


# ---------------------------------------------------------------------------------------------
# Evaluators


def _evaluator(ctx: RenderContext, macros: MacroRegistry, dialect: str, this_model: str, kind_name: str,
               path: str | None, line: int, blueprint: Mapping[str, str] | None = None) -> MacroEvaluator:
    return MacroEvaluator(
        dialect,
        registry=macros,
        variables=ctx.variables,
        blueprint_variables={key: SQL(text) for key, text in (blueprint or {}).items()},
        locals=temporal_locals(ctx.start, ctx.end, ctx.execution_time),
        runtime_stage=ctx.runtime_stage,
        this_model=this_model,
        model_kind_name=kind_name,
        gateway=ctx.gateway,
        schemas=ctx.schemas,
        table_mapping=ctx.table_mapping,
        path=path,
        line=line,
    )


def _model_evaluator(model: Model, ctx: RenderContext, macros: MacroRegistry, line: int) -> MacroEvaluator:
    evaluator = _evaluator(ctx, macros, model.dialect, ctx.this_model or model.name, model.kind.name.value,
                           model.path, line, model.blueprint_variables)
    for index, definition in enumerate(model.macro_definitions):
        evaluator.define(definition, model.line_of(def_line_key(index)))
    evaluator.line = line
    return evaluator


# ---------------------------------------------------------------------------------------------
# Parsing


_PARSED: OrderedDict[tuple[str, str], exp.Expr | None] = OrderedDict()
# Loading a project parses every query for its references, then takes each tree out again to
# infer its columns: a cache smaller than the project re-parses the difference (a third of a
# 5,000-model load). Trees are about 25 KB; the second pass empties the cache again.
_PARSED_MAX = 8192
_PARSED_LOCK = threading.Lock()
_MISSING: Any = object()


def _parse_text(text: str, dialect: str, reader: Callable[[exp.Expr | None], T] | None = None) -> Any:
    """Parse once per text: a `reader` sees a cached tree (under a lock, so nobody takes it from
    under it); without one the caller gets a tree of its own to change, taken out of the cache
    when there is one. Nothing is ever copied: sqlglot's deep copy costs more than a parse."""
    key = (text, dialect)
    if reader is None:
        with _PARSED_LOCK:
            tree = _PARSED.pop(key, _MISSING)
        return _parse_one(text, dialect) if tree is _MISSING else tree
    with _PARSED_LOCK:
        tree = _PARSED.get(key, _MISSING)
        if tree is not _MISSING:
            _PARSED.move_to_end(key)
            return reader(tree)
    tree = _parse_one(text, dialect)
    with _PARSED_LOCK:
        _PARSED[key] = tree
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
        return reader(tree)


def release_parsed() -> None:
    """Empty the parse cache. Once a plan has rendered its snapshots, the trees the load left
    there for it (see `read_rendered`) serve nothing more, and a long-lived process (a Dagster code
    server) would keep them: some 23 MB for 1,000 models."""
    with _PARSED_LOCK:
        _PARSED.clear()


def _parse_one(text: str, dialect: str) -> exp.Expr | None:
    """Parsed, with the functions sqlglot would transpile to other results rewritten (dialect_fixes)."""
    tree = sqlglot.parse_one(text, read=get_dialect(dialect))
    return None if tree is None else fix_transpilation(tree, dialect)


def _parse_query(text: str, dialect: str, path: str | None, line: int, what: str = "query",
                 reader: Callable[[exp.Query], T] | None = None) -> Any:
    """The parsed query (the caller's to change), or what `reader` returns from the shared tree."""

    def checked(tree: exp.Expr | None) -> exp.Query:
        if tree is None:
            raise ModelError(f"The {what} is empty", path, line)
        if not isinstance(tree, exp.Query):
            raise ModelError(f"The {what} must be a SELECT statement, got {tree.key.upper()}", path, line)
        return tree

    if not text.strip():
        raise ModelError(f"The {what} is empty", path, line)
    try:
        if reader is None:
            return checked(_parse_text(text, dialect))
        return _parse_text(text, dialect, lambda tree: reader(checked(tree)))
    except ParseError as e:
        raise ModelError(f"Cannot parse {what}: {describe(e)}", path, _error_line(e, line)) from None
    except TokenError as e:
        raise ModelError(f"Cannot parse {what}: {describe(e)}", path, line + _token_error_line(e, text) - 1) from None


def _parse_statements(text: str, dialect: str, path: str | None, line: int) -> list[exp.Expr]:
    try:
        return [fix_transpilation(s, dialect) for s in sqlglot.parse(text, read=get_dialect(dialect)) if s is not None]
    except ParseError as e:
        raise ModelError(f"Cannot parse statement: {describe(e)}", path, _error_line(e, line)) from None
    except TokenError as e:
        raise ModelError(f"Cannot parse statement: {describe(e)}", path, line) from None


def _error_line(error: ParseError, first_line: int) -> int:
    """sqlglot counts lines from the start of the text; the file line is offset by where it starts."""
    relative = error.errors[0].get("line") if error.errors else None
    return first_line + max(relative or 1, 1) - 1


def _token_error_line(error: TokenError, text: str) -> int:
    m = re.search(r"line (\d+)", str(error), re.I)
    return int(m.group(1)) if m else 1


# ---------------------------------------------------------------------------------------------
# Transformations


@dataclass
class _Collected:
    tables: list[exp.Table] = field(default_factory=list)
    ctes: dict[str, exp.CTE] = field(default_factory=dict)
    qualified_columns: list[exp.Column] = field(default_factory=list)
    has_star: bool = False


def _collect(tree: exp.Expr) -> _Collected:
    """One walk: everything the rewrites need."""
    found = _Collected()
    for node in tree.walk():
        kind = type(node)
        if kind is exp.Table:
            found.tables.append(cast(exp.Table, node))
        elif kind is exp.Star:
            found.has_star = True
        elif kind is exp.CTE:
            found.ctes[node.alias_or_name.lower()] = cast(exp.CTE, node)
        elif kind is exp.Column and node.args.get("db") is not None:
            found.qualified_columns.append(cast(exp.Column, node))
    return found


def _render_query(model: Model, ctx: RenderContext, macros: MacroRegistry, depth: int) -> exp.Query:
    return _render_text(expand_query(model, ctx, macros), model, ctx, macros, depth)


def _render_text(text: str, model: Model, ctx: RenderContext, macros: MacroRegistry, depth: int) -> exp.Query:
    """The query `text` (the model's, macros expanded) parsed and rendered."""
    tree = _parse_query(text, model.dialect, model.path, model.query_line)
    collected = _collect(tree)
    if collected.has_star:
        expand_stars(tree, ctx.schemas, collected.ctes)
    _rewrite_references(tree, ctx, macros, collected, depth)
    return tree


def _rewrite_references(tree: exp.Expr, ctx: RenderContext, macros: MacroRegistry, found: _Collected,
                        depth: int) -> None:
    """Model references → mapped tables (aliased by their old name); EMBEDDED models → subqueries.

    Not sqlglot's `exp.replace_tables`: it writes the old name as a comment (`/* db.t */`, which
    would change every rendering, and so every stored `rendered_query`), keeps no alias for
    `t.col` to resolve through, and does not know that a CTE shadows a model of its name.
    """
    if not (ctx.table_mapping or ctx.embedded):
        return
    rewritten: set[str] = set()
    for table in found.tables:
        if not isinstance(table.this, exp.Identifier):
            continue  # table-valued function
        key = table_key(table)
        if table.args.get("db") is None and key in found.ctes:
            continue  # a CTE shadows a model of the same name
        embedded = lookup(ctx.embedded, key) if ctx.embedded else None
        if embedded is not None:
            _inline(table, embedded, ctx, macros, depth)
            rewritten.add(key)
            continue
        target = lookup(ctx.table_mapping, key)
        if target is None:
            continue
        original = table.name
        parts = target.split(".")
        table.set("this", exp.to_identifier(parts[-1]))
        table.set("db", exp.to_identifier(parts[-2]) if len(parts) > 1 else None)
        table.set("catalog", exp.to_identifier(parts[-3]) if len(parts) > 2 else None)
        if not table.args.get("alias") and isinstance(table.parent, (exp.From, exp.Join)):
            table.set("alias", exp.TableAlias(this=exp.to_identifier(original)))
        rewritten.add(key)
    for column in found.qualified_columns:
        # `schema.table.col` can only refer to the table through its (now) alias `table`.
        key = ".".join(p.name for p in column.parts[:-1]).lower()
        if key in rewritten:
            column.set("db", None)
            column.set("catalog", None)


def _inline(table: exp.Table, model: Model, ctx: RenderContext, macros: MacroRegistry, depth: int) -> None:
    if depth >= _MAX_EMBEDDING_DEPTH:
        raise ModelError(f"Embedded model {model.name} is nested too deeply (does it reference itself?)",
                         model.path, model.line)
    inner_ctx = dataclasses.replace(ctx, this_model=None)
    query = _render_query(model, inner_ctx, macros, depth + 1)
    alias = table.alias or table.name
    table.replace(exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias))))


def _filter_this_model(tree: exp.Expr, model: Model, ctx: RenderContext, this_key: str) -> None:
    condition = _interval_condition(model, ctx)
    for table in list(tree.find_all(exp.Table)):
        if table_key(table) != this_key:
            continue
        alias = table.alias or table.name
        inner = table.copy()
        inner.set("alias", None)
        subquery = exp.select("*").from_(inner).where(condition.copy())
        table.replace(exp.Subquery(this=subquery, alias=exp.TableAlias(this=exp.to_identifier(alias))))


def _interval_condition(model: Model, ctx: RenderContext) -> exp.Expr:
    """`time_column BETWEEN low AND high` for the context's interval, bounded exactly as writes are."""
    column = model.time_column or ""
    column_type = ctx.time_column_type or find_type(model.columns, column)
    kind = model.kind.time_range
    # The caller filters incremental models rendered for an interval only.
    assert kind is not None and ctx.start is not None and ctx.end is not None
    try:
        return interval_condition(column, ctx.start, ctx.end, column_type, kind.time_column_format)
    except TimeColumnError as e:
        raise ModelError(f"Cannot bound time_column {column}: {e}", model.path, model.line) from None
