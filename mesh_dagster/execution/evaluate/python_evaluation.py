"""Running a Python model for one interval: its output as a query the kind's strategy writes.

The model's stored code is defined afresh and its function called with an execution context; what
it returns (a PySpark DataFrame, a pandas DataFrame, or a generator yielding either) is registered
by the engine as a temporary view, and the kind's strategy writes `SELECT <declared columns> FROM
<view>` exactly as it writes a SQL model's query. So every kind that writes a query writes Python
models too, and a PySpark result never reaches the driver: Spark reads the view where it writes.

Whatever the user's code raises ends as one `ModelError` naming the model and the file and line it
was raised at (the exception is chained, so the log holds its traceback); nothing is recorded for
the interval, since the batch fails.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from mesh_dagster.core.config.names import check_model_name
from mesh_dagster.core.errors import EngineError, MeshError, ModelError
from mesh_dagster.core.macros.syntax import EPOCH
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.models.python_model import call_model
from mesh_dagster.core.project.blueprints import python_value

if TYPE_CHECKING:
    import pandas as pd

    from mesh_dagster.execution.ports import Engine


class PythonContext:
    """The `ExecutionContext` a Python model's function receives (core/models/python_model.py)."""

    def __init__(self, engine: Engine, model: Model, tables: Mapping[str, str], variables: Mapping[str, Any],
                 start: datetime, end: datetime, execution_time: datetime):
        self._engine = engine
        self._model = model
        self._tables = dict(tables)
        self._variables = dict(variables)
        self._blueprint = blueprint_values(model)
        self.start, self.end, self.execution_time = start, end, execution_time

    @property
    def spark(self) -> Any:
        return self._engine.session.spark

    def resolve_table(self, name: str) -> str:
        """The table (or view) holding a dependency's data for this evaluation, as SQL models read it."""
        try:
            key = check_model_name(name)
        except ValueError as e:
            raise ModelError(f"resolve_table('{name}'): {e}") from None
        if key not in self._tables:
            known = ", ".join(sorted(n for n in self._tables if n != self._model.name)) or "none"
            raise ModelError(f"resolve_table('{name}'): {key} is not a dependency of {self._model.name} (its "
                             f"dependencies: {known}); list it in depends_on")
        return self._tables[key]

    table = resolve_table  # SQLMesh's name for it

    def var(self, name: str, default: Any = None) -> Any:
        return self._variables.get(name.lower(), default)

    def blueprint_var(self, name: str, default: Any = None) -> Any:
        return self._blueprint.get(name.lower(), default)

    def fetchdf(self, query: str | exp.Expr, quote_identifiers: bool = False) -> pd.DataFrame:
        return self._engine.session.fetchdf(spark_sql(query, quote_identifiers))

    @property
    def engine_adapter(self) -> EngineAdapter:
        """What SQLMesh's Python models reach through `context.engine_adapter` (reads only)."""
        return EngineAdapter(self._engine)


class EngineAdapter:
    """`context.engine_adapter` of SQLMesh's Python models: the dialect, the session and reads. The
    attributes models may use are `ADAPTER_ATTRIBUTES` (core/models/python_model.py), checked at load."""

    dialect = "spark"

    def __init__(self, engine: Engine):
        self._engine = engine
        # Reads taking a table's name, as the engine's catalog answers them (bound, not restated).
        self.table_exists = engine.catalog.table_exists
        self.columns = engine.catalog.columns

    @property
    def spark(self) -> Any:
        return self._engine.session.spark

    def fetchdf(self, query: str | exp.Expr, quote_identifiers: bool = False) -> pd.DataFrame:
        return self._engine.session.fetchdf(spark_sql(query, quote_identifiers))

    def fetch_pyspark_df(self, query: str | exp.Expr, quote_identifiers: bool = False) -> Any:
        return self._engine.session.spark.sql(spark_sql(query, quote_identifiers))

    def fetchall(self, query: str | exp.Expr, quote_identifiers: bool = False) -> list[tuple]:
        return self._engine.session.fetchall(spark_sql(query, quote_identifiers))

    def fetchone(self, query: str | exp.Expr, quote_identifiers: bool = False) -> tuple | None:
        rows = self.fetchall(query, quote_identifiers)
        return rows[0] if rows else None


