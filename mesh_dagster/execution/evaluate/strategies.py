"""How each model kind creates its physical object and writes an interval into it.

One strategy per way of writing (full, time range, upsert by key, partition overwrite, append,
SCD type 2, seed, view; EMBEDDED and EXTERNAL write nothing; CUSTOM models are written by the
user's class, execution/evaluate/custom_materialization.py). Strategies decide *what* is written;
rendering and the per-apply memos stay with the evaluator, which strategies reach through the
`Evaluation` Protocol, and Spark stays behind the `Engine` Protocol, which makes every write
kill-safe (engine/writes.py).

Each strategy class registers against the kind classes it writes (`@writes(FullKind)`), and
`strategy_for` looks up the kind a model is written as (`BaseKind.written_as`: its own, or per
model another's, as a materialized VIEW is written as FULL). A new kind written a new way is its
kind class and one new registered class here: no `if` chain, and no name to spell twice.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import (
    BaseKind,
    EmbeddedKind,
    ExternalKind,
    FullKind,
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalUnmanagedKind,
    ScdType2ByColumnKind,
    ScdType2ByTimeKind,
    ScdType2Kind,
    SeedKind,
    StandaloneAuditKind,
    ViewKind,
)
from mesh_dagster.core.models.materialization import Materialization
from mesh_dagster.core.models.merge import Upsert
from mesh_dagster.core.models.scd2 import history_query, with_validity_columns
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.core.time.intervals import format_interval_range
from mesh_dagster.core.time.time_column import TimeColumnError, interval_bounds
from mesh_dagster.execution.ports import Engine, Journal

if TYPE_CHECKING:
    import pandas as pd

    from mesh_dagster.execution.evaluate.shapes import Shapes


class Evaluation(Protocol):
    """What a strategy needs from the evaluator of the current apply."""

    @property
    def engine(self) -> Engine: ...

    def render(self, snapshot: Snapshot, start: int | None = None, end: int | None = None,
               execution_time: int | None = None, stage: str = "evaluating") -> str: ...

    def query(self, snapshot: Snapshot, start: int, end: int, execution_time: int) -> AbstractContextManager[str]:
        """The query producing an interval of the model (a Python model's output), inside the block."""

    def statements(self, snapshot: Snapshot, which: str, start: int, end: int, execution_time: int) -> list[str]:
        """The model's rendered `pre` or `post` statements for an interval."""

    def seed(self, snapshot: Snapshot) -> pd.DataFrame:
        """The seed's rows (as text), from the content its snapshot captured."""

    def seed_types(self, snapshot: Snapshot) -> dict[str, str]:
        """The seed's column types (no rows read)."""

    def create(self, snapshot: Snapshot, journal: Journal | None = None) -> None:
        """Create the physical object once per apply (memoised), or migrate the schema of a kept
        table (`journal` hears how to finish the migration)."""

    def time_column_type(self, snapshot: Snapshot) -> str | None: ...

    def table_columns(self, snapshot: Snapshot) -> dict[str, str]:
        """The physical table's columns, read once per apply (and again after a migration)."""

    def materialization(self, snapshot: Snapshot) -> Materialization:
        """A CUSTOM model's materialization class (the code its snapshot stored), instantiated."""

    @property
    def shapes(self) -> Shapes:
        """What is known of tables' columns: a write that may change them says so before
        (`changing`) and after (`learned`)."""

    def query_output(self, snapshot: Snapshot, query: str) -> tuple[dict[str, str], str | None]:
        """The columns `query` outputs (analysed only when something it reads changed since the
        last analysis), and the digest of its inputs."""

    def define_view(self, snapshot: Snapshot, sql: str) -> None:
        """(Re)define the snapshot's view, unless this evaluation already defined it so."""

    def created(self, snapshot: Snapshot, columns: dict[str, str], inputs: str | None = None,
                output: dict[str, str] | None = None) -> None:
        """The strategy created the table with `columns` (`output`: its query's analysis under `inputs`)."""


class WriteStrategy:
    """The base of every strategy: by default it creates and writes nothing.

    Every write runs under its table's lock (the scheduler's), and hands `journal` to the engine:
    a write the engine cannot simply redo tells it, before its destructive step, how to finish it.
    """

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        """Create the physical object (the schema already exists)."""

    def write(self, ev: Evaluation, snapshot: Snapshot, start: int, end: int, execution_time: int,
              journal: Journal | None = None) -> None:
        """Write `[start, end)` into the physical object, idempotently."""

    def lock_scope(self, snapshot: Snapshot, start: int, end: int) -> str | None:
        """What of the table a write of `[start, end)` locks: None, the whole table (a write that
        replaces or reads all of it), or a part other writes of the table may overlap with."""
        return None


# The strategy writing each kind class (`BaseKind.written_as`), filled by `writes`.
STRATEGIES: dict[type[BaseKind], WriteStrategy] = {}
_Strategy = TypeVar("_Strategy", bound=type[WriteStrategy])


def writes(*kinds: type[BaseKind]) -> Callable[[_Strategy], _Strategy]:
    """Register the decorated strategy class as the one writing the models of `kinds` (one
    instance for all of them)."""

    def register(cls: _Strategy) -> _Strategy:
        taken = [k.__name__ for k in kinds if k in STRATEGIES]
        if taken:
            raise ValueError(f"Two write strategies write {', '.join(taken)}: "
                             f"{type(STRATEGIES[kinds[0]]).__name__} and {cls.__name__}")
        strategy = cls()
        STRATEGIES.update(dict.fromkeys(kinds, strategy))
        return cls

    return register


@writes(EmbeddedKind, ExternalKind, StandaloneAuditKind)
class NothingStrategy(WriteStrategy):
    """The kinds without a physical object of ours: EMBEDDED is inlined into its children, EXTERNAL
    is someone else's table."""


@writes(ViewKind)
class ViewStrategy(WriteStrategy):
    """A view has no data and no interval: it is (re)defined whole, every time, except where the
    same evaluation has just defined it the same way (the physical layer, then the backfill)."""

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        ev.define_view(snapshot, ev.render(snapshot, stage="creating"))

    def write(self, ev: Evaluation, snapshot: Snapshot, start: int, end: int, execution_time: int,
              journal: Journal | None = None) -> None:
        ev.define_view(snapshot, ev.render(snapshot, execution_time=execution_time))


@writes(SeedKind)
class SeedStrategy(WriteStrategy):
    """Created empty (so children can be validated against it), then loaded whole from its file."""

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        model = snapshot.model
        types = ev.seed_types(snapshot)
        empty = "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS `{c}`" for c, t in types.items())
        created = ev.engine.catalog.create_table(snapshot.table_name, empty, [], model.storage_format or "parquet",
                                                 types, model.column_descriptions)
        ev.created(snapshot, created)

    def write(self, ev: Evaluation, snapshot: Snapshot, start: int, end: int, execution_time: int,
              journal: Journal | None = None) -> None:
        model = snapshot.model
        batch_size = model.kind.seed.batch_size if model.kind.seed is not None else None
        types = ev.seed_types(snapshot)
        ev.shapes.changing(snapshot, types)
        columns, relaid = ev.engine.writes.load_seed(snapshot.table_name, ev.seed(snapshot), types,
                                                     model.column_descriptions, journal=journal, batch_size=batch_size)
        ev.shapes.learned(snapshot, columns, relaid=relaid)


