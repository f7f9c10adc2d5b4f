"""`is_sql=True` Python models: the function, given a macro evaluator, returns the model's query
(SQL text or a sqlglot expression).

The function runs once as the project loads. When what it returns depends on nothing of a render
(it reads no local such as `start_date` or `runtime_stage`, and no parent's columns), that query
is the model: stored, reviewed and categorized as a SQL model's query is, its macros (`@start_ds`)
expanded when it renders. A function that reads any of those returns the query of one render
only: as in SQLMesh, the model's query is then a call of the function as a macro
(`@is_sql__shop__vips()`), run at every render with that render's evaluator (the interval's
dates, the parents' columns), and its code is captured with the snapshot as a user macro's is.
While the project loads, `columns_to_types` of a model answers SQLMesh's stand-in
(`{"__schema_unavailable_at_load__": "unknown"}`) when the columns are not known yet.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from mesh_dagster.core.config.user_modules import innermost_line
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.coercion import SQL
from mesh_dagster.core.macros.evaluator import UNAVAILABLE_AT_LOAD, MacroEvaluator
from mesh_dagster.core.macros.syntax import temporal_locals
from mesh_dagster.core.macros.user import MacroRegistry

PER_RENDER_PREFIX = "is_sql__"  # the macro name of a function run at every render


class _Reads(dict):
    """The evaluator's locals, noting whether the function read any."""

    read = False

    def __getitem__(self, key: Any) -> Any:
        self.read = True
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.read = True
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read = True
        return super().__contains__(key)


class _LoadEvaluator(MacroEvaluator):
    """The evaluator an is_sql function gets as the project loads: it notes what the function read
    that belongs to one render (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.locals = _Reads(self.locals)
        self.columns_read = False

    @property
    def per_render(self) -> bool:
        return self.columns_read or bool(getattr(self.locals, "read", False))

    def columns_to_types(self, model_name: str | exp.Expr) -> dict[str, str | None] | None:
        self.columns_read = True
        found = self.known_columns(model_name)
        return found if found is not None else dict(UNAVAILABLE_AT_LOAD)


def is_sql_query(fn: Callable, name: str, shown: str, dialect: str, variables: Mapping[str, Any],
                 blueprint: Mapping[str, str], macros: MacroRegistry | None) -> dict[str, Any]:
    """The query properties of the is_sql model `name` whose function is `fn` (see the module
    docstring); a function run at every render is registered in `macros` (its repository's)."""
    line = def_line(fn)
    evaluator = _LoadEvaluator(dialect, variables=variables, path=shown, line=line,
                               locals=temporal_locals(None, None, None),
                               blueprint_variables={key: SQL(text) for key, text in blueprint.items()})
    try:
        query = fn(evaluator)
    except Exception as e:  # the user's code: one line naming where it failed
        frame = innermost_line(e, {fn.__code__.co_filename})
        raise ModelError(f"The is_sql model function {fn.__name__} failed as the project loaded (it runs then, with "
                         f"the macro evaluator of a load): {type(e).__name__}: {e}", shown, frame or line) from e
    if isinstance(query, exp.Expr):  # `@start_ds` parsed by plain sqlglot is a parameter: written back as a macro
        query = query.transform(lambda n: exp.var(f"@{n.name}") if isinstance(n, exp.Parameter) else n)
        query = query.sql(dialect=dialect)
    if not isinstance(query, str) or not query.strip():
        raise ModelError(f"The is_sql model function {fn.__name__} must return its query (SQL text or a sqlglot "
                         f"expression), got {type(query).__name__}", shown, line)
    if evaluator.per_render and macros is not None:
        macro_name = PER_RENDER_PREFIX + re.sub(r"\W", "_", name.lower())
        macros.register(fn, macro_name)
        return {"query": f"@{macro_name}()", "python": None, "query_line": line}
    return {"query": query.strip().rstrip(";"), "python": None, "query_line": line}


def def_line(fn: Callable) -> int:
    """The line of the function's `def` (its code object starts at its first decorator)."""
    source, first = inspect.getsourcelines(fn)
    return first + next((i for i, text in enumerate(source) if text.lstrip().startswith(("def ", "async def "))), 0)
