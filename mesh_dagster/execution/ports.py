"""execution/'s ports: the state store and the Spark engine as `execution/` sees them — the
operations an apply, a run, a materialization and the janitor call, and nothing about SQLAlchemy
or Spark. `execution/` never imports state/'s tables or engine/: it only knows these Protocols.

The state store: `state/store.StateStore` implements `State` (mypy checks that where Context hands
it over). One Protocol per part, as the store has one part per concern (state/): `State` is the
store's parts, reached as `state.environments`, `state.intervals`... — never through the store
itself. Plan building reads through the narrower `core.plan.StateReader`.

The engine: `engine/adapter.SparkEngine` implements `Engine` on a SparkSession; tests implement it
in memory (tests/execution/fake_engine.py), so the write path is tested without a JVM. An `Engine`
is three parts, as the Spark engine is built (engine/adapter.py): its `session` (statements, the
session Python models compute with), its `catalog` (schemas, tables, views: DDL and what they
hold) and its `writes` (every way a table's rows change, journaled for kill -9). Callers reach the
part: `engine.writes.upsert(...)`, `engine.catalog.columns(...)`; a piece of `execution/` that
needs one concern only may ask for that part's Protocol instead. Each operation is declared here
once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from mesh_dagster.core.plan.estimate import BatchTiming
from mesh_dagster.core.plan.review import PlanEvent, PlanRecord
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId
from mesh_dagster.state.journal import PendingWrite
from mesh_dagster.state.locks import Lease, LockInfo
from mesh_dagster.state.shapes import TableShape
from mesh_dagster.state.verdicts import Verdict

if TYPE_CHECKING:
    import pandas as pd

    from mesh_dagster.core.models.merge import Upsert

IntervalKey = tuple[str, str]  # (model name, version)
Interval = tuple[int, int]


class SnapshotState(Protocol):
    def update_snapshots(self, snapshots: Iterable[Snapshot]) -> None: ...

    def push_snapshots(self, snapshots: Iterable[Snapshot], recaptured: Iterable[Snapshot] = (),
                       content: Mapping[str, bytes] | None = None) -> None: ...

    def get_blob(self, digest: str) -> bytes | None: ...

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]: ...

    def snapshots_exist(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]: ...

    def all_snapshot_ids(self) -> set[SnapshotId]: ...

    def forget_snapshots(self, ids: Iterable[SnapshotId], interval_keys: Iterable[IntervalKey]) -> None: ...


class IntervalState(Protocol):
    def get_intervals(self, keys: Iterable[IntervalKey]) -> dict[IntervalKey, list[Interval]]: ...

    def add_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None: ...

    def remove_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None: ...


class EnvironmentState(Protocol):
    def get_environment(self, name: str) -> Environment | None: ...

    def get_environments(self) -> list[Environment]: ...

    def replaced_environment(self, name: str) -> Environment | None: ...

    def served_environment(self, name: str) -> Environment | None: ...

    def revert_environment(self, name: str, plan_id: str, *, views_restored: bool = False,
                           lease: Lease | None = None) -> bool: ...

    def promote_environment(self, env: Environment, lease: Lease | None = None) -> None: ...

    def finalize_environment(self, name: str, plan_id: str, now_ms: int | None = None,
                             lease: Lease | None = None) -> None: ...

    def expired_environments(self, now_ms: int | None = None) -> list[Environment]: ...

    def invalidate_environment(self, name: str, now_ms: int | None = None) -> None: ...

    def delete_environment(self, name: str) -> None: ...


class PlanState(Protocol):
    """Plan records (execution/plans/records.py)."""

    def save_plan_record(self, record: PlanRecord) -> None: ...

    def get_plan_record(self, plan_id: str) -> PlanRecord | None: ...

    def plan_ids_starting(self, prefix: str, limit: int = 5) -> list[str]: ...

    def list_plan_records(self, environment: str | None = None, statuses: Iterable[str] | None = None,
                          limit: int = 50) -> list[PlanRecord]: ...

    def transition_plan(self, plan_id: str, allowed: Iterable[str], event: PlanEvent,
                        lease: Lease | None = None) -> PlanRecord | None: ...

    def records_mentioning(self, texts: Collection[str], recent: int = ...) -> list[PlanRecord]: ...


class LockState(Protocol):
    def lock(self, name: str, owner: str, timeout_s: float = 600, lease_s: float = 3600, *,
             holder_is_dead: Callable[[LockInfo], bool] | None = None,
             busy: Callable[[LockInfo], str] | None = None) -> AbstractContextManager[Lease]: ...

    def lock_holder(self, name: str) -> LockInfo | None: ...


class JournalState(Protocol):
    """The journal of writes under way (state/journal.py)."""

    def journal_write(self, write: PendingWrite, lease: Lease | None = None,
                      forget: Iterable[tuple[str, str, int, int]] = ()) -> None: ...

    def pending_write(self, table: str) -> PendingWrite | None: ...

    def pending_writes(self) -> list[PendingWrite]: ...

    def finish_write(self, table: str, interval: tuple[str, str, int, int] | None, retire: Iterable[str] = (),
                     lease: Lease | None = None) -> None: ...

    def retired_locations(self, table: str | None = None) -> list[tuple[str, str]]: ...

    def forget_retired(self, items: Iterable[tuple[str, str]]) -> None: ...


class VerdictState(Protocol):
    """What each audit said about the data it judged (state/verdicts.py)."""

    def record(self, verdicts: Iterable[Verdict], now_ms: int) -> None: ...

    def history(self, keys: Iterable[tuple[str, str]]) -> list[Verdict]: ...


class RunMarkState(Protocol):
    """The marks of runs' `before_all` / `after_all` (state/statement_runs.py)."""

    def marks(self, run_key: str) -> dict[str, str | None]: ...

    def mark(self, run_key: str, mark: str, failed: str | None = None) -> None: ...

    def forget_old(self, now: int | None = None) -> None: ...


