"""Backfilling missing intervals in DAG order, batch by batch.

An interval is recorded in state only after its batch *and* its blocking audits succeed, so a
killed or failed backfill resumes exactly where it stopped, and a re-run of an interval replaces
its data (writes are idempotent overwrites).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mesh_dagster.core.cron import interval_unit
from mesh_dagster.core.intervals import Interval, batch, expand_range, format_interval_range
from mesh_dagster.core.model import KindName
from mesh_dagster.core.plan import ALL_TIME, Backfill
from mesh_dagster.core.snapshot import Snapshot
from mesh_dagster.execution.evaluator import SnapshotEvaluator
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
        began = time.perf_counter()
        start, end = b.interval
        evaluator.evaluate(b.snapshot, start, end, execution_time)
        audit_start, audit_end = (None, None) if b.full_refresh or not b.snapshot.model.kind.is_incremental else (start, end)
        results = evaluator.audit(b.snapshot, audit_start, audit_end, execution_time)
        failed = [r for r in results if not r.passed]
        for r in failed:
            if not r.blocking:
                listener.log(f"Non-blocking audit '{r.name}' failed for {b.snapshot.name}: {r.count} row(s)")
        evaluator.check_audits(b.snapshot, results)
        recorded = ALL_TIME if b.snapshot.model.kind.name in (KindName.SEED, KindName.VIEW) else b.interval
        state.add_interval(b.snapshot.name, b.snapshot.version, *recorded)
        listener.batch_done(view_of(b.snapshot.name), b.index, b.count, b.describe(""), time.perf_counter() - began,
                            len(results) - len(failed), len(failed))
    listener.backfill_done(len(batches))
