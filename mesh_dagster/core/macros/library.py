"""Built-in macros that write expressions: `@STAR`, `@GENERATE_SURROGATE_KEY`, `@SAFE_ADD`,
`@SAFE_SUB`, `@SAFE_DIV`, `@PIVOT`, `@HAVERSINE_DISTANCE`, `@SQL` and `@RESOLVE_TEMPLATE`.

Their output is SQL in the model's dialect (the query is parsed once, after every macro is
expanded); a wrong argument is an error naming the macro and the line of the call.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.parser import Parser

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.registry import arguments, builtin, constant, name_argument, typed
from mesh_dagster.core.macros.syntax import Call, columns_pending, normalize_name

if TYPE_CHECKING:
    from mesh_dagster.core.macros.evaluator import MacroEvaluator

# -- @STAR ----------------------------------------------------------------------------------------


@builtin("STAR")
def star(ev: MacroEvaluator, call: Call) -> list[exp.Expr]:
    """`@STAR(relation, alias, exclude, prefix, suffix)`: the relation's known columns, typed."""
    args = arguments(ev, call, ["relation", "alias", "exclude", "prefix", "suffix", "quote_identifiers"], 1)
    relation = ev.to_exp(ev.evaluate(args["relation"]), call.line)
    name = normalize_name(relation)
    alias = name_argument(ev, args.get("alias"), call) or relation.alias or name.split(".")[-1]
    columns = ev.known_columns(name)
    if not columns and columns_pending():
        return [exp.column(exp.Star(), table=alias)]  # dependency discovery: the columns come later
    if not columns:
        raise MacroError(f"@STAR: the columns of {name} are not known (declare them with `columns` or make "
                         "its query's columns inferrable)", ev.path, call.line)
    exclude = set()
    if "exclude" in args:
        exclude = {normalize_name(e) for e in ev.items(ev.evaluate(args["exclude"]), call.line)}
    prefix = name_argument(ev, args.get("prefix"), call) or ""
    suffix = name_argument(ev, args.get("suffix"), call) or ""
    quote = "quote_identifiers" in args and bool(constant(ev.to_exp(ev.evaluate(args["quote_identifiers"])), ev,
                                                          call.line))
    projections: list[exp.Expr] = []
    for column, type_text in columns.items():
        if column.lower() in exclude:
            continue
        ref: exp.Expr = exp.column(column, table=alias, quoted=quote or None)
        if type_text:
            ref = exp.Cast(this=ref, to=spark_type(type_text))
        projections.append(exp.alias_(ref, f"{prefix}{column}{suffix}", quoted=quote or None))
    return projections


@lru_cache(maxsize=1024)
def _spark_type_cached(type_text: str) -> exp.DataType:
    return exp.DataType.build(type_text, dialect="spark")


def spark_type(type_text: str) -> exp.DataType:
    """A known column's Spark type text as a (fresh) sqlglot DataType."""
    return _spark_type_cached(type_text).copy()


# -- keys and arithmetic --------------------------------------------------------------------------


@builtin("GENERATE_SURROGATE_KEY")
def generate_surrogate_key(ev: MacroEvaluator, call: Call) -> exp.Expr:
    """MD5 (or `hash_function`) of the columns cast to text, NULLs marked, joined by '|'."""
    unknown = set(call.kwargs) - {"hash_function"}
    if unknown or not call.args:
        raise MacroError("@GENERATE_SURROGATE_KEY takes columns and optionally hash_function := 'MD5'",
                         ev.path, call.line)
    hash_function = "MD5"
    if "hash_function" in call.kwargs:
        hash_function = name_argument(ev, call.kwargs["hash_function"], call) or "MD5"
    parts: list[exp.Expr] = []
    for arg in call.args:
        for column in ev.items(ev.evaluate(arg), arg.line):
            if parts:
                parts.append(exp.Literal.string("|"))
            value = ev.to_exp(column, arg.line).copy()
            parts.append(exp.Coalesce(this=exp.Cast(this=value, to=exp.DataType.build("TEXT")),
                                      expressions=[exp.Literal.string("_sqlmesh_surrogate_key_null_")]))
    return exp.func(hash_function, exp.Concat(expressions=parts), dialect=ev.dialect)


@builtin("SAFE_ADD")
def safe_add(ev: MacroEvaluator, call: Call) -> SQL:
    return _safe_arithmetic(ev, call, "+")


@builtin("SAFE_SUB")
def safe_sub(ev: MacroEvaluator, call: Call) -> SQL:
    return _safe_arithmetic(ev, call, "-")


