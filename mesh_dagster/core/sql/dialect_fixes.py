"""Where sqlglot's DuckDB → Spark transpilation changes a result, and the rewrites that keep it.

sqlglot writes the tree of a DuckDB query as Spark SQL, function by function. For a few functions
the two engines agree on the name but not on the meaning, so the transpiled query runs and returns
other data, without an error. Each case here was checked by running the DuckDB expression on
DuckDB and its transpilation on Spark (tests/spark/test_dialect_fixes_spark.py does so for each):

- `DAYOFWEEK`, `WEEKDAY`, `DATE_PART('dow' | 'dayofweek' | 'weekday')`, `EXTRACT(DOW ...)`: DuckDB
  counts Sunday = 0, Spark's `DAYOFWEEK` Sunday = 1 (and Spark's `WEEKDAY` Monday = 0).
- `ISODOW`, `DATE_PART('isodow')`: sqlglot writes `DAYOFWEEK(x) % 7 + 1`, which is 2 on a Sunday.
- `DAYNAME`, `MONTHNAME`: DuckDB gives 'Sunday', 'January'; Spark 'Sun', 'Jan'.
- `STRFTIME(x, '%j')`: the day of the year, 3 digits ('007'); sqlglot writes Spark's `DD` ('07').
- `LOG(x)`: DuckDB's is base 10, Spark's natural.
- `DATE_DIFF(part, a, b)`: DuckDB counts the boundaries crossed (one month from Jan 31 to Feb 1,
  one day from 23:00 to 01:00); Spark's `DATEDIFF(part, ...)` counts whole units (0). Weeks are
  the exception: DuckDB counts whole weeks too, so they are left alone.
- `EPOCH(x)`, `DATE_PART('epoch', x)`: DuckDB gives seconds with their fraction; sqlglot writes
  `UNIX_TIMESTAMP`, whole seconds (and Spark has no `epoch` date part).
- `WEEK(x)` has no Spark function of that name (`WEEKOFYEAR`, the same ISO week).

Checked and right as sqlglot writes them: `DAYOFYEAR`, `DATE_PART('doy' | 'week')`, `WEEKOFYEAR`,
`DATE_TRUNC('week', x)` (Monday in both), `//` (`DIV`), `/` on integers (a double in both), list
indexing (`l[1]` becomes `l[0]`), `STRFTIME` with `%Y %m %d %H %M %S %y %a %A %b %B %I %p %-m`.

sqlglot offers no setting for these, so the tree is rewritten after parsing, before Spark SQL is
written. Only trees parsed as DuckDB are touched: the other dialects' functions mean what Spark's do
(or are not known to differ).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.time import format_time

DOW_PARTS = frozenset({"dow", "dayofweek", "weekday"})
# Spark's own week-based fields, none of which counts as DuckDB's does.
_BOUNDARY_UNITS = frozenset({"year", "quarter", "month", "day", "hour", "minute", "second", "millisecond",
                             "microsecond"})
# Python strftime → Spark datetime pattern, `%j` written with the three letters it needs.
_TO_SPARK_FORMAT = {**Spark.INVERSE_TIME_MAPPING, "%j": "DDD"}


def fix_transpilation(tree: exp.Expr, dialect: str) -> exp.Expr:
    """The tree, rewritten (in place where possible) so that Spark computes what `dialect` would."""
    if dialect.lower() != "duckdb":
        return tree
    for node in reversed(list(tree.dfs())):  # children first: a rewrite keeps its fixed arguments
        rewrite = _REWRITES.get(type(node))
        fixed = rewrite(node) if rewrite is not None else None
        if fixed is not None:
            if node is tree:
                tree = fixed
            else:
                node.replace(fixed)
    return tree


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _sunday_zero(value: exp.Expr) -> exp.Expr:
    return exp.paren(exp.Sub(this=exp.DayOfWeek(this=value), expression=exp.Literal.number(1)), copy=False)


def _iso(value: exp.Expr) -> exp.Expr:
    return exp.Extract(this=exp.var("DAYOFWEEK_ISO"), expression=value)


def _epoch(value: exp.Expr) -> exp.Expr:
    micros = _call("UNIX_MICROS", exp.cast(value, "TIMESTAMP"))
    return exp.paren(exp.Div(this=micros, expression=exp.Literal.number("1000000.0")), copy=False)


_PARTS: dict[str, Callable[[exp.Expr], exp.Expr]] = {
    **dict.fromkeys(DOW_PARTS, _sunday_zero),
    "isodow": _iso,
    "epoch": _epoch,
}


def _date_part(node: exp.Anonymous) -> exp.Expr | None:
    """`DATE_PART('dow', x)` (sqlglot keeps DuckDB's DATE_PART as an unknown function)."""
    name = str(node.this).upper()
    if name == "WEEKDAY" and len(node.expressions) == 1:
        return _sunday_zero(node.expressions[0])
    if name not in ("DATE_PART", "DATEPART") or len(node.expressions) != 2:
        return None
    part, value = node.expressions
    if not (isinstance(part, exp.Literal) and part.is_string):
        return None
    fix = _PARTS.get(part.name.lower())
    return fix(value) if fix else None


def _extract(node: exp.Extract) -> exp.Expr | None:
    fix = _PARTS.get(node.this.name.lower())
    return fix(node.expression) if fix else None


def _strftime(node: exp.TimeToStr) -> exp.Expr | None:
    """Only formats with `%j` are written wrong; they become Spark's DATE_FORMAT with `DDD`."""
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string and "%j" in fmt.name):
        return None
    spark_format = format_time(fmt.name, _TO_SPARK_FORMAT)
    return _call("DATE_FORMAT", node.this, exp.Literal.string(spark_format or fmt.name))


def _log(node: exp.Log) -> exp.Expr | None:
    if node.args.get("expression") is not None:
        return None
    return exp.Log(this=exp.Literal.number(10), expression=node.this)


def _date_diff(node: exp.DateDiff) -> exp.Expr | None:
    """Whole units between both ends truncated to the unit = the boundaries crossed between them."""
    unit = node.args.get("unit")
    name = unit.name.lower() if unit is not None else "day"
    if name not in _BOUNDARY_UNITS:
        return None
    spark_unit = exp.Literal.string(name.upper())
    return exp.DateDiff(this=exp.TimestampTrunc(this=node.this, unit=spark_unit),
                        expression=exp.TimestampTrunc(this=node.expression, unit=spark_unit.copy()),
                        unit=exp.var(name.upper()))


_REWRITES: dict[type[exp.Expr], Callable[..., exp.Expr | None]] = {
    exp.DayOfWeek: lambda n: _sunday_zero(n.this),
    exp.DayOfWeekIso: lambda n: _iso(n.this),
    exp.Dayname: lambda n: _call("DATE_FORMAT", n.this, exp.Literal.string("EEEE")),
    exp.Monthname: lambda n: _call("DATE_FORMAT", n.this, exp.Literal.string("MMMM")),
    exp.Week: lambda n: exp.WeekOfYear(this=n.this),
    exp.TimeToUnix: lambda n: _epoch(n.this),
    exp.Anonymous: _date_part,
    exp.Extract: _extract,
    exp.TimeToStr: _strftime,
    exp.Log: _log,
    exp.DateDiff: _date_diff,
}