class ShapeState(Protocol):
    """What is known of tables' columns and their queries' last analyses (state/shapes.py)."""

    def table_shapes(self, tables: Iterable[str]) -> dict[str, TableShape]: ...

    def remember(self, shape: TableShape) -> None: ...

    def forget(self, tables: Iterable[str]) -> None: ...


class TimingState(Protocol):
    """How long batches took (state/timings.py): plans estimate their backfill from it."""

    def record(self, timings: Iterable[BatchTiming]) -> None: ...

    def history(self, names: Iterable[str]) -> dict[str, list[BatchTiming]]: ...


class State(Protocol):
    """Everything execution/ asks of the state store, as the store's parts."""

    @property
    def snapshots(self) -> SnapshotState: ...

    @property
    def environments(self) -> EnvironmentState: ...

    @property
    def intervals(self) -> IntervalState: ...

    @property
    def locks(self) -> LockState: ...

    @property
    def plans(self) -> PlanState: ...

    @property
    def journal(self) -> JournalState: ...

    @property
    def verdicts(self) -> VerdictState: ...

    @property
    def statement_runs(self) -> RunMarkState: ...

    @property
    def shapes(self) -> ShapeState: ...

    @property
    def timings(self) -> TimingState: ...


# -- the engine ------------------------------------------------------------------------------------

# Hears what finishing a write needs (an opaque, JSON-able payload) before its destructive step.
Journal = Callable[[dict[str, Any]], None]


