"""Python models: what users write in `models/*.py`, and what a snapshot stores of it.

```python
from mesh_dagster import ExecutionContext, model

@model("shop.daily_totals", kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"),
       columns={"ds": "date", "total": "double"})
def execute(context: ExecutionContext, start, end, execution_time, min_amount=0):
    orders = context.spark.table(context.resolve_table("shop.orders"))
    ...
    return frame  # a PySpark or pandas DataFrame, or a generator yielding them
```

The decorator only tags the function: the loader (core/project/python_model_reader.py) reads the tag, with
the file and line to report. The model's parameters after the context receive `start`, `end`
(inclusive) and `execution_time` (UTC datetimes) and, for any other name, the config variable of
that name. A snapshot stores the code the function runs as source text (core/models/python_env.py), so it
runs the code it was planned with, wherever and whenever it runs.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.models.import_time import UncapturedValue
from mesh_dagster.core.models.python_env import CONTEXT_KEYWORD, Executable, TableRead, run_env

if TYPE_CHECKING:
    import pandas as pd

MODEL_ATTR = "__mesh_model__"
# What the function is called with besides config variables (all optional but the first).
RUNTIME_ARGUMENTS = ("start", "end", "execution_time")


def context_parameter(fn: Callable) -> str | None:
    """The parameter given the execution context: the first (`def execute(context, start, ...)`, under
    any name), unless it is a runtime argument. SQLMesh passes the context by keyword, so a function
    written for it as `def execute(start, end, **kwargs)` finds it in its keyword arguments: None then."""
    params = list(inspect.signature(fn).parameters.values())
    first = params[0] if params else None
    positional = (first is not None and first.kind in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD,
                                                       first.VAR_POSITIONAL))
    return first.name if first is not None and positional and first.name not in RUNTIME_ARGUMENTS else None


def call_model(fn: Callable, context: Any, kwargs: Mapping[str, Any]) -> Any:
    """Call a model function with the context where it takes it (`context_parameter`) and `kwargs`."""
    if context_parameter(fn) is None:
        return fn(**{**kwargs, CONTEXT_KEYWORD: context})
    return fn(context, **kwargs)


# ---------------------------------------------------------------------------------------------
# What users write


@dataclass(frozen=True)
class ModelSpec:
    """What `@model(...)` was given, read by the loader (which knows the file and line)."""

    name: Any
    properties: dict[str, Any]


def model(name: Any = None, **properties: Any) -> Callable[[Callable], Callable]:
    """Mark a function in `models/*.py` as a Python model: `@model("schema.name", columns={...}, ...)`.

    Nothing is checked here: the loader checks the arguments, with the file and line to report.
    """

    def tag(fn: Callable) -> Callable:
        specs = getattr(fn, MODEL_ATTR, ())
        setattr(fn, MODEL_ATTR, (*specs, ModelSpec(name, dict(properties))))
        return fn

    if callable(name) and not properties:  # bare `@model`, without the name: the loader reports it
        bare = name
        setattr(bare, MODEL_ATTR, (ModelSpec(None, {}),))
        return bare
    return tag


class ExecutionContext(Protocol):
    """What a Python model's function receives first (the type to annotate it with).

    `spark` is the SparkSession mesh writes with; `resolve_table("schema.model")` the table (or
    view) holding a dependency's data for this evaluation; `var(name, default)` a config variable;
    `blueprint_var(name, default)` a variable of the model's blueprint; `table` is SQLMesh's name
    for `resolve_table`;
    `fetchdf(query)` runs a query (SQL text or a sqlglot expression) and returns its rows as a
    pandas DataFrame (on the driver: keep it small); `engine_adapter` the reads SQLMesh's models
    make through it (`ADAPTER_ATTRIBUTES`); `start`, `end` (inclusive) and `execution_time` are UTC
    datetimes. A model using anything else of it is refused at load (`context_misuse`).
    """

    start: datetime
    end: datetime
    execution_time: datetime

    @property
    def spark(self) -> Any: ...

    @property
    def engine_adapter(self) -> Any: ...

    def resolve_table(self, name: str) -> str: ...

    def table(self, name: str) -> str:
        """SQLMesh's name for `resolve_table`."""

    def var(self, name: str, default: Any = None) -> Any: ...

    def blueprint_var(self, name: str, default: Any = None) -> Any:
        """A variable of the model's blueprint (core/project/blueprints.py)."""

    def fetchdf(self, query: Any, quote_identifiers: bool = False) -> pd.DataFrame: ...


