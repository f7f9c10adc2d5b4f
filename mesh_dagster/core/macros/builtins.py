"""Built-in macros for variables and control flow: `@DEF`, `@VAR`, `@EACH`, `@FILTER`, `@REDUCE`,
`@IF`, `@EVAL`, `@AND`, `@OR`. Each receives the evaluator and the call with its arguments
*unevaluated*, so that `@IF` evaluates only the branch it takes and lambdas stay text until they
are applied. The registry and what built-ins share is registry.py; the macros that write
expressions are library.py, whole queries queries.py, clause operators clauses.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.registry import arguments, builtin, constant, truthy
from mesh_dagster.core.macros.syntax import Arg, Call, Lambda

if TYPE_CHECKING:
    from mesh_dagster.core.macros.evaluator import MacroEvaluator


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


@builtin("VAR")
def var(ev: MacroEvaluator, call: Call) -> Any:
    """`@VAR('name', default)`: a config variable (case-insensitive), the default, or NULL."""
    return _variable(ev, call, ev.variables, "VAR")


@builtin("BLUEPRINT_VAR")
def blueprint_var(ev: MacroEvaluator, call: Call) -> Any:
    """`@BLUEPRINT_VAR('name', default)`: the model's blueprint variable, the default, or NULL."""
    return _variable(ev, call, ev.blueprint_variables, "BLUEPRINT_VAR")


def _variable(ev: MacroEvaluator, call: Call, variables: dict[str, Any], macro: str) -> Any:
    args = arguments(ev, call, ["name", "default"], 1)
    name = constant(ev.to_exp(ev.evaluate(args["name"]), call.line), ev, call.line)
    if not isinstance(name, str):
        raise MacroError(f"@{macro} needs the variable name as a string, e.g. @{macro}('name')", ev.path, call.line)
    if name.lower() in variables:
        value = variables[name.lower()]
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


