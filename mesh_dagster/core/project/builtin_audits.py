"""SQLMesh's built-in audits, written as Spark SQL over `@this_model`.

Every audit SQLMesh documents is here, under its documented name and arguments; each also has a
`_non_blocking` twin (the suffix only sets blocking). The SQL is ours, written from the documented
meaning: an audit fails when its query returns rows. Every built-in accepts `condition := <bool>`,
which restricts the rows it looks at.

An argument whose value must be known when the SQL is written (`inclusive := false`) is checked
when the project loads, like the names of the arguments: `BuiltinArgumentError` carries the
reason, the caller adds the model's file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

Arguments = dict[str, exp.Expr]


class BuiltinArgumentError(ValueError):
    """An argument of a built-in audit whose value cannot be used (not a boolean, no bound...)."""


@dataclass(frozen=True)
class BuiltinAudit:
    """A built-in audit: its parameters and the Spark SQL it stands for, over `@this_model`."""

    required: tuple[str, ...]
    build: Callable[[Arguments], str]
    optional: tuple[str, ...] = ()

    @property
    def parameters(self) -> tuple[str, ...]:
        return self.required + self.optional + ("condition",)


def sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark")


def _items(value: exp.Expr) -> list[exp.Expr]:
    """`(a, b)`, `[a, b]`, `(a)` or `a` → its elements."""
    if isinstance(value, (exp.Tuple, exp.Array)):
        return list(value.expressions)
    if isinstance(value, exp.Paren):
        return [value.this]
    return [value]


def where(args: Arguments, condition: exp.Expr | None = None) -> str:
    """` WHERE ...` combining an audit's own condition with the optional `condition` argument."""
    parts = [c for c in (condition, args.get("condition")) if c is not None]
    if len(parts) > 1:
        parts = [exp.paren(p, copy=True) for p in parts]
    return " WHERE " + sql(exp.and_(*parts)) if parts else ""


def _flag(args: Arguments, name: str, default: bool) -> bool:
    """A boolean argument (`inclusive := false`): it decides the SQL, so it must be a literal."""
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    if isinstance(value, (exp.Column, exp.Identifier, exp.Literal)) and value.name.lower() in ("true", "false"):
        return value.name.lower() == "true"
    raise BuiltinArgumentError(f"the argument `{name}` must be true or false, got {sql(value)}")


def outside(value: exp.Expr, args: Arguments) -> exp.Expr:
    """`value` below `min_v` or above `max_v` (equal passes unless `inclusive := false`)."""
    low, high = args.get("min_v"), args.get("max_v")
    if low is None and high is None:
        raise BuiltinArgumentError("needs `min_v := ...` or `max_v := ...` (or both)")
    inclusive = _flag(args, "inclusive", True)
    below, above = (exp.LT, exp.GT) if inclusive else (exp.LTE, exp.GTE)
    parts = [op(this=value.copy(), expression=bound.copy())
             for op, bound in ((below, low), (above, high)) if bound is not None]
    return exp.or_(*parts)


def _non_null(column: exp.Expr, condition: exp.Expr) -> exp.Expr:
    return exp.and_(exp.Not(this=exp.Is(this=column.copy(), expression=exp.null())), exp.paren(condition, copy=False))


def _rows(condition: exp.Expr) -> Callable[[Arguments], str]:
    """An audit of rows: those where `condition` (over the arguments) holds are the failures."""
    return lambda args: f"SELECT * FROM @this_model{where(args, condition)}"


# -- rows -------------------------------------------------------------------------------------


def not_null(args: Arguments) -> str:
    nulls = [exp.Is(this=c.copy(), expression=exp.null()) for c in _items(args["columns"])]
    return f"SELECT * FROM @this_model{where(args, exp.or_(*nulls))}"


def forall(args: Arguments) -> str:
    every = exp.and_(*(exp.paren(c, copy=True) for c in _items(args["criteria"])))
    return f"SELECT * FROM @this_model{where(args, exp.not_(every))}"


def _in(args: Arguments) -> exp.Expr:
    return exp.In(this=args["column"].copy(), expressions=[v.copy() for v in _items(args["is_in"])])


