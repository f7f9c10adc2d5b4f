"""Backfilling missing intervals in DAG order, batch by batch.

An interval is recorded in state only after its batch *and* its blocking audits succeed, so a
killed or failed backfill resumes exactly where it stopped, and a re-run of an interval replaces
its data (writes are idempotent overwrites).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from mesh_dagster.core.errors import AuditError
from mesh_dagster.core.intervals import Interval, batch, expand_range, format_interval_range
from mesh_dagster.core.kinds import SeedKind
from mesh_dagster.core.plan import ALL_TIME, Backfill
from mesh_dagster.core.snapshot import Snapshot
from mesh_dagster.execution.evaluator import AuditResult, SnapshotEvaluator
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.locking import table_lock
from mesh_dagster.execution.state import State
from mesh_dagster.execution.strategies import strategy_for
from mesh_dagster.execution.tasks import run_tasks


@dataclass
class Batch:
    snapshot: Snapshot
    interval: Interval
    index: int
    count: int
    full_refresh: bool

    def describe(self, env_view: str) -> str:
        kind = self.snapshot.model.kind
        if isinstance(kind, SeedKind):
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
            out.append(Batch(snap, span, 1, 1, True))
            continue
        pieces = batch(_unit_pieces(snap, bf.intervals), snap.model.batch_size)
        out += [Batch(snap, piece, i, len(pieces), False) for i, piece in enumerate(pieces, 1)]
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


@dataclass
class _Evaluated:
    """What the Spark side of a batch produced, before anything is recorded."""

    batch: Batch
    audits: list[AuditResult]
    seconds: float


def _evaluate_batch(b: Batch, evaluator: SnapshotEvaluator, state: State, execution_time: int) -> _Evaluated:
    """Write a batch and run its audits: Spark work (and the table's lock), safe on a worker thread."""
    began = time.perf_counter()
    start, end = b.interval
    snap = b.snapshot
    with _write_lock(state, snap):
        evaluator.evaluate(snap, start, end, execution_time)
    whole_table = b.full_refresh or not snap.model.kind.is_incremental
    audits = evaluator.audit(snap, None if whole_table else start, None if whole_table else end, execution_time)
    return _Evaluated(b, audits, time.perf_counter() - began)


def _write_lock(state: State, snapshot: Snapshot) -> AbstractContextManager[object]:
    """The table's lock around writes that must not overlap another process's (see
    `WriteStrategy.exclusive`); other writes take none."""
    return table_lock(state, snapshot.table_name) if strategy_for(snapshot).exclusive else nullcontext()


def _record_batch(done: _Evaluated, evaluator: SnapshotEvaluator, state: State, listener: ApplyListener,
                  view_of: Callable[[str], str]) -> BatchResult:
    """Record a batch's interval unless a blocking audit failed (on the caller's thread: the state
    store and the listener are never used from two threads)."""
    b, audits, snap = done.batch, done.audits, done.batch.snapshot
    failed = [a for a in audits if not a.passed]
    for a in failed:
        if not a.blocking:
            listener.log(f"Non-blocking audit '{a.name}' failed for {snap.name}: {a.count} row(s)")
    try:
        evaluator.check_audits(snap, audits)
    except AuditError as e:
        return BatchResult(audits, None, e, b.interval)
    recorded = ALL_TIME if snap.model.kind.is_timeless else b.interval
    state.add_interval(*snap.interval_key, *recorded)
    listener.batch_done(view_of(snap.name), b.index, b.count, b.describe(""), done.seconds,
                        len(audits) - len(failed), len(failed))
    return BatchResult(audits, recorded, interval=b.interval)


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

    def record(_b: Batch, evaluated: _Evaluated) -> bool:
        result = _record_batch(evaluated, evaluator, state, listener, view_of)
        (results if result.error is None else failure).append(result)
        return result.error is None

    snapshots = {b.snapshot.name: b.snapshot for b in batches}
    run_tasks(batches, key=lambda b: b.snapshot.name,
              work=lambda b: _evaluate_batch(b, evaluator, state, execution_time), done=record,
              waits_for=upstream_of(snapshots.keys(), evaluator.snapshots),
              limit=concurrent_tasks, per_key=lambda name: snapshots[name].model.batch_concurrency)
    return results + failure[:1]


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
