"""Built-in macro functions: their registry, how they read their arguments, the variables and
control-flow macros (`@DEF`, `@VAR`, `@EACH`, `@IF`, ...) and the constant folding they need.

Each built-in receives the evaluator and the call with its arguments *unevaluated*, so that
`@IF` evaluates only the branch it takes and lambdas stay text until they are applied. The macros
that write expressions (`@STAR`, `@PIVOT`, ...) are in core/macro_library.py, those that write
whole queries (`@UNION`, `@DEDUPLICATE`, `@DATE_SPINE`) in core/macro_queries.py, the clause
operators (`@WHERE(cond) ...`) in core/macro_clauses.py; they register here when a macro is first
looked up.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from sqlglot import exp

from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macro_types import CoercionError, coerce
from mesh_dagster.core.macros import SQL, Arg, Call, Lambda, MacroEvaluator

Builtin = Callable[[MacroEvaluator, Call], Any]
BUILTINS: dict[str, Builtin] = {}


def builtin(*names: str) -> Callable[[Builtin], Builtin]:
    def register(fn: Builtin) -> Builtin:
        for name in names:
            BUILTINS[name.lower()] = fn
        return fn

    return register


def find_builtin(name: str) -> Builtin | None:
    """The built-in macro called `name` (any case), or None."""
    _register_library()
    return BUILTINS.get(name.lower())


@cache
def _register_library() -> None:
    for module in _LIBRARY:
        importlib.import_module(module)


_LIBRARY = ("mesh_dagster.core.macro_library", "mesh_dagster.core.macro_queries", "mesh_dagster.core.macro_clauses")


def arguments(ev: MacroEvaluator, call: Call, names: list[str], required: int) -> dict[str, Arg]:
    """Positional and keyword arguments of a built-in, by parameter name."""
    if len(call.args) > len(names):
        raise MacroError(f"@{call.name.upper()} takes at most {len(names)} arguments, got {len(call.args)}",
                         ev.path, call.line)
    bound = dict(zip(names, call.args))
    for key, arg in call.kwargs.items():
        if key not in names:
            raise MacroError(f"@{call.name.upper()} has no argument '{key}'", ev.path, arg.line)
        if key in bound:
            raise MacroError(f"@{call.name.upper()} got argument '{key}' twice", ev.path, arg.line)
        bound[key] = arg
    missing = [n for n in names[:required] if n not in bound]
    if missing:
        raise MacroError(f"@{call.name.upper()} is missing argument '{missing[0]}'", ev.path, call.line)
    return bound


def typed(ev: MacroEvaluator, call: Call, arg: Arg, name: str, annotation: Any) -> Any:
    """An argument converted like a typed Python macro's (core/macro_types.py)."""
    value = ev.to_exp(ev.evaluate(arg), arg.line)
    try:
        return coerce(value, annotation, ev.dialect)
    except CoercionError as e:
        raise MacroError(f"@{call.name.upper()}: argument '{name}' {e}", ev.path, arg.line) from None


def name_argument(ev: MacroEvaluator, arg: Arg | None, call: Call) -> str | None:
    """A name given as `name`, `'name'` or `db.name`'s last part (None when not given)."""
    if arg is None:
        return None
    value = ev.to_exp(ev.evaluate(arg), arg.line)
    if isinstance(value, exp.Literal):
        return str(value.this)
    if isinstance(value, (exp.Column, exp.Identifier, exp.Table)):
        return value.name
    raise MacroError(f"@{call.name.upper()}: expected a name, got `{value.sql()}`", ev.path, arg.line)


def _lambda(ev: MacroEvaluator, arg: Arg) -> Lambda:
    value = ev.evaluate(arg)
    if not isinstance(value, Lambda):
        raise MacroError(f"Expected a lambda such as `x -> x + 1`, got `{arg.text.strip()}`", ev.path, arg.line)
    return value


# -- variables ---------------------------------------------------------------------------------