class QueryStrategy(WriteStrategy):
    """A table filled from the model's query, between its pre- and post-statements. A Python
    model's query selects its function's output (`Evaluation.query`): every kind written from a
    query writes Python models too."""

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        """The table of the declared columns, else of the query's (analysed once: a full rewrite of
        the same query in the same evaluation reuses the answer)."""
        model = snapshot.model
        output, inputs, sql = None, None, ev.render(snapshot, stage="creating")
        if model.columns is None:
            output, inputs = ev.query_output(snapshot, sql)
        created = ev.engine.catalog.create_table(snapshot.table_name, sql, model.effective_partitioned_by,
                                                 model.storage_format or "parquet", model.columns or output,
                                                 model.column_descriptions)
        ev.created(snapshot, created, inputs, output)

    def write(self, ev: Evaluation, snapshot: Snapshot, start: int, end: int, execution_time: int,
              journal: Journal | None = None) -> None:
        for statement in ev.statements(snapshot, "pre", start, end, execution_time):
            ev.engine.session.execute(statement)
        with ev.query(snapshot, start, end, execution_time) as query:
            self.write_rendered(ev, snapshot, query, start, end, execution_time, journal)
        for statement in ev.statements(snapshot, "post", start, end, execution_time):
            ev.engine.session.execute(statement)

    def write_rendered(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                       execution_time: int, journal: Journal | None) -> None:
        """Write the rendered query. One reading the model's own table (its previous state) is
        written `reads_self`: the engine never reads and overwrites a table in one statement."""
        if snapshot.model.self_referencing:
            ev.create(snapshot, journal)  # the query reads it, even on the first write
        self.write_query(ev, snapshot, query, start, end, journal)

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        raise NotImplementedError