CONTEXT_ATTRIBUTES = frozenset({"start", "end", "execution_time", "spark", "engine_adapter", "resolve_table", "table",
                                "var", "fetchdf", "blueprint_var"})
ADAPTER_ATTRIBUTES = frozenset({"dialect", "spark", "fetchdf", "fetch_pyspark_df", "fetchall", "fetchone",
                                "table_exists", "columns"})


def context_misuse(function: ast.FunctionDef | ast.AsyncFunctionDef, context: str) -> tuple[str, int] | None:
    """The first use of the execution context (the parameter `context`) that it does not offer, as
    (message, line): found when the model loads, not half-way through an apply."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Attribute):
            continue
        if isinstance(node.value, ast.Name) and node.value.id == context and node.attr not in CONTEXT_ATTRIBUTES:
            return (f"{context}.{node.attr} is not part of mesh_dagster's execution context (it offers "
                    f"{', '.join(sorted(CONTEXT_ATTRIBUTES))})", node.lineno)
        inner = node.value
        if (isinstance(inner, ast.Attribute) and inner.attr == "engine_adapter" and isinstance(inner.value, ast.Name)
                and inner.value.id == context and node.attr not in ADAPTER_ATTRIBUTES):
            return (f"{context}.engine_adapter.{node.attr} is not supported by mesh_dagster (its engine adapter "
                    f"offers {', '.join(sorted(ADAPTER_ATTRIBUTES))})", node.lineno)
    return None


# ---------------------------------------------------------------------------------------------
# What a snapshot stores


class PythonCode(BaseModel):
    """A Python model's code: its function's name and the source it runs (see core/models/python_env.py)."""

    model_config = ConfigDict(frozen=True)

    entrypoint: str  # the function's name
    env: dict[str, Executable]  # name -> code, in running order (what a piece uses comes first)
    reads: list[TableRead] = Field(default_factory=list)  # resolve_table("...") calls with a literal name
    dynamic_reads: list[tuple[str, int]] = Field(default_factory=list)  # (path, line) of computed names
    variables: list[str] = Field(default_factory=list)  # config variables it reads (parameters, var("..."))
    all_variables: bool = False  # it calls var() with a computed name
    uncaptured: list[UncapturedValue] = Field(default_factory=list)  # globals it runs again (import_time.py)

    def data_hash_values(self) -> list[str]:
        """The code as written: any edit of what the model runs is a change of its data."""
        return [f"python:{self.entrypoint}", *(f"{name}:{piece.kind}:{piece.text}" for name, piece in self.env.items())]

    def metadata_hash_values(self) -> list[str]:
        """Where the code sits: moving it keeps the data but tracebacks must point at the new lines."""
        return [f"{name}@{piece.path}:{piece.line}" for name, piece in self.env.items() if piece.path]

    def source(self) -> str:
        """The stored code, imports first, as plans diff it and Dagster shows it."""
        imports = [p.text for p in self.env.values() if p.kind == "import"]
        rest = [p.text.strip("\n") for p in self.env.values() if p.kind != "import"]
        return "\n".join(imports) + ("\n\n" if imports and rest else "") + "\n\n".join(rest) + "\n"

    def function(self, root: Path | None = None) -> Callable:
        """The model function, defined afresh from the stored code (`__file__`s in the project at `root`)."""
        return run_env(self.env, root)[self.entrypoint]

    def arguments(self, fn: Callable, variables: Mapping[str, Any], runtime: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments for `fn` (besides the context, `call_model`): the runtime values it takes and
        a config variable for each other named parameter (a parameter whose variable is missing keeps its
        default)."""
        params = list(inspect.signature(fn).parameters.values())[0 if context_parameter(fn) is None else 1:]
        named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
        kwargs = {key: value for key, value in runtime.items() if key in named or any_keyword}
        for name in named - set(RUNTIME_ARGUMENTS):
            if name.lower() in variables:
                kwargs[name] = variables[name.lower()]
        return kwargs
