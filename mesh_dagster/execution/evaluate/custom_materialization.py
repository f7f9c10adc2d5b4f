"""Writing a CUSTOM model: the user's materialization class (core/models/materialization.py) is
called with the model's table, its rendered query and a context giving it the engine.

The context reaches Spark through the `Engine` Protocol like every write here: the kill-safe
writes (`replace`, `append`, `overwrite_partitions`) and plain statements. What the class runs is
the code the snapshot stored, defined afresh (execution/evaluate/evaluator.py `materialization`). Whatever
it raises fails the batch as one `ModelError` naming the model and the line in the class.
"""

from __future__ import annotations

import traceback
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.errors import MeshError, ModelError
from mesh_dagster.core.models.kinds import CustomKind
from mesh_dagster.core.project.blueprints import python_value
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.execution.evaluate.python_evaluation import inclusive_interval
from mesh_dagster.execution.evaluate.strategies import Evaluation, QueryStrategy, writes
from mesh_dagster.execution.ports import Engine

if TYPE_CHECKING:
    from mesh_dagster.execution.ports import Journal


class SparkMaterializationContext:
    """The `MaterializationContext` of one batch of one CUSTOM model."""

    def __init__(self, engine: Engine, snapshot: Snapshot, start: datetime, end: datetime, execution_time: datetime):
        model = snapshot.model
        self._engine = engine
        self._snapshot = snapshot
        self.model_name = model.name
        self.start, self.end, self.execution_time = start, end, execution_time
        kind = model.kind.custom
        written = kind.materialization_properties if kind is not None else {}
        self.properties: dict[str, Any] = {k: python_value(v, model.dialect) for k, v in written.items()}
        # The statements and reads the user's class calls are the engine's own, as they are: bound here
        # rather than restated as methods that would only pass their arguments on.
        self.execute = engine.session.execute
        self.fetchall = engine.session.fetchall
        self.fetchdf = engine.session.fetchdf
        self.table_exists = engine.catalog.table_exists
        self.columns = engine.catalog.columns

    @property
    def spark(self) -> Any:
        return self._engine.session.spark

    def create_table(self, table: str, query: str) -> None:
        model = self._snapshot.model
        self._engine.catalog.create_table(table, query, model.effective_partitioned_by,
                                          model.storage_format or "parquet", model.columns, model.column_descriptions)

    def replace(self, table: str, query: str) -> None:
        model = self._snapshot.model
        self._engine.writes.replace_table(table, query, model.effective_partitioned_by,
                                          model.storage_format or "parquet", model.columns, model.column_descriptions)

    def append(self, table: str, query: str) -> None:
        self._engine.writes.append(table, query)

    def overwrite_partitions(self, table: str, query: str) -> None:
        self._engine.writes.overwrite_partitions(table, query)


@writes(CustomKind)
class CustomStrategy(QueryStrategy):
    """The model's materialization creates its table, then writes each batch (`insert`)."""

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        context = _context(ev, snapshot, None, None, None)
        _call(snapshot, ev.materialization(snapshot).create, snapshot.table_name, ev.render(snapshot, stage="creating"),
              context)

    def write_rendered(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                       execution_time: int, journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        context = _context(ev, snapshot, start, end, execution_time)
        _call(snapshot, ev.materialization(snapshot).insert, snapshot.table_name, query, context)

def _context(ev: Evaluation, snapshot: Snapshot, start: int | None, end: int | None,
             execution_time: int | None) -> SparkMaterializationContext:
    low, high = inclusive_interval(ms_to_datetime(start) if start is not None else None,
                                   ms_to_datetime(end) if end is not None else None)
    when = ms_to_datetime(execution_time) if execution_time is not None else high
    return SparkMaterializationContext(ev.engine, snapshot, low, high, when)


def _call(snapshot: Snapshot, method: Any, table: str, query: str, context: SparkMaterializationContext) -> None:
    """Run the user's method; what it raises is one error at its line in the class."""
    stored = snapshot.capture.materialization if snapshot.capture is not None else None
    files = {piece.path for piece in stored.env.values() if piece.path} if stored is not None else set()
    try:
        method(table, query, context)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename in files]
        model = snapshot.model
        path, line = (frames[-1].filename, frames[-1].lineno) if frames else (model.path, model.line_of("kind"))
        detail = e.message if isinstance(e, MeshError) else f"{type(e).__name__}: {e}"
        raise ModelError(f"Materialization of {model.name} failed: {detail}", path, line) from e