@builtin("DEF")
def define(ev: MacroEvaluator, call: Call) -> None:
    """`@DEF(name, value)`: a local macro variable or, with a lambda, a local macro function."""
    if len(call.args) != 2 or call.kwargs:
        raise MacroError("@DEF takes a name and a value: @DEF(name, value)", ev.path, call.line)
    name = call.args[0].text.strip().lstrip("@").strip("`\"")
    if not name.replace("_", "a").isalnum():
        raise MacroError(f"@DEF: invalid name `{name}`", ev.path, call.line)
    ev.locals[name.lower()] = ev.evaluate(call.args[1])
    return None


@builtin("VAR", "BLUEPRINT_VAR")
def var(ev: MacroEvaluator, call: Call) -> Any:
    """`@VAR('name', default)`: a config variable (case-insensitive), the default, or NULL."""
    args = arguments(ev, call, ["name", "default"], 1)
    name = constant(ev.to_exp(ev.evaluate(args["name"]), call.line), ev, call.line)
    if not isinstance(name, str):
        raise MacroError("@VAR needs the variable name as a string, e.g. @VAR('name')", ev.path, call.line)
    if name.lower() in ev.variables:
        value = ev.variables[name.lower()]
        return exp.null() if value is None else value
    return ev.evaluate(args["default"]) if "default" in args else exp.null()


# -- control flow --------------------------------------------------------------------------------


@builtin("EACH")
def each(ev: MacroEvaluator, call: Call) -> list[Any]:
    """`@EACH(list, x -> expr)`: one expression per element (several projections in a SELECT)."""
    args = arguments(ev, call, ["items", "func"], 2)
    fn = _lambda(ev, args["func"])
    return [ev.apply(fn, [item], call.line) for item in ev.items(ev.evaluate(args["items"]), call.line)]


@builtin("FILTER")
def filter_(ev: MacroEvaluator, call: Call) -> list[Any]:
    args = arguments(ev, call, ["items", "func"], 2)
    fn = _lambda(ev, args["func"])
    items = ev.items(ev.evaluate(args["items"]), call.line)
    return [item for item in items if truthy(ev, ev.apply(fn, [item], call.line), call.line)]


@builtin("REDUCE")
def reduce_(ev: MacroEvaluator, call: Call) -> Any:
    args = arguments(ev, call, ["items", "func"], 2)
    fn = _lambda(ev, args["func"])
    items = ev.items(ev.evaluate(args["items"]), call.line)
    if not items:
        return None
    result = items[0]
    for item in items[1:]:
        result = ev.apply(fn, [result, item], call.line)
    return result


@builtin("IF")
def if_(ev: MacroEvaluator, call: Call) -> Any:
    """`@IF(cond, then[, else])`: only the branch taken is evaluated; no else → the call vanishes."""
    args = arguments(ev, call, ["condition", "true", "false"], 2)
    if truthy(ev, ev.evaluate(args["condition"]), call.line):
        return ev.evaluate(args["true"])
    return ev.evaluate(args["false"]) if "false" in args else None


@builtin("EVAL")
def eval_(ev: MacroEvaluator, call: Call) -> Any:
    args = arguments(ev, call, ["expression"], 1)
    value = constant(ev.to_exp(ev.evaluate(args["expression"]), call.line), ev, call.line)
    return exp.null() if value is None else value


@builtin("AND")
def and_(ev: MacroEvaluator, call: Call) -> SQL:
    return _connect(ev, call, "AND", "TRUE")


@builtin("OR")
def or_(ev: MacroEvaluator, call: Call) -> SQL:
    return _connect(ev, call, "OR", "FALSE")


def _connect(ev: MacroEvaluator, call: Call, connector: str, empty: str) -> SQL:
    """Conditions that are NULL (e.g. an unset variable) are left out."""
    if call.kwargs:
        raise MacroError(f"@{connector} takes conditions only", ev.path, call.line)
    parts = []
    for arg in call.args:
        value = ev.evaluate(arg)
        if value is None or isinstance(value, exp.Null) or (isinstance(value, SQL) and value.upper() == "NULL"):
            continue
        sql = ev.to_sql(value)
        if sql:
            parts.append(f"({sql})" if len(call.args) > 1 else sql)
    return SQL(f" {connector} ".join(parts) if parts else empty)


# -- constant folding ---------------------------------------------------------------------------


