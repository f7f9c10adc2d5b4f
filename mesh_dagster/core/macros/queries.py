"""Built-in macros that write whole queries: `@UNION`, `@DEDUPLICATE` and `@DATE_SPINE`.

Each evaluates to a query, to be written as a model's query, a CTE's body or a subquery
(`FROM (@UNION('all', a, b)) AS u`).
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.library import spark_type
from mesh_dagster.core.macros.registry import arguments, builtin, try_constant, typed
from mesh_dagster.core.macros.syntax import Arg, Call, columns_pending, normalize_name

if TYPE_CHECKING:
    from mesh_dagster.core.macros.evaluator import MacroEvaluator

# -- @UNION ---------------------------------------------------------------------------------------

_UNION_TYPES = ("ALL", "DISTINCT")


@builtin("UNION")
def union(ev: MacroEvaluator, call: Call) -> exp.Query:
    """`@UNION([condition,] ['ALL' | 'DISTINCT',] table, ...)`: the tables' rows over the columns
    they all have with the same name and type, in the first table's order, each cast to its type.

    The type defaults to ALL. With a condition that is false, only the first table is selected.
    The columns come from the tables' known columns (a model's or an external model's).
    """
    if call.kwargs:
        raise MacroError("@UNION takes positional arguments only: @UNION('all', table, ...)", ev.path, call.line)
    values = [(arg, ev.to_exp(ev.evaluate(arg), arg.line)) for arg in call.args]
    keep_all = True
    first = try_constant(values[0][1]) if values else None
    if isinstance(first, bool):  # a condition
        keep_all = first
        values.pop(0)
    kind = "ALL"
    if values and _is_string(values[0][1]):
        arg, value = values.pop(0)
        kind = str(value.this).strip().upper()
        if kind not in _UNION_TYPES:
            raise MacroError(f"@UNION: the type must be 'ALL' or 'DISTINCT', got '{value.this}'", ev.path, arg.line)
    tables = [_table_name(ev, arg, value) for arg, value in values]
    if not tables:
        raise MacroError("@UNION needs at least one table: @UNION('all', table, ...)", ev.path, call.line)
    if not keep_all:
        tables = tables[:1]
    schemas = [ev.known_columns(t) for t in tables]
    unknown = [t for t, s in zip(tables, schemas) if not s]
    if unknown and columns_pending():  # dependency discovery: the tables are what matters
        return _union_all([exp.select("*").from_(t) for t in tables], kind)
    if unknown:
        raise MacroError(f"@UNION: the columns of {unknown[0]} are not known (declare them with `columns`, in "
                         "external_models.yaml, or make its query's columns inferrable)", ev.path, call.line)
    columns = _shared_columns([s for s in schemas if s])
    if not columns:
        raise MacroError(f"@UNION: {', '.join(tables)} have no column in common (same name and type)", ev.path,
                         call.line)
    projections = [exp.alias_(exp.Cast(this=exp.column(c), to=spark_type(t)) if t else exp.column(c), c)
                   for c, t in columns]
    return _union_all([exp.select(*(p.copy() for p in projections)).from_(t) for t in tables], kind)


def _is_string(value: exp.Expr) -> bool:
    return isinstance(value, exp.Literal) and value.is_string


def _table_name(ev: MacroEvaluator, arg: Arg, value: exp.Expr) -> str:
    if isinstance(value, (exp.Table, exp.Column, exp.Identifier)) or _is_string(value):
        name = normalize_name(value)
        if name and all(name.split(".")):
            return name
    raise MacroError(f"@UNION: expected a table name, got `{value.sql(dialect=ev.dialect)}`", ev.path, arg.line)


def _shared_columns(schemas: list[dict[str, str | None]]) -> list[tuple[str, str | None]]:
    """The first table's columns that every table has with the same type (unknown types agree
    with any), with that type."""
    others = [{name.lower(): type_text for name, type_text in s.items()} for s in schemas[1:]]
    shared = []
    for name, type_text in schemas[0].items():
        types = [type_text] + [o.get(name.lower(), _MISSING) for o in others]
        if _MISSING in types:
            continue
        known = {spark_type(t).sql(dialect="spark") for t in types if t}
        if len(known) <= 1:
            shared.append((name, next((t for t in types if t), None)))
    return shared


_MISSING = "\0missing"


def _union_all(selects: list[exp.Select], kind: str) -> exp.Query:
    query: exp.Query = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=kind == "DISTINCT")
    return query


# -- @DEDUPLICATE ---------------------------------------------------------------------------------


@builtin("DEDUPLICATE")
def deduplicate(ev: MacroEvaluator, call: Call) -> SQL:
    """`@DEDUPLICATE(relation, partition_by := [cols], order_by := ['col DESC', ...])`: the first
    row of each partition, in that order.

    Written as `SELECT * FROM relation QUALIFY ROW_NUMBER() OVER (...) = 1` in the model's dialect
    and left as text: the renderer expands the `*` against the relation's columns before sqlglot's
    Spark generator turns the QUALIFY into a filtered subquery, so the helper column that subquery
    needs does not end up in the output.
    """
    args = arguments(ev, call, ["relation", "partition_by", "order_by"], 3)
    relation = ev.to_exp(ev.evaluate(args["relation"]), args["relation"].line)
    if not isinstance(relation, (exp.Table, exp.Column, exp.Identifier)) or isinstance(relation.this, exp.Star):
        raise MacroError(f"@DEDUPLICATE: relation must be a table or CTE name, got "
                         f"`{relation.sql(dialect=ev.dialect)}`", ev.path, args["relation"].line)
    partition = [ev.to_sql(v) for v in ev.items(ev.evaluate(args["partition_by"]), args["partition_by"].line)]
    if not partition:
        raise MacroError("@DEDUPLICATE: partition_by needs at least one column", ev.path, args["partition_by"].line)
    order = [_order_item(ev, call, args["order_by"], v)
             for v in ev.items(ev.evaluate(args["order_by"]), args["order_by"].line)]
    if not order:
        raise MacroError("@DEDUPLICATE: order_by needs at least one column, e.g. ['updated_at DESC']", ev.path,
                         args["order_by"].line)
    name = ".".join(p.sql(dialect=ev.dialect) for p in relation.parts) if not isinstance(relation, exp.Identifier) \
        else relation.sql(dialect=ev.dialect)
    return SQL(f"SELECT * FROM {name} QUALIFY ROW_NUMBER() OVER (PARTITION BY {', '.join(partition)} "
               f"ORDER BY {', '.join(order)}) = 1")


def _order_item(ev: MacroEvaluator, call: Call, arg: Arg, value: object) -> str:
    """`'col DESC NULLS LAST'` (SQLMesh's form, a string) or a bare expression, as ORDER BY text."""
    node = ev.to_exp(value, arg.line)
    if not _is_string(node):
        return ev.to_sql(node)
    try:
        ordered = sqlglot.parse_one(str(node.this), read=ev.dialect, into=exp.Ordered)
    except (ParseError, TokenError) as e:
        raise MacroError(f"@DEDUPLICATE: order_by item '{node.this}' is not an ORDER BY expression: {describe(e)}",
                         ev.path, arg.line) from None
    return ordered.sql(dialect=ev.dialect)


# -- @DATE_SPINE ----------------------------------------------------------------------------------

# datepart -> the step of the sequence (Spark has no QUARTER interval)
_STEPS = {"day": (1, "DAY"), "week": (1, "WEEK"), "month": (1, "MONTH"), "quarter": (3, "MONTH"), "year": (1, "YEAR")}


@builtin("DATE_SPINE")
def date_spine(ev: MacroEvaluator, call: Call) -> exp.Select:
    """`@DATE_SPINE('day' | 'week' | 'month' | 'quarter' | 'year', start_date, end_date)`: one row
    per step from start_date through end_date (both included when on a step), column `date_<part>`.

    Dates are 'YYYY-MM-DD' strings or date macros such as `@start_ds` / `@start_date`. It is
    Spark's `EXPLODE(SEQUENCE(start, end, INTERVAL ...))` in a subquery, the column cast to DATE
    so that its type is known downstream.
    """
    args = arguments(ev, call, ["datepart", "start_date", "end_date"], 3)
    datepart = typed(ev, call, args["datepart"], "datepart", str).strip().lower()
    if datepart not in _STEPS:
        raise MacroError(f"@DATE_SPINE: datepart must be one of {', '.join(repr(p) for p in _STEPS)}, got "
                         f"'{datepart}'", ev.path, args["datepart"].line)
    start: date = typed(ev, call, args["start_date"], "start_date", date)
    end: date = typed(ev, call, args["end_date"], "end_date", date)
    if start > end:
        raise MacroError(f"@DATE_SPINE: start_date {start} is after end_date {end}", ev.path, call.line)
    count, unit = _STEPS[datepart]
    column = f"date_{datepart}"
    # Spark's functions as plain names: every dialect writes them back unchanged, where sqlglot's
    # own date-array nodes would come back from some dialects (Snowflake, Postgres) as SQL Spark
    # cannot run, since the expanded query is read in the model's dialect.
    sequence = exp.Anonymous(this="SEQUENCE", expressions=[
        _date(start), _date(end), exp.Interval(this=exp.Literal.string(str(count)), unit=exp.var(unit))])
    dates = exp.select(exp.alias_(exp.Anonymous(this="EXPLODE", expressions=[sequence]), column))
    return exp.select(exp.alias_(exp.Cast(this=exp.column(column, table="_exploded"), to=exp.DataType.build("DATE")),
                                 column)).from_(dates.subquery("_exploded"))


def _date(value: date) -> exp.Expr:
    return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("DATE"))