def blueprint_values(model: Model) -> dict[str, Any]:
    """The model's blueprint variables as Python values (a string, a number, ...)."""
    return {key: python_value(text, model.dialect) for key, text in model.blueprint_variables.items()}


def spark_sql(query: str | exp.Expr, quote_identifiers: bool = False) -> str:
    """SQL text, or a sqlglot expression written as Spark SQL (identifiers quoted on request)."""
    if isinstance(query, exp.Expr):
        return query.sql(dialect="spark", identify=quote_identifiers)
    return query


def inclusive_interval(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """`start` and the inclusive `end` (the last microsecond of the interval) a Python model gets;
    the epoch where an interval has no bound."""
    low = start or EPOCH
    return low, (end - timedelta(microseconds=1)) if end is not None else low


@contextmanager
def python_query(engine: Engine, model: Model, tables: Mapping[str, str], variables: Mapping[str, Any],
                 start: datetime, end: datetime, execution_time: datetime, root: Path | None = None) -> Iterator[str]:
    """Run the model and, inside the block, the query selecting its output (the view is dropped after).
    `root`: the project's folder, where the stored code's `__file__`s are."""
    code, columns = model.python, model.columns
    assert code is not None and columns is not None, f"{model.name} is not a Python model"
    files = {piece.path for piece in code.env.values() if piece.path}
    context = PythonContext(engine, model, tables, variables, start, end, execution_time)
    runtime = {"start": start, "end": end, "execution_time": execution_time}
    blueprint = blueprint_values(model)  # shadowing config variables of their name, as in SQLMesh
    try:
        fn = code.function(root)
        kwargs = code.arguments(fn, {**variables, **blueprint}, runtime)
        if any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()):
            kwargs = {**blueprint, **kwargs}
        result = call_model(fn, context, kwargs)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise _failed(model, e, files, engine.session.unavailable(e)) from e
    try:
        view = engine.session.register_frames(_frames(model, result, files, engine), columns)
    except EngineError as e:
        raise ModelError(f"Python model {model.name}: {e.message}", model.path, model.line) from e
    try:
        yield output_query(view, columns)
    except EngineError as e:  # Spark ran the model's DataFrame while writing it (its UDFs, its reads...)
        raise ModelError(f"Python model {model.name} failed while its output was written: {e.message}",
                         model.path, model.line) from e
    finally:
        engine.session.drop_temp_view(view)


def _frames(model: Model, result: Any, files: set[str], engine: Engine) -> Iterator[Any]:
    """What the function returned, frame by frame; a generator runs (and may fail) as it is read."""
    if result is None:
        raise ModelError(f"Python model {model.name} returned None: return a DataFrame, or yield nothing for no "
                         "rows (`yield from ()`)", model.path, model.line)
    if not isinstance(result, Iterator):  # a DataFrame is iterable, but no iterator
        yield result
        return
    while True:
        try:
            frame = next(result)
        except StopIteration:
            return
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything
            raise _failed(model, e, files, engine.session.unavailable(e)) from e
        yield frame


def _failed(model: Model, error: Exception, files: set[str], unavailable: str | None = None) -> ModelError:
    """The user's code raised: one line naming the model, where it raised (its innermost line in the
    model's code), and what. `unavailable`: what it asked of the session that the session lacks."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in files]
    path, line = (frames[-1].filename, frames[-1].lineno) if frames else (model.path, model.line)
    if unavailable is not None:
        return ModelError(f"Python model {model.name} uses {unavailable}.", path, line)
    detail = error.message if isinstance(error, MeshError) else f"{type(error).__name__}: {error}"
    return ModelError(f"Python model {model.name} failed: {detail}", path, line)


def output_query(view: str, columns: Mapping[str, str]) -> str:
    """The declared columns, cast to their types, from the view over the model's output."""
    select = ", ".join(f"CAST(`{name}` AS {kind}) AS `{name}`" for name, kind in columns.items())
    return f"SELECT {select} FROM `{view}`"


def empty_query(columns: Mapping[str, str]) -> str:
    """A query of the declared columns and no row: what a Python model's table is created from."""
    select = ", ".join(f"CAST(NULL AS {kind}) AS `{name}`" for name, kind in columns.items())
    return f"SELECT {select} WHERE FALSE"