@writes(FullKind)
class FullStrategy(QueryStrategy):
    """Every write replaces the whole table (the interval only feeds `@start_ds`/`@end_ds`)."""

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        """The query's columns are analysed only when something it reads changed since the last
        write (shapes.py); the table's known columns are forgotten before a write that lays it out anew."""
        model = snapshot.model
        produced, inputs = ev.query_output(snapshot, query)
        ev.shapes.changing(snapshot, model.columns if model.columns is not None else produced)
        columns, relaid = ev.engine.writes.replace_table(snapshot.table_name, query, model.effective_partitioned_by,
                                                         model.storage_format or "parquet", model.columns,
                                                         model.column_descriptions, journal=journal,
                                                         reads_self=model.self_referencing, produced=produced)
        ev.shapes.learned(snapshot, columns, inputs, produced, relaid=relaid)


@writes(IncrementalByTimeRangeKind)
class TimeRangeStrategy(QueryStrategy):
    """Each write replaces exactly the rows of its interval, bounded on the time column."""

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        low, high = time_bounds(ev, snapshot, start, end)
        ev.engine.writes.insert_overwrite_interval(snapshot.table_name, query, _time_kind(snapshot).time_column,
                                                   low, high, journal=journal,
                                                   reads_self=snapshot.model.self_referencing,
                                                   columns=ev.table_columns(snapshot))

    def lock_scope(self, snapshot: Snapshot, start: int, end: int) -> str | None:
        """Batches of one model may run side by side (`batch_concurrency`): each replaces only the
        partitions of its interval (its table is partitioned by the time column), so each locks
        its interval. One reading its own table locks all of it."""
        model = snapshot.model
        if model.batch_concurrency > 1 and not model.self_referencing:
            return f"{start}-{end}"
        return None