def _safe_arithmetic(ev: MacroEvaluator, call: Call, op: str) -> SQL:
    """NULL only when every operand is NULL; otherwise NULLs count as 0."""
    operands = [ev.to_sql(ev.evaluate(a)) for a in call.args]
    if len(operands) < 2 or call.kwargs:
        raise MacroError(f"@{call.name.upper()} takes two or more operands", ev.path, call.line)
    all_null = " AND ".join(f"({o}) IS NULL" for o in operands)
    total = f" {op} ".join(f"COALESCE({o}, 0)" for o in operands)
    return SQL(f"CASE WHEN {all_null} THEN NULL ELSE {total} END")


@builtin("SAFE_DIV")
def safe_div(ev: MacroEvaluator, call: Call) -> SQL:
    args = arguments(ev, call, ["numerator", "denominator"], 2)
    numerator = ev.to_sql(ev.evaluate(args["numerator"]))
    denominator = ev.to_sql(ev.evaluate(args["denominator"]))
    return SQL(f"({numerator}) / NULLIF({denominator}, 0)")


_EARTH_DIAMETER_MILES = 7922
_MILES_TO = {"mi": "1.0", "km": "1.60934"}


@builtin("HAVERSINE_DISTANCE")
def haversine_distance(ev: MacroEvaluator, call: Call) -> SQL:
    """`@HAVERSINE_DISTANCE(lat1, lon1, lat2, lon2, unit := 'mi')`: great-circle distance in miles or km."""
    args = arguments(ev, call, ["lat1", "lon1", "lat2", "lon2", "unit"], 4)
    unit = typed(ev, call, args["unit"], "unit", str).lower() if "unit" in args else "mi"
    if unit not in _MILES_TO:
        raise MacroError(f"@HAVERSINE_DISTANCE: unit must be 'mi' or 'km', got '{unit}'", ev.path, args["unit"].line)
    lat1, lon1, lat2, lon2 = (ev.atomic_sql(ev.evaluate(args[n])) for n in ("lat1", "lon1", "lat2", "lon2"))
    return SQL(f"{_EARTH_DIAMETER_MILES} * ASIN(SQRT((POWER(SIN(RADIANS(({lat2} - {lat1}) / 2)), 2)) + "
               f"(COS(RADIANS({lat1})) * COS(RADIANS({lat2})) * POWER(SIN(RADIANS(({lon2} - {lon1}) / 2)), 2)))) "
               f"* {_MILES_TO[unit]}")


# -- @PIVOT ---------------------------------------------------------------------------------------

_PIVOT_PARAMETERS = ["column", "values", "alias", "agg", "cmp", "prefix", "suffix", "then_value", "else_value",
                     "quote", "distinct"]
_COMPARISONS = frozenset({"=", "==", "!=", "<>", "<", "<=", ">", ">=", "<=>", "LIKE", "NOT LIKE", "ILIKE",
                          "NOT ILIKE", "RLIKE", "NOT RLIKE", "IS", "IS NOT", "IS DISTINCT FROM",
                          "IS NOT DISTINCT FROM"})
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@builtin("PIVOT")
def pivot(ev: MacroEvaluator, call: Call) -> list[exp.Expr]:
    """`@PIVOT(column, values, alias := TRUE, agg := 'SUM', cmp := '=', prefix := '', suffix := '',
    then_value := 1, else_value := 0, quote := TRUE, distinct := FALSE)`: one aggregated
    `CASE WHEN column <cmp> value THEN then_value ELSE else_value END` per value.

    The alias is prefix + the value + suffix, the value as written without its quotes
    (`'cancelled'` → `cancelled`). SQLMesh keeps the quotes in the alias (`"'cancelled'"`), a
    column name no one would choose; dbt_utils.pivot, which SQLMesh's @PIVOT follows, does not.
    """
    args = arguments(ev, call, _PIVOT_PARAMETERS, 2)

    def option(name: str, annotation: Any, default: Any) -> Any:
        return typed(ev, call, args[name], name, annotation) if name in args else default

    column = ev.to_sql(ev.evaluate(args["column"]))
    values = ev.items(ev.evaluate(args["values"]), args["values"].line)
    if not values:
        raise MacroError("@PIVOT needs at least one value to pivot on", ev.path, args["values"].line)
    agg = option("agg", str, "SUM")
    if not _FUNCTION_NAME.fullmatch(agg):
        raise MacroError(f"@PIVOT: agg must be the name of an aggregate function, got '{agg}'", ev.path,
                         args["agg"].line)
    cmp = " ".join(option("cmp", str, "=").split()).upper()
    if cmp not in _COMPARISONS:
        raise MacroError(f"@PIVOT: cmp must be a comparison operator ({', '.join(sorted(_COMPARISONS))}), got "
                         f"'{cmp}'", ev.path, args["cmp"].line)
    then_value = ev.to_sql(ev.evaluate(args["then_value"])) if "then_value" in args else "1"
    else_value = ev.to_sql(ev.evaluate(args["else_value"])) if "else_value" in args else "0"
    distinct = "DISTINCT " if option("distinct", bool, False) else ""
    alias, quote = option("alias", bool, True), option("quote", bool, True)
    prefix, suffix = option("prefix", str, ""), option("suffix", str, "")
    projections: list[exp.Expr] = []
    for value in values:
        node = ev.to_exp(value, call.line)
        text = (f"{agg}({distinct}CASE WHEN {column} {cmp} {ev.to_sql(node)} THEN {then_value} "
                f"ELSE {else_value} END)")
        projection = _parse(ev, call, text)
        if alias:
            projection = exp.alias_(projection, exp.to_identifier(f"{prefix}{_value_name(node, ev)}{suffix}",
                                                                  quoted=quote))
        projections.append(projection)
    return projections


