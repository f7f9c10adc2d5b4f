"""Backfilling missing intervals in DAG order, batch by batch.

An interval is recorded in state only after its batch *and* its blocking audits succeed, so a
killed or failed backfill resumes exactly where it stopped, and a re-run of an interval replaces
its data (writes are idempotent overwrites).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mesh_dagster.core.cron import interval_unit
from mesh_dagster.core.errors import AuditError
from mesh_dagster.core.intervals import Interval, batch, expand_range, format_interval_range
from mesh_dagster.core.model import KindName
from mesh_dagster.core.plan import ALL_TIME, Backfill
from mesh_dagster.core.snapshot import Snapshot
from mesh_dagster.execution.evaluator import AuditResult, SnapshotEvaluator
from mesh_dagster.execution.events import ApplyListener


@dataclass
class Batch:
    snapshot: Snapshot
    interval: Interval
    index: int
    count: int
    full_refresh: bool

    def describe(self, env_view: str) -> str:
        kind = self.snapshot.model.kind.name
        if kind == KindName.SEED:
            return "insert seed file"
        if kind == KindName.VIEW:
            return "recreate view"
        if self.full_refresh:
            return "full refresh"
        unit = interval_unit(self.snapshot.model.cron)
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
        pieces = batch(_unit_pieces(snap, bf.intervals), snap.model.kind.batch_size)
        out += [Batch(snap, piece, i, len(pieces), False) for i, piece in enumerate(pieces, 1)]
    return out


def _unit_pieces(snap: Snapshot, ranges: list[Interval]) -> list[Interval]:
    """Split merged ranges into unit intervals only when batching needs it."""
    if snap.model.kind.batch_size is None:
        return ranges
    unit = interval_unit(snap.model.cron)
    return [piece for start, end in ranges for piece in expand_range(unit, start, end)]


# Seeds and views are complete once built: their single interval spans all time.
TIMELESS_KINDS = (KindName.SEED, KindName.VIEW)


@dataclass
class BatchResult:
    audits: list[AuditResult]
    recorded: Interval | None  # what was added to the state store; None when a blocking audit failed
    error: AuditError | None = None


def execute_batch(b: Batch, evaluator: SnapshotEvaluator, state, execution_time: int,
                  listener: ApplyListener, view_of) -> BatchResult:
    """Evaluate one batch, audit it, and record its interval only if no blocking audit failed.

    The one sequence behind `mesh plan`, `mesh run` and Dagster materializations.
    """
    began = time.perf_counter()
    start, end = b.interval
    snap = b.snapshot
    evaluator.evaluate(snap, start, end, execution_time)
    whole_table = b.full_refresh or not snap.model.kind.is_incremental
    audits = evaluator.audit(snap, None if whole_table else start, None if whole_table else end, execution_time)
    failed = [a for a in audits if not a.passed]
    for a in failed:
        if not a.blocking:
            listener.log(f"Non-blocking audit '{a.name}' failed for {snap.name}: {a.count} row(s)")
    try:
        evaluator.check_audits(snap, audits)
    except AuditError as e:
        return BatchResult(audits, None, e)
    recorded = ALL_TIME if snap.model.kind.name in TIMELESS_KINDS else b.interval
    state.add_interval(snap.name, snap.version, *recorded)
    listener.batch_done(view_of(snap.name), b.index, b.count, b.describe(""), time.perf_counter() - began,
                        len(audits) - len(failed), len(failed))
    return BatchResult(audits, recorded)


def run_batches(
    batches: list[Batch],
    evaluator: SnapshotEvaluator,
    state,
    execution_time: int,
    listener: ApplyListener,
    view_of,
) -> None:
    """Evaluate, audit and record each batch; stop at the first failure."""
    listener.backfill_start(len(batches))
    for b in batches:
        result = execute_batch(b, evaluator, state, execution_time, listener, view_of)
        if result.error is not None:
            raise result.error
    listener.backfill_done(len(batches))
