"""Backfilling missing intervals in DAG order, batch by batch.

An interval is recorded in state only after its batch *and* its blocking audits succeed, so a
killed or failed backfill resumes exactly where it stopped, and a re-run of an interval replaces
its data (writes are idempotent overwrites).

One writer per table at a time, whichever process or front door writes (a plan, `mesh run`, a
Dagster run): a batch is written, audited and recorded under its table's lock. Under the lock it
first re-reads the state store: an interval of a history-keeping kind that another writer recorded
meanwhile is skipped (appending or folding it again would apply it twice), and a write a killed
process left journaled for the table is finished first (`_JournaledWrite`). Recording an interval
and ending its journal entry is one transaction, so a crash leaves one or the other, never neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from mesh_dagster.core.errors import AuditError, MeshError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill, interval_count
from mesh_dagster.core.plan.estimate import BatchTiming
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.intervals import Interval, batch, expand_range, format_interval_range, intervals_cover
from mesh_dagster.engine.kill_points import kill_point  # a test hook; imports nothing of Spark
from mesh_dagster.execution.evaluate.evaluator import AuditResult, SnapshotEvaluator
from mesh_dagster.execution.evaluate.strategies import strategy_for
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.intervals.tasks import run_tasks
from mesh_dagster.execution.locking import table_lock
from mesh_dagster.execution.ports import State
from mesh_dagster.state.journal import PendingWrite
from mesh_dagster.state.store import Lease


@dataclass
class Batch:
    snapshot: Snapshot
    interval: Interval
    index: int
    count: int
    full_refresh: bool
    restating: bool = False  # rebuilds the model's recorded history (a restatement): written even where recorded

    @property
    def recorded_interval(self) -> Interval:
        """What its success records: a timeless model's data is all time's."""
        return ALL_TIME if self.snapshot.model.kind.is_timeless else self.interval

    def describe(self, env_view: str) -> str:
        kind = self.snapshot.model.kind
        if kind.is_symbolic:
            return f"audit {format_interval_range([self.interval], self.snapshot.model.interval_unit)}"
        if kind.seed is not None:
            return "insert seed file"
        if kind.is_view:
            return "recreate view"
        if self.full_refresh:
            return "full refresh"
        unit = self.snapshot.model.interval_unit
        return f"insert {format_interval_range([self.interval], unit)}"


def plan_batches(snapshots: dict[str, Snapshot], backfills: dict[str, Backfill], order: list[str]) -> list[Batch]:
    out: list[Batch] = []
    for name in order:
        if name not in backfills:
            continue
        snap, bf = snapshots[name], backfills[name]
        if bf.full_refresh or not snap.model.kind.is_incremental:
            span = (min(s for s, _ in bf.intervals), max(e for _, e in bf.intervals))
            out.append(Batch(snap, span, 1, 1, True, bf.clear))
            continue
        pieces = batch(_unit_pieces(snap, bf.intervals), snap.model.batch_size)
        out += [Batch(snap, piece, i, len(pieces), False, bf.clear) for i, piece in enumerate(pieces, 1)]
    return out


def _unit_pieces(snap: Snapshot, ranges: list[Interval]) -> list[Interval]:
    """Split merged ranges into unit intervals only when batching needs it."""
    if snap.model.batch_size is None:
        return ranges
    unit = snap.model.interval_unit
    return [piece for start, end in ranges for piece in expand_range(unit, start, end)]


@dataclass
class BatchResult:
    audits: list[AuditResult]
    recorded: Interval | None  # what was added to the state store; None when a blocking audit failed
    error: AuditError | None = None
    interval: Interval | None = None  # the batch's interval (what its audits looked at)
    skipped: bool = False  # another writer recorded it meanwhile: nothing was written


@dataclass
class _Evaluated:
    """What a batch's turn at its table produced, for the caller's thread to report."""

    batch: Batch
    audits: list[AuditResult]
    seconds: float
    recorded: Interval | None = None
    error: AuditError | None = None
    skipped: bool = False
    notes: list[str] = field(default_factory=list)  # for the listener: writes finished for a killed process


def _evaluate_batch(b: Batch, evaluator: SnapshotEvaluator, state: State, execution_time: int) -> _Evaluated:
    """Write a batch, audit it and record its interval, all under its table's lock: Spark and state
    store work only, safe on a worker thread (the listener hears of it on the caller's)."""
    began = time.perf_counter()
    start, end = b.interval
    snap = b.snapshot
    with _write_lock(state, b) as lease:
        if _written_meanwhile(state, b):
            return _Evaluated(b, [], time.perf_counter() - began, b.recorded_interval, skipped=True)
        kill_point("write", snap.table_name)
        write = _JournaledWrite(state, evaluator, b, lease)
        if not write.resume(execution_time):
            evaluator.evaluate(snap, start, end, execution_time, write.journal)
        # A node without a table of ours (a standalone audit, an external model) audits the batch's range.
        whole_table = (b.full_refresh or not snap.model.kind.is_incremental) and not snap.model.kind.is_symbolic
        audits = evaluator.audit(snap, None if whole_table else start, None if whole_table else end, execution_time)
        error = _blocking_failure(evaluator, snap, audits)
        if error is not None:
            write.abandon()
            return _Evaluated(b, audits, time.perf_counter() - began, None, error, notes=write.notes)
        write.record()
    return _Evaluated(b, audits, time.perf_counter() - began, b.recorded_interval, notes=write.notes)


def _write_lock(state: State, b: Batch) -> AbstractContextManager[Lease]:
    """The table's lock (or, for batches that may overlap, the lock of the part they write)."""
    snap = b.snapshot
    return table_lock(state, snap.table_name, strategy_for(snap).lock_scope(snap, *b.interval))


def _written_meanwhile(state: State, b: Batch) -> bool:
    """Whether another writer recorded this batch's interval while it waited for the lock, in a
    kind whose every write builds on the rows before it (unique key, SCD type 2, partitions,
    appends): applied twice, its rows would be doubled or folded twice. A restatement rebuilding
    that history writes anyway; other kinds replace exactly their interval, and write it again."""
    snap = b.snapshot
    if b.restating or not snap.model.kind.restates_full_history:
        return False
    return intervals_cover(state.intervals.get_intervals([snap.interval_key])[snap.interval_key], b.recorded_interval)


def _blocking_failure(evaluator: SnapshotEvaluator, snap: Snapshot, audits: list[AuditResult]) -> AuditError | None:
    try:
        evaluator.check_audits(snap, audits)
    except AuditError as e:
        return e
    return None


class _JournaledWrite:
    """One batch's write as the journal of writes (state/journal.py) knows it.

    Before writing, it finishes what a killed process left journaled for the table (the write of
    this very interval: then only its audits and record remain). The engine journals this write
    before its destructive step (`journal`); recording the interval ends the entry in the same
    transaction; then what the write staged goes, and generations older than the one it replaced.
    """

    def __init__(self, state: State, evaluator: SnapshotEvaluator, b: Batch, lease: Lease) -> None:
        self.state, self.evaluator, self.batch, self.lease = state, evaluator, b, lease
        self.snapshot = b.snapshot
        self.table = b.snapshot.table_name
        self.payload: dict[str, Any] | None = None
        self.notes: list[str] = []

    def journal(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        start, end = self.batch.recorded_interval
        self.state.journal.journal_write(PendingWrite(
            table=self.table, operation=payload["operation"], name=self.snapshot.name,
            version=self.snapshot.version or "", start=start, end=end, payload=payload, owner=self.lease.owner),
            lease=self.lease)

    def resume(self, execution_time: int) -> bool:
        """Finish the table's journaled write, if any; True when it was this batch's own."""
        pending = self.state.journal.pending_write(self.table)
        if pending is None:
            return False
        engine = self.evaluator.engine
        self.evaluator.shapes.changing(self.snapshot)  # finishing it may lay the table out anew (a swap)
        if not engine.writes.finish(pending.payload):  # it never reached its destructive step: undone
            self.state.journal.finish_write(self.table, None, lease=self.lease)
            return False
        if pending.operation != "clear" and (pending.name, pending.version, pending.start, pending.end) == (
                self.snapshot.name, self.snapshot.version or "", *self.batch.recorded_interval):
            self.payload = pending.payload
            self.notes.append(f"finished the write of {self.batch.describe('')} that an interrupted run left")
            return True
        self._finish_other(pending, execution_time)
        return False

    def _finish_other(self, pending: PendingWrite, execution_time: int) -> None:
        """Another interval's write, complete now. An append's rows are in the table: its interval
        is recorded (once its audits pass), or they would be appended again. Any other write is
        computed again when its interval comes: that is exact."""
        interval = None
        if pending.operation == "append":
            audits = self.evaluator.audit(self.snapshot, pending.start, pending.end, execution_time)
            error = _blocking_failure(self.evaluator, self.snapshot, audits)
            if error is not None:
                raise error
            interval = (pending.name, pending.version, pending.start, pending.end)
        self.state.journal.finish_write(self.table, interval, _retired(pending.payload), lease=self.lease)
        self._clean_up(pending.payload)
        what = format_interval_range([(pending.start, pending.end)], self.snapshot.model.interval_unit)
        self.notes.append(f"finished the write of [{what}] that an interrupted run left")

    def record(self) -> None:
        snap = self.snapshot
        interval = (snap.name, snap.version or "", *self.batch.recorded_interval)
        self.state.journal.finish_write(self.table, interval, _retired(self.payload), lease=self.lease)
        kill_point("recorded", self.table)
        if self.payload is not None:
            self._clean_up(self.payload)

    def abandon(self) -> None:
        """A blocking audit failed: the interval stays unrecorded. Appended rows are in the table:
        their journal entry stays, so the next run audits them again instead of appending them
        twice. Any other write is simply computed again next time."""
        if self.payload is None or self.payload["operation"] == "append":
            return
        self.state.journal.finish_write(self.table, None, _retired(self.payload), lease=self.lease)
        self._clean_up(self.payload)

    def _clean_up(self, payload: dict[str, Any]) -> None:
        """Drop what the write staged; a switch keeps only the generation it replaced (for readers
        still in flight) and deletes older ones."""
        engine = self.evaluator.engine
        engine.writes.discard(payload)
        if payload["operation"] != "switch":
            return
        kept = {payload["previous"], payload["location"]}
        old = [location for _, location in self.state.journal.retired_locations(self.table) if location not in kept]
        if old:
            engine.catalog.drop_locations(old)
            self.state.journal.forget_retired([(self.table, location) for location in old])


def clear_history(state: State, evaluator: SnapshotEvaluator, snapshot: Snapshot, intervals: list[Interval]) -> None:
    """Empty a table before its whole history is rebuilt (a restatement of a kind whose intervals
    build on each other), kill-safely: its intervals are forgotten and a `clear` journaled in one
    transaction before the TRUNCATE, so a kill in between leaves the state saying "missing", and the
    next write to the table (`_JournaledWrite.resume`) empties it first. Never "recorded but empty"."""
    table = snapshot.table_name
    with table_lock(state, table) as lease:
        evaluator.create(snapshot)
        payload = {"operation": "clear", "table": table}
        start, end = min(s for s, _ in intervals), max(e for _, e in intervals)
        state.journal.journal_write(PendingWrite(table=table, operation="clear", name=snapshot.name,
                                         version=snapshot.version or "", start=start, end=end, payload=payload,
                                         owner=lease.owner),
                            lease=lease, forget=[(*snapshot.interval_key, s, e) for s, e in intervals])
        kill_point("journaled", table)
        evaluator.engine.writes.finish(payload)
        kill_point("overwritten", table)
        state.journal.finish_write(table, None, lease=lease)


def _retired(payload: dict[str, Any] | None) -> list[str]:
    """The location a committed switch replaced."""
    return [payload["previous"]] if payload is not None and payload["operation"] == "switch" else []


def _record_batch(done: _Evaluated, listener: ApplyListener, view_of: Callable[[str], str]) -> BatchResult:
    """Report a batch's outcome (on the caller's thread: the listener is never used from two)."""
    b, audits, snap = done.batch, done.audits, done.batch.snapshot
    view = view_of(snap.name)
    for note in done.notes:
        listener.log(f"{view}: {note}")
    if done.skipped:
        listener.log(f"{view}: {b.describe('')} was written by another run meanwhile: skipped")
        listener.batch_done(view, b.index, b.count, f"skipped ({b.describe('')})", done.seconds, 0, 0)
        return BatchResult([], done.recorded, interval=b.interval, skipped=True)
    failed = [a for a in audits if not a.passed]
    for a in failed:
        if snap.model.kind.is_standalone_audit:
            listener.log(f"Standalone audit '{a.name}' failed: {a.count} row(s) returned (a warning: standalone "
                         f"audits never block)")
        elif not a.blocking:
            listener.log(f"Non-blocking audit '{a.name}' failed for {snap.name}: {a.count} row(s)")
    if done.error is not None:
        return BatchResult(audits, None, done.error, b.interval)
    listener.batch_done(view, b.index, b.count, b.describe(""), done.seconds, len(audits) - len(failed), len(failed))
    listener.timed(done.seconds)
    return BatchResult(audits, done.recorded, interval=b.interval)


def execute_batches(batches: list[Batch], evaluator: SnapshotEvaluator, state: State, execution_time: int,
                    listener: ApplyListener, view_of: Callable[[str], str], *,
                    concurrent_tasks: int = 1) -> list[BatchResult]:
    """Evaluate, audit and record `batches` (in DAG order); a result per batch handed over.

    Up to `concurrent_tasks` batches run at once, at most a model's `batch_concurrency` of one
    model, and a model's batches start only once every batch of the models it reads (through any
    chain of models) is recorded. A model that depends on its past has a `batch_concurrency` of 1:
    its batches run in interval order, each once the one before is recorded, so the first failure
    (or failing audit) leaves every later interval of it uncomputed.

    The first failing audit stops the run: nothing new starts, the batches already running finish
    (and are recorded if they pass: their data is complete), and the failing result is the last
    one returned. Nothing is left running on return.

    The one sequence behind `mesh plan`, `mesh run` and Dagster materializations.
    """
    results: list[BatchResult] = []
    failure: list[BatchResult] = []
    timed: list[BatchTiming] = []

    def record(b: Batch, evaluated: _Evaluated) -> bool:
        result = _record_batch(evaluated, listener, view_of)
        (results if result.error is None else failure).append(result)
        if result.error is None and not result.skipped:
            timed.append(_timing(b, evaluated.seconds))
        return result.error is None

    snapshots = {b.snapshot.name: b.snapshot for b in batches}
    run_tasks(batches, key=lambda b: b.snapshot.name,
              work=lambda b: _evaluate_batch(b, evaluator, state, execution_time), done=record,
              waits_for=upstream_of(snapshots.keys(), evaluator.snapshots),
              limit=concurrent_tasks, per_key=lambda name: snapshots[name].model.batch_concurrency)
    try:
        state.timings.record(timed)  # what later plans estimate their backfill from
    except MeshError as e:  # a number for estimates: never worth failing a run that wrote its data
        listener.log(f"The batches' timings were not kept: {e}")
    return results + failure[:1]


def _timing(b: Batch, seconds: float) -> BatchTiming:
    """How long a batch took, with what it wrote (core/plan/estimate.py reads it)."""
    model = b.snapshot.model
    full = b.full_refresh or not model.kind.is_incremental
    return BatchTiming(b.snapshot.name, b.snapshot.version or "", interval_count(model, [b.interval]) or 1, seconds,
                       full)


def upstream_of(names: AbstractSet[str], snapshots: Mapping[str, Snapshot]) -> dict[str, set[str]]:
    """For each of `names`, the others of `names` it reads, directly or through models that are
    not among them (an EMBEDDED model, a model with nothing to do)."""
    memo: dict[str, set[str]] = {}

    def upstream(name: str) -> set[str]:
        if name not in memo:
            memo[name] = set()  # a guard: the DAG has no cycles, but a bad state must not recurse forever
            found: set[str] = set()
            for parent in snapshots[name].parents if name in snapshots else []:
                if parent.name in names:
                    found.add(parent.name)
                found |= upstream(parent.name)
            memo[name] = found
        return memo[name]

    return {name: upstream(name) for name in names}


def run_batches(
    batches: list[Batch],
    evaluator: SnapshotEvaluator,
    state: State,
    execution_time: int,
    listener: ApplyListener,
    view_of: Callable[[str], str],
    *,
    concurrent_tasks: int = 1,
) -> None:
    """`execute_batches` framed by the listener's backfill events; the first failure is raised."""
    listener.backfill_start(len(batches))
    for result in execute_batches(batches, evaluator, state, execution_time, listener, view_of,
                                  concurrent_tasks=concurrent_tasks):
        if result.error is not None:
            raise result.error
    listener.backfill_done(len(batches))