def accepted_values(args: Arguments) -> str:
    return _rows(exp.Not(this=_in(args)))(args)


def not_accepted_values(args: Arguments) -> str:
    return _rows(_in(args))(args)


def accepted_range(args: Arguments) -> str:
    return _rows(outside(args["column"], args))(args)


def not_empty_string(args: Arguments) -> str:
    return _rows(exp.EQ(this=args["column"].copy(), expression=exp.Literal.string("")))(args)


def _length(args: Arguments) -> exp.Expr:
    return exp.Length(this=args["column"].copy())


def string_length_equal(args: Arguments) -> str:
    return _rows(exp.NEQ(this=_length(args), expression=args["v"].copy()))(args)


def string_length_between(args: Arguments) -> str:
    return _rows(outside(_length(args), args))(args)


def _matching(args: Arguments, patterns: list[exp.Expr], regex: bool) -> exp.Expr:
    """`column` matches one of `patterns` (regular expressions, or LIKE patterns)."""
    kind: type[exp.Expr] = exp.RegexpLike if regex else exp.Like
    return exp.or_(*(kind(this=args["column"].copy(), expression=p.copy()) for p in patterns))


def pattern_audit(regex: bool, match: bool, fixed: tuple[str, ...] = ()) -> Callable[[Arguments], str]:
    """Non-NULL values must match one of the patterns (`match`) or none of them."""
    def build(args: Arguments) -> str:
        patterns: list[exp.Expr] = [exp.Literal.string(p) for p in fixed] or _items(args["patterns"])
        matching = _matching(args, patterns, regex)
        failing = exp.Not(this=exp.paren(matching, copy=False)) if match else matching
        return _rows(_non_null(args["column"], failing))(args)
    return build


UUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
EMAIL = r"^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+$"
URL = r"^(https?|ftp)://[^\s/$.?#].[^\s]*$"
HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT")


def valid_http_method(args: Arguments) -> str:
    allowed = exp.In(this=args["column"].copy(), expressions=[exp.Literal.string(m) for m in HTTP_METHODS])
    return _rows(_non_null(args["column"], exp.Not(this=allowed)))(args)


def sequential_values(args: Arguments) -> str:
    """Ordered by the column, each value is the previous one plus `interval` (default 1)."""
    column, step = sql(args["column"]), sql(args.get("interval") or exp.Literal.number(1))
    rows = where(args, exp.Not(this=exp.Is(this=args["column"].copy(), expression=exp.null())))
    return (f"SELECT * FROM (SELECT *, LAG({column}) OVER (ORDER BY {column}) AS __previous "
            f"FROM @this_model{rows}) AS s WHERE {column} - __previous <> {step}")


def mutually_exclusive_ranges(args: Arguments) -> str:
    """A row whose range reaches past the start of the next one (ordered by start) overlaps it.

    Ranges that only touch (`[1, 5]` and `[5, 9]`) do not overlap. Checking neighbours is enough:
    a range overlapping a later one overlaps every range starting in between.
    """
    low, high = sql(args["lower_bound_column"]), sql(args["upper_bound_column"])
    return (f"SELECT * FROM (SELECT *, LEAD({low}) OVER (ORDER BY {low}, {high}) AS __next_lower, "
            f"LAG({high}) OVER (ORDER BY {low}, {high}) AS __previous_upper FROM @this_model{where(args)}) AS r "
            f"WHERE __next_lower < {high} OR {low} < __previous_upper")


def unique_values(args: Arguments) -> str:
    parts = [
        f"SELECT {sql(exp.Literal.string(sql(c)))} AS column_name, CAST({sql(c)} AS STRING) AS value "
        f"FROM @this_model{where(args)} GROUP BY {sql(c)} HAVING COUNT(*) > 1"
        for c in _items(args["columns"])
    ]
    return " UNION ALL ".join(parts)


def unique_combination_of_columns(args: Arguments) -> str:
    columns = ", ".join(sql(c) for c in _items(args["columns"]))
    return f"SELECT {columns} FROM @this_model{where(args)} GROUP BY {columns} HAVING COUNT(*) > 1"