class Session(Protocol):
    """Statements, and the session Python models compute with.

    Names are `schema.table` strings; SQL is Spark SQL; column types are Spark DDL types (in every
    part of the engine)."""

    def execute(self, sql: str) -> None: ...

    def fetchall(self, sql: str) -> list[tuple]: ...

    def fetchdf(self, sql: str) -> pd.DataFrame:
        """The query's rows on the driver, as a pandas DataFrame."""

    # -- Python models
    @property
    def spark(self) -> Any:
        """The session Python models compute with (a SparkSession: opaque here, `execution/` never
        imports pyspark)."""

    def register_frames(self, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
        """Register what a Python model returned (PySpark or pandas DataFrames; several are chunks of one
        output, none is no rows) as one temporary view, and return its name. Nothing is collected to
        the driver; pandas frames are sent with `columns`' types. Output columns that differ from
        `columns` (by name, case-insensitively) are refused."""

    def drop_temp_view(self, name: str) -> None: ...

    def unavailable(self, error: BaseException) -> str | None:
        """What a Python model asked of the session that it does not offer (Spark Connect has no
        `sparkContext`, RDDs or JVM handles), and what to do instead; None for any other error."""

    # -- a model's session settings (execution/evaluate/session_settings.py)
    def set_session_settings(self, settings: Mapping[str, str]) -> dict[str, str | None]:
        """Set Spark SQL settings on the session; the values they had (None: not set). A setting
        the session refuses (fixed at its start) is an EngineError naming it, with nothing left set."""

    def restore_session_settings(self, previous: Mapping[str, str | None]) -> None:
        """Put back what `set_session_settings` returned (None: unset)."""


class Catalog(Protocol):
    """Schemas, tables and views: their DDL, and what they hold."""

    def create_schema(self, name: str) -> None: ...

    def drop_schema(self, name: str, cascade: bool = True) -> None: ...

    def table_exists(self, name: str) -> bool: ...

    def list_objects(self, schema: str) -> dict[str, str]: ...

    def table_names(self, schema: str) -> set[str]:
        """The lowercase names of a schema's tables and views (none for a missing schema): one round
        trip, where `list_objects` also tells views apart."""

    def columns(self, name: str) -> dict[str, str]: ...

    def existing_columns(self, name: str) -> dict[str, str] | None:
        """`columns`, or None when there is no such table: one round trip where `table_exists` and
        `columns` would take two."""

    def query_columns(self, query_sql: str) -> dict[str, str]:
        """A query's output columns and types, from analysis only."""

    def canonical_types(self, columns: Mapping[str, str]) -> dict[str, str]:
        """Declared types in the engine's own spelling, so they compare with a table's."""

    def add_columns(self, table: str, columns: Mapping[str, str]) -> None:
        """Add columns in place (schema migration of a kept table); existing rows read NULL for them."""

    def create_table(self, table: str, query_sql: str | None, partitioned_by: Sequence[str] = (),
                     storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                     comments: Mapping[str, str] | None = None) -> dict[str, str]:
        """CREATE TABLE IF NOT EXISTS, with `columns` or the query's (analysed, not run); the columns
        a table created so holds, in table order (partition columns last)."""

    def create_view(self, view: str, select_sql: str, comments: Mapping[str, str] | None = None) -> None:
        """CREATE OR REPLACE VIEW."""

    def drop_view(self, name: str) -> None: ...

    def drop_table(self, name: str) -> None: ...

    def table_location(self, table: str) -> str | None:
        """Where the table's files are now (None: no such table)."""

    def drop_locations(self, locations: Iterable[str]) -> None:
        """Delete former locations (generations) of tables: nothing points at them any more."""


class Writes(Protocol):
    """Every way a table's rows change."""

    # Writes take a `journal`: called (maybe more than once, each time with the write's newer state)
    # before the write's destructive step, with what `finish` needs to complete it exactly
    # after a crash. Without one, a write cleans up after itself and nobody can finish it.
    def replace_table(self, table: str, query_sql: str, partitioned_by: Sequence[str] = (),
                      storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                      comments: Mapping[str, str] | None = None, *, journal: Journal | None = None,
                      reads_self: bool = False,
                      produced: Mapping[str, str] | None = None) -> tuple[dict[str, str], bool]:
        """Afterwards the table holds exactly the query's output (`reads_self`: the query reads the
        table itself; `produced`: its output columns, when known, else analysed). Returns the
        table's columns, and whether it was laid out anew (created, or swapped for other columns)."""

    def insert_overwrite_interval(self, table: str, query_sql: str, time_column: str, low_sql: str,
                                  high_sql: str, *, journal: Journal | None = None, reads_self: bool = False,
                                  columns: Mapping[str, str] | None = None) -> None:
        """Rows with `time_column BETWEEN low AND high` become exactly the query's output for that
        range (empty partitions inside it cleared); other rows are untouched. Idempotent.
        `columns`: the table's, when the caller has read them in this apply (spares reading them)."""

    def rewrite_table(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        """Afterwards the table holds exactly the query's output, where the query reads the table
        itself (never read and overwritten in one statement)."""

    def stage(self, table: str, query_sql: str) -> str:
        """Materialise the query's rows into a new staging table beside `table` and return its name:
        a write whose query reads `table` itself reads the staged rows instead. The caller drops it."""
        ...

    def upsert(self, table: str, query_sql: str, upsert: Upsert, duplicates_shown: int = 5, *,
               journal: Journal | None = None) -> list[tuple]:
        """Merge the query's rows into the table by `upsert.keys` (see core/models/merge.py). When a key
        occurs more than once in the output, nothing is written and up to `duplicates_shown` of
        those keys are returned (their values, then their count); otherwise []."""

    def overwrite_partitions(self, table: str, query_sql: str, *, journal: Journal | None = None,
                             reads_self: bool = False) -> None:
        """Every partition the query's output holds is replaced by it; the others are untouched
        (on an unpartitioned table: the whole table is replaced)."""

    def append(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        """INSERT INTO: the query's rows are added to the table."""

    def finish(self, payload: dict[str, Any]) -> bool:
        """Complete a journaled write a killed process left (idempotent): True once it is committed,
        False when it had not reached its destructive step and was undone instead, or when it was a
        step before the write (a schema migration: completed, the write itself still to make)."""

    def discard(self, payload: dict[str, Any]) -> None:
        """Drop what a journaled write staged, once it is recorded (or given up)."""

    def load_seed(self, table: str, df: pd.DataFrame, columns: Mapping[str, str],
                  comments: Mapping[str, str] | None = None, *, journal: Journal | None = None,
                  batch_size: int | None = None) -> tuple[dict[str, str], bool]:
        """(Re)create the table with exactly `columns`, filled from the frame in one write (its rows
        sent to Spark `batch_size` at a time); returns the table's columns and whether it was laid
        out anew."""

    def retype_table(self, table: str, columns: Mapping[str, str], *, journal: Journal | None = None) -> None:
        """Make the table hold exactly `columns`, keeping (casting) its rows (schema migration of a
        kept table); `journal` hears how to finish it before the table is replaced."""


class Engine(Protocol):
    """The whole engine: its session, its catalog and its writes."""

    @property
    def session(self) -> Session: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def writes(self) -> Writes: ...
