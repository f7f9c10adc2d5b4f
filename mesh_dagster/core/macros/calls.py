"""Binding a call of a user's Python macro to the function's parameters.

The evaluator hands each argument over as written; which parameter it goes to, and whether the
call fits the function at all, is decided here from the function's signature and its resolved
annotations (typed arguments are converted by core/macros/coercion.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from mesh_dagster.core.errors import MacroError
from mesh_dagster.core.macros.coercion import resolved_annotations
from mesh_dagster.core.macros.syntax import Arg, Call

# ---------------------------------------------------------------------------------------------
# Binding a call to a Python macro's parameters


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: Any
    required: bool


@dataclass(frozen=True)
class Signature:
    """A user macro's parameters after the evaluator, with their resolved annotations."""

    positional: list[Parameter]
    var_positional: Parameter | None
    by_name: dict[str, Parameter]  # lower-case name -> keyword-passable parameter
    var_keyword: Parameter | None
    takes_evaluator: bool


@cache
def parameters(fn: Callable) -> Signature:
    signature = inspect.signature(fn)
    hints = resolved_annotations(fn)
    params = list(signature.parameters.values())
    first = params[0].kind if params else None
    takes_evaluator = first in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                inspect.Parameter.VAR_POSITIONAL)
    if first in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        params = params[1:]  # the evaluator (a leading *args takes it along with the arguments)
    positional: list[Parameter] = []
    by_name: dict[str, Parameter] = {}
    var_positional = var_keyword = None
    for p in params:
        entry = Parameter(p.name, hints.get(p.name, Any), p.default is p.empty)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(entry)
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            by_name[p.name.lower()] = entry
        if p.kind == p.VAR_POSITIONAL:
            var_positional = Parameter(p.name, entry.annotation, False)
        if p.kind == p.VAR_KEYWORD:
            var_keyword = Parameter(p.name, entry.annotation, False)
    return Signature(positional, var_positional, by_name, var_keyword, takes_evaluator)


def bind(signature: Signature, call: Call, path: str | None) -> tuple[list[tuple[Parameter, Arg]],
                                                                       dict[str, tuple[Parameter, Arg]]]:
    """Which parameter each argument of the call goes to; a call that does not fit is an error."""
    name, line = f"Macro @{call.name}", call.line
    if not signature.takes_evaluator:
        raise MacroError(f"{name} cannot be called: its first parameter must receive the evaluator", path, line)
    positional: list[tuple[Parameter, Arg]] = []
    for i, arg in enumerate(call.args):
        if i < len(signature.positional):
            positional.append((signature.positional[i], arg))
        elif signature.var_positional is not None:
            positional.append((signature.var_positional, arg))
        else:
            raise MacroError(f"{name} takes at most {len(signature.positional)} argument(s), got {len(call.args)}",
                             path, arg.line)
    taken = {p.name for p, _ in positional}
    keywords: dict[str, tuple[Parameter, Arg]] = {}
    for key, arg in call.kwargs.items():
        param = signature.by_name.get(key)
        if param is not None and param.name in taken:
            raise MacroError(f"{name} got argument '{param.name}' twice", path, arg.line)
        if param is None and signature.var_keyword is None:
            raise MacroError(f"{name} has no argument '{key}'", path, arg.line)
        keywords[param.name if param else key] = (param or signature.var_keyword, arg)  # type: ignore[assignment]
    missing = [p.name for p in signature.positional + list(signature.by_name.values())
               if p.required and p.name not in taken and p.name not in keywords]
    if missing:
        raise MacroError(f"{name} is missing argument '{missing[0]}'", path, line)
    return positional, keywords