@writes(ScdType2ByTimeKind, ScdType2ByColumnKind)
class ScdType2Strategy(QueryStrategy):
    """Each write folds the query's rows, a snapshot of the source, into the table's history
    (core/models/scd2.py): the whole table is rewritten from a query reading it (engine/writes.py keeps the
    previous history readable until the new one is committed)."""

    def create(self, ev: Evaluation, snapshot: Snapshot) -> None:
        model, kind = snapshot.model, _scd_kind(snapshot)
        columns = {**model.columns, **kind.added_columns()} if model.columns is not None else None
        ev.engine.catalog.create_table(snapshot.table_name,
                                       with_validity_columns(ev.render(snapshot, stage="creating"), kind),
                                       model.effective_partitioned_by, model.storage_format or "parquet", columns,
                                       model.column_descriptions)

    def write_rendered(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                       execution_time: int, journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        kind, table = _scd_kind(snapshot), snapshot.table_name
        added = {name.lower() for name in kind.added_columns()}
        columns = [name for name in ev.engine.catalog.columns(table) if name.lower() not in added]
        history = history_query(kind, table, query, columns, ms_to_datetime(execution_time),
                                f"{snapshot.model.where()} ({snapshot.name})")
        ev.engine.writes.rewrite_table(table, history, journal=journal)


def _scd_kind(snapshot: Snapshot) -> ScdType2Kind:
    kind = snapshot.model.kind.scd_type_2
    if kind is None:
        raise ModelError(f"{snapshot.name} is no SCD type 2 model", snapshot.model.path, snapshot.model.line)
    return kind


@writes(IncrementalByUniqueKeyKind)
class UniqueKeyStrategy(QueryStrategy):
    """Each write upserts its rows by the model's unique key (see core/models/merge.py); a batch whose
    output repeats a key is refused, naming the keys, before anything is written."""

    DUPLICATES_SHOWN = 5

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        upsert = snapshot.model.kind.upsert
        assert upsert is not None  # the kinds naming this strategy upsert by key
        duplicates = ev.engine.writes.upsert(snapshot.table_name, query, upsert, self.DUPLICATES_SHOWN, journal=journal)
        if duplicates:
            raise _duplicate_keys(snapshot, upsert, duplicates, (start, end), self.DUPLICATES_SHOWN)


def _duplicate_keys(snapshot: Snapshot, upsert: Upsert, duplicates: list[tuple],
                    interval: tuple[int, int], shown: int) -> ModelError:
    model, keys = snapshot.model, upsert.keys
    listed = "; ".join(", ".join(f"{k}={v!r}" for k, v in zip(keys, row[:-1])) + f" ({row[-1]} rows)"
                       for row in duplicates)
    more = " and maybe more" if len(duplicates) >= shown else ""
    when = format_interval_range([interval], model.interval_unit)
    return ModelError(
        f"unique_key {upsert.describe_key()} of {model.name} is not unique in the query's output for [{when}]: "
        f"{listed}{more}. Nothing was written: make the query return one row per key (e.g. keep the latest with "
        "QUALIFY ROW_NUMBER() OVER (PARTITION BY <key> ORDER BY <column> DESC) = 1)", model.path, model.line_of("kind"))


@writes(IncrementalByPartitionKind)
class PartitionsStrategy(QueryStrategy):
    """Each write replaces the partitions its output holds and leaves the others alone."""

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        ev.engine.writes.overwrite_partitions(snapshot.table_name, query, journal=journal,
                                              reads_self=snapshot.model.self_referencing)


@writes(IncrementalUnmanagedKind)
class AppendStrategy(QueryStrategy):
    """Each write adds its rows (INSERT INTO); nothing is ever replaced."""

    def write_query(self, ev: Evaluation, snapshot: Snapshot, query: str, start: int, end: int,
                    journal: Journal | None) -> None:
        ev.create(snapshot, journal)
        ev.engine.writes.append(snapshot.table_name, query, journal=journal)


def time_bounds(ev: Evaluation, snapshot: Snapshot, start: int, end: int) -> tuple[str, str]:
    """Spark SQL literals bounding the time column for `[start, end)`: the only place an interval
    becomes bounds. The stored column type decides them (see core/time/time_column.py)."""
    model, kind = snapshot.model, _time_kind(snapshot)
    try:
        low, high = interval_bounds(ms_to_datetime(start), ms_to_datetime(end), ev.time_column_type(snapshot),
                                    kind.time_column_format)
    except TimeColumnError as e:
        raise ModelError(f"Cannot bound time_column {kind.time_column}: {e}", model.path, model.line) from None
    return low.sql(dialect="spark"), high.sql(dialect="spark")


def _time_kind(snapshot: Snapshot) -> IncrementalByTimeRangeKind:
    kind = snapshot.model.kind.time_range
    if kind is None:
        raise ModelError(f"{snapshot.name} has no time column", snapshot.model.path, snapshot.model.line)
    return kind


def strategy_for(snapshot: Snapshot) -> WriteStrategy:
    """The strategy writing `snapshot`'s model: the one its kind names."""
    return strategy_of(snapshot.model.kind)


def strategy_of(kind: BaseKind) -> WriteStrategy:
    """The strategy registered for the kind `kind` is written as (a materialized VIEW: FULL's); a
    kind with none registered is a programming error, said with the kinds there are."""
    written_as = kind.written_as
    strategy = STRATEGIES.get(written_as)
    if strategy is None:
        raise LookupError(f"Kind {kind.name.value} ({type(kind).__name__}) is written as {written_as.__name__}, "
                          f"for which no strategy class registers (@writes): known are "
                          f"{', '.join(sorted(k.__name__ for k in STRATEGIES))}")
    return strategy
