"""Backfills: the intervals each snapshot still has to compute before an environment may use it.

Plans (the changed models), `mesh run` (every model whose cron is due) and Dagster
materialisations all ask the same question of the state store, so it is answered here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.intervals import Interval, compute_missing, format_interval_range, subtract_intervals
from mesh_dagster.core.time.starts import inferred_starts

# Non-incremental kinds are complete once built; their single interval spans all time.
ALL_TIME: Interval = (0, 253402300800000)  # 9999-12-31


class IntervalReader(Protocol):
    """The state store's interval log (its `intervals` part)."""

    def get_intervals(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[int, int]]]: ...


@dataclass
class Backfill:
    """Work for one snapshot: its missing intervals (or a full refresh)."""

    name: str
    intervals: list[Interval]
    full_refresh: bool
    clear: bool = False  # empty the table first (a history-keeping kind rebuilt by a restatement)

    def describe(self, unit: IntervalUnit | str) -> str:
        return "[full refresh]" if self.full_refresh else f"[{format_interval_range(self.intervals, unit)}]"


@dataclass(frozen=True)
class Clearing:
    """Intervals of one table version forgotten after a prod restatement (a development version of
    a restated model), so the environments reading it recompute them at their next run."""

    name: str
    version: str
    interval: Interval


def interval_count(model: Model, intervals: Sequence[Interval]) -> int:
    """How many of the model's intervals `intervals` span (a seed or view: one, built once)."""
    if model.kind.is_timeless:
        return 1 if intervals else 0
    unit = model.interval_unit
    return sum(max(unit.index_of(end) - unit.index_of(start), 1) for start, end in intervals)


def compute_backfills(
    log: IntervalReader,
    snapshots: dict[str, Snapshot],
    scope: set[str],
    previous: dict[str, Snapshot],
    *,
    order: list[str],
    start: str | None,
    end: str | None,
    execution_ms: int,
    ignore_cron: bool = False,
    min_intervals: int = 0,
    end_bounded: bool = True,
    start_of: Mapping[str, int] | None = None,
    recompute_from: Mapping[str, int] | None = None,
) -> dict[str, Backfill]:
    """Missing intervals of the snapshots in `scope` (in DAG order).

    `start_of` overrides the start for some models (a preview covers a short range);
    `min_intervals` makes each model check at least that many intervals back from its end;
    `recompute_from` treats their intervals from that time on as missing (`--effective-from`).

    A snapshot that depends on its past (`Snapshot.depends_on_past`) cannot start in the middle of
    its history: each interval is computed from the table the previous ones left. Its missing
    intervals are counted from its own start whatever `start` (or `start_of`) says, so the first of
    them always follows an interval it has (or is its first), and the scheduler runs them in order.
    """
    start_of, recompute_from = start_of or {}, recompute_from or {}
    starts = snapshot_starts(snapshots, execution_ms, order)
    candidates = [snapshots[n] for n in order if n in scope and snapshots[n].model.is_scheduled]
    keys = [s.interval_key for s in candidates]
    prev_keys = [p.interval_key for p in previous.values() if p.version]
    intervals = log.get_intervals(keys + prev_keys) if candidates else {}
    backfills: dict[str, Backfill] = {}
    for snap in candidates:
        model = snap.model
        present = intervals.get(snap.interval_key, [])
        if snap.name in recompute_from:
            present = subtract_intervals(present, [(recompute_from[snap.name], ALL_TIME[1])])
        if model.kind.is_timeless:
            if not present:
                backfills[snap.name] = Backfill(snap.name, [ALL_TIME], True)
            continue
        bound = _end_bound(snap, previous.get(snap.name), intervals) if end_bounded else None
        missing = compute_missing(
            cron=model.cron, cron_tz=model.cron_tz, unit=model.declared_unit, allow_partials=model.allow_partials,
            min_intervals=min_intervals, model_start=starts[snap.name], model_end=model.end,
            plan_start=None if snap.depends_on_past else start_of.get(snap.name, start), plan_end=end,
            execution_time=execution_ms, present=present, lookback=model.lookback, end_bounded_by=bound,
            ignore_cron=ignore_cron, merged=True,
        )
        if missing:
            # A node without a table of ours (audits only) runs for its intervals: no refresh of anything.
            refresh = not (model.kind.is_incremental or model.kind.is_symbolic)
            backfills[snap.name] = Backfill(snap.name, missing, refresh)
    return backfills