def _value_name(value: exp.Expr, ev: MacroEvaluator) -> str:
    if isinstance(value, (exp.Literal, exp.Column, exp.Identifier)):
        return value.name
    return value.sql(dialect=ev.dialect)


def _parse(ev: MacroEvaluator, call: Call, text: str) -> exp.Expr:
    try:
        return sqlglot.parse_one(text, read=ev.dialect)
    except (ParseError, TokenError) as e:
        raise MacroError(f"@{call.name.upper()} wrote `{text}`, which is not valid SQL: {describe(e)}",
                         ev.path, call.line) from None


# -- @SQL and @RESOLVE_TEMPLATE -------------------------------------------------------------------

_EXPRESSION_TYPES = {k.__name__.lower(): k for k in Parser.EXPRESSION_PARSERS if isinstance(k, type)}


@builtin("SQL")
def sql(ev: MacroEvaluator, call: Call) -> SQL | exp.Expr:
    """`@SQL('text', into := 'Column')`: a string used as SQL, the macros inside it expanded;
    `into` names the sqlglot expression type the text must parse into."""
    args = arguments(ev, call, ["sql", "into"], 1)
    text = ev.expand(typed(ev, call, args["sql"], "sql", str), args["sql"].line).strip()
    if "into" not in args:
        return SQL(text)
    into = typed(ev, call, args["into"], "into", str)
    kind = _EXPRESSION_TYPES.get(into.lower())
    if kind is None:
        raise MacroError(f"@SQL: into must name a sqlglot expression type (e.g. 'Column', 'Table', 'Condition', "
                         f"'Select'), got '{into}'", ev.path, args["into"].line)
    try:
        return sqlglot.parse_one(text, read=ev.dialect, into=kind)
    except (ParseError, TokenError) as e:
        raise MacroError(f"@SQL: `{text}` is not a {kind.__name__}: {describe(e)}", ev.path, call.line) from None


SPARK_SESSION_CATALOG = "spark_catalog"
_PLACEHOLDER = re.compile(r"@\{\s*([A-Za-z_]\w*)\s*\}|@([A-Za-z_]\w*)")


@builtin("RESOLVE_TEMPLATE")
def resolve_template(ev: MacroEvaluator, call: Call) -> exp.Expr:
    """`@RESOLVE_TEMPLATE('s3://bucket/@{schema_name}/@{table_name}', mode := 'literal')`: the
    template with the parts of the table the model writes (`@this_model`) put in; `mode := 'table'`
    makes it a table reference. Tables live in Spark's session catalog, `spark_catalog`."""
    args = arguments(ev, call, ["template", "mode"], 1)
    template = typed(ev, call, args["template"], "template", str)
    mode = typed(ev, call, args["mode"], "mode", str).lower() if "mode" in args else "literal"
    if mode not in ("literal", "table"):
        raise MacroError(f"@RESOLVE_TEMPLATE: mode must be 'literal' or 'table', got '{mode}'", ev.path,
                         args["mode"].line)
    this = [p.name for p in exp.to_table(ev.this_model or "").parts]
    names = {"table_name": this[-1] if this else "", "schema_name": this[-2] if len(this) > 1 else "default",
             "catalog_name": this[-3] if len(this) > 2 else SPARK_SESSION_CATALOG}

    def fill(m: re.Match) -> str:
        key = (m.group(1) or m.group(2)).lower()
        return names[key] if key in names else ev.to_sql(ev.variable(key, call.line), embed=True)

    resolved = _PLACEHOLDER.sub(fill, template)
    if mode == "literal":
        return exp.Literal.string(resolved)
    parts = resolved.split(".")
    if len(parts) > 3 or not all(parts):
        raise MacroError(f"@RESOLVE_TEMPLATE: '{resolved}' is not a table name ([catalog.]schema.table)", ev.path,
                         call.line)
    padded = [None] * (3 - len(parts)) + parts
    return exp.table_(padded[2], db=padded[1], catalog=padded[0])
