"""The registry of built-in macros and what built-ins share: reading their arguments, and folding
constant expressions (`@IF(1 > 0, ...)`).

Built-ins register themselves with `@builtin("NAME")` when their module is imported: the control
flow and variables in builtins.py, expressions in library.py, whole queries in queries.py, clause
operators in clauses.py. The evaluator (evaluator.py) imports all four, so every built-in is known
before the first macro is expanded. Built-ins receive the evaluator and the call with its
arguments unevaluated, so `@IF` evaluates only the branch it takes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from sqlglot import exp

from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.coercion import SQL, CoercionError, coerce
from mesh_dagster.core.macros.syntax import Arg, Call

if TYPE_CHECKING:
    from mesh_dagster.core.macros.evaluator import MacroEvaluator

Builtin = Callable[["MacroEvaluator", Call], Any]
BUILTINS: dict[str, Builtin] = {}


def builtin(*names: str) -> Callable[[Builtin], Builtin]:
    def register(fn: Builtin) -> Builtin:
        for name in names:
            BUILTINS[name.lower()] = fn
        return fn

    return register


def find_builtin(name: str) -> Builtin | None:
    """The built-in macro called `name` (any case), or None."""
    return BUILTINS.get(name.lower())



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
    """An argument converted like a typed Python macro's (core/macros/coercion.py)."""
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