class _NotConstant(Exception):
    def __init__(self, node: exp.Expr):
        self.node = node


NOT_CONSTANT: Any = object()


def try_constant(node: exp.Expr) -> Any:
    """The Python value of `node` if it is a constant expression, else NOT_CONSTANT."""
    try:
        return _fold(node)
    except (_NotConstant, TypeError, ValueError, ZeroDivisionError):
        return NOT_CONSTANT


def truthy(ev: MacroEvaluator, value: Any, line: int) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, SQL):
        return bool(value)
    return bool(constant(ev.to_exp(value, line), ev, line))


def constant(node: exp.Expr, ev: MacroEvaluator, line: int) -> Any:
    """The Python value of a constant SQL expression (`'a' = 'a'`, `1 + 2 > 2 AND NOT FALSE`)."""
    try:
        return _fold(node)
    except _NotConstant as e:
        raise MacroError(f"Cannot evaluate `{node.sql(dialect=ev.dialect)}` at render time: "
                         f"`{e.node.sql(dialect=ev.dialect)}` is not a constant", ev.path, line) from None
    except (TypeError, ZeroDivisionError) as e:
        raise MacroError(f"Cannot evaluate `{node.sql(dialect=ev.dialect)}`: {e}", ev.path, line) from None


_COMPARISONS: dict[type, Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq, exp.NEQ: operator.ne, exp.GT: operator.gt, exp.GTE: operator.ge,
    exp.LT: operator.lt, exp.LTE: operator.le,
}
_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul, exp.Div: operator.truediv,
    exp.Mod: operator.mod, exp.IntDiv: operator.floordiv,
}


def _fold(node: exp.Expr) -> Any:
    kind = type(node)
    if kind is exp.Literal:
        if node.is_string:
            return str(node.this)
        text = str(node.this)
        return float(text) if any(c in text for c in ".eE") else int(text)
    if kind is exp.Boolean:
        return bool(node.this)
    if kind is exp.Null:
        return None
    if kind is exp.Paren:
        return _fold(node.this)
    if kind is exp.Not:
        value = _fold(node.this)
        return None if value is None else not value
    if kind is exp.Neg:
        return -_fold(node.this)
    if kind is exp.And:
        return bool(_fold(node.this)) and bool(_fold(node.expression))
    if kind is exp.Or:
        return bool(_fold(node.this)) or bool(_fold(node.expression))
    if kind in _COMPARISONS:
        left, right = _fold(node.this), _fold(node.expression)
        return None if left is None or right is None else _COMPARISONS[kind](left, right)
    if kind in _ARITHMETIC:
        left, right = _fold(node.this), _fold(node.expression)
        return None if left is None or right is None else _ARITHMETIC[kind](left, right)
    if kind is exp.DPipe:
        left, right = _fold(node.this), _fold(node.expression)
        return None if left is None or right is None else f"{left}{right}"
    if kind is exp.Is:
        value, target = _fold(node.this), _fold(node.expression)
        return value is target if target is None or isinstance(target, bool) else value == target
    if kind is exp.In:
        value = _fold(node.this)
        return value in [_fold(e) for e in node.expressions]
    if kind is exp.Between:
        value = _fold(node.this)
        return _fold(node.args["low"]) <= value <= _fold(node.args["high"])
    if kind in (exp.Array, exp.Tuple):
        return [_fold(e) for e in node.expressions]
    if kind in (exp.Cast, exp.TryCast):
        return _cast(_fold(node.this), cast(exp.Cast, node).to)
    if kind is exp.If:
        branch = node.args.get("true") if _fold(node.this) else node.args.get("false")
        return _fold(branch) if branch is not None else None
    raise _NotConstant(node)


def _cast(value: Any, to: exp.DataType) -> Any:
    if value is None:
        return None
    if to.is_type(*exp.DataType.INTEGER_TYPES):
        return int(value)
    if to.is_type(*exp.DataType.REAL_TYPES):
        return float(value)
    if to.is_type(*exp.DataType.TEXT_TYPES):
        return "TRUE" if value is True else "FALSE" if value is False else str(value)
    if to.is_type(exp.DataType.Type.BOOLEAN):
        return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "t", "y", "yes")
    return value