def owed_upstream(log: IntervalReader, snapshots: dict[str, Snapshot], backfills: Mapping[str, Backfill], *,
                  order: list[str], execution_ms: int) -> dict[str, list[Interval]]:
    """What the models upstream of `backfills` that compute nothing in them still owe: their due
    intervals not recorded yet, from their first recorded one on (a history never started is not
    owed: nothing a plan could wait for). A child never computes over these (execution/intervals/readiness.py).

    A development plan backfills only its changed models; the others are prod's tables, which
    prod's own `mesh run` fills. An interval of a parent due but not recorded yet is one that run
    has not written (or is writing right now): a new child computed over it would be recorded
    complete over a hole. Recorded intervals only grow while a plan runs (a restatement's removal
    is the exception: it clears the children too), so reading them once, before anything is
    written, is as good as reading them under each write's lock: what is recorded then is written.
    """
    scope = _upstream_outside(snapshots, set(backfills))
    if not scope:
        return {}
    due = compute_backfills(log, snapshots, scope, {}, order=order, start=None, end=None,
                            execution_ms=execution_ms, end_bounded=False)
    due = {n: b for n, b in due.items() if not snapshots[n].model.kind.is_timeless}
    present = log.get_intervals([snapshots[n].interval_key for n in due]) if due else {}
    owed: dict[str, list[Interval]] = {}
    for name, backfill in due.items():
        recorded = present.get(snapshots[name].interval_key)
        if recorded:
            tail = subtract_intervals(backfill.intervals, [(ALL_TIME[0], min(s for s, _ in recorded))])
            if tail:
                owed[name] = tail
    return owed


def _upstream_outside(snapshots: Mapping[str, Snapshot], names: set[str]) -> set[str]:
    """The snapshots upstream of `names` (through any chain) that are not among them."""
    found: set[str] = set()
    todo = [p.name for n in names if n in snapshots for p in snapshots[n].parents]
    while todo:
        name = todo.pop()
        if name in found or name not in snapshots:
            continue
        found.add(name)
        todo += [p.name for p in snapshots[name].parents]
    return found - names


def snapshot_starts(snapshots: Mapping[str, Snapshot], execution_ms: int,
                    order: Iterable[str] = ()) -> dict[str, int | None]:
    """Each snapshot's start at `execution_ms` (core/time/starts.py: its own, else inferred from
    its parents'), `order` (parents first) saving recursion."""
    names = [n for n in order if n in snapshots] + [n for n in snapshots if n not in set(order)]
    nodes = {n: snapshots[n].model.start_node(p.name for p in snapshots[n].parents) for n in names}
    return inferred_starts(nodes, execution_ms)


def _end_bound(snap: Snapshot, prev: Snapshot | None,
               intervals: Mapping[tuple[str, str], list[Interval]]) -> int | None:
    """Where the version `snap` replaces in the environment (`prev`) ends: a new version is not
    backfilled past it. None: no other version precedes it, or the one before has no interval."""
    if prev is None or not prev.version or prev.version == snap.version:
        return None
    return max((e for _, e in intervals.get(prev.interval_key, [])), default=None)


def refuse_gaps(
    log: IntervalReader,
    snapshots: dict[str, Snapshot],
    previous: dict[str, Snapshot],
    backfills: dict[str, Backfill],
    *,
    execution_ms: int,
) -> None:
    """`--no-gaps`: refuse a plan after which a new table version would lack intervals the version
    it replaces in the environment has (a plan `--start` later than the data, say), naming each
    model and the missing ranges. Nothing has been written when this runs."""
    pairs = [(snapshots[name], prev) for name, prev in previous.items()
             if name in snapshots and prev.version and prev.version != snapshots[name].version
             and not snapshots[name].model.kind.is_timeless and not snapshots[name].model.kind.is_symbolic]
    if not pairs:
        return
    intervals = log.get_intervals([s.interval_key for pair in pairs for s in pair])
    starts = snapshot_starts(snapshots, execution_ms)
    found = []
    for snap, prev in pairs:
        planned = backfills[snap.name].intervals if snap.name in backfills else []
        after = intervals.get(snap.interval_key, []) + planned
        gaps = subtract_intervals(intervals.get(prev.interval_key, []), after)
        start = starts[snap.name]
        if start is not None:
            gaps = subtract_intervals(gaps, [(ALL_TIME[0], start)])
        if gaps:
            found.append(f"{snap.name}: {format_interval_range(gaps, snap.model.interval_unit)}")
    if found:
        raise PlanError("--no-gaps: after this plan these models would lack intervals their current version has "
                        "(widen --start or drop --no-gaps):\n  " + "\n  ".join(found))
