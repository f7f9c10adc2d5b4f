"""Readiness: which missing intervals the models' signals let a backfill compute now.

Given the backfills of a plan, a `mesh run` or a Dagster tick (name → missing intervals), each
model's signals (core/project/signals.py) are called batch by batch — the batches the scheduler would run:
`batch_size` unit intervals, or one per contiguous range — and answer which unit intervals are
ready. What is not ready is dropped from the backfill, and so is, in every model downstream, each
interval overlapping one its parents do not compute now: a child never computes over data its
parent still owes — also a parent outside the backfill (a development plan's unchanged model,
which prod's run fills): its due intervals not recorded yet are owed (`owed`). Models that cannot
compute an interval without the ones before it (they depend on their past, or are rebuilt whole:
FULL) also drop everything after their first waiting interval; a history rebuilt from scratch (a
restatement's `clear`) waits whole. Timeless models (a view, a seed) are checked once, for the last
complete interval of their cron before the execution time; if they wait, everything downstream
waits with them.

Signals are called before anything is written, so a signal that raises (or answers nonsense)
stops the apply or the run with nothing of it done. Each waiting model is reported to the listener
with its intervals and the reason, so the CLI and Dagster's logs say what waits and why.
"""

from __future__ import annotations

import bisect
import copy
import numbers
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from mesh_dagster.core.errors import MeshError, PlanError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill
from mesh_dagster.core.project.signals import BoundSignal, SignalError, SignalRegistry
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import ms_to_datetime, to_ms
from mesh_dagster.core.time.intervals import (
    Interval,
    expand_range,
    format_interval_range,
    merge_intervals,
    subtract_intervals,
)
from mesh_dagster.execution.events import ApplyListener

SparkProvider = Callable[[], Any]


@dataclass(frozen=True)
class Wait:
    """Intervals of one model that are not computed now, and why."""

    name: str
    intervals: list[Interval]  # merged; for a timeless model, the interval its signals were asked about
    reason: str  # "signal files_landed(folder := 'raw')", "upstream s.parent", "its earlier intervals", ...
    unit: IntervalUnit

    def describe(self, view_of: Callable[[str], str]) -> str:
        ranges = format_interval_range(self.intervals, self.unit)
        return f"{view_of(self.name)}: waiting for {self.reason} ({ranges})"


@dataclass
class Readiness:
    """The backfills cut down to what is ready, and what waits (model by model, parents first)."""

    backfills: dict[str, Backfill]
    waits: list[Wait] = field(default_factory=list)

    @property
    def waiting(self) -> list[str]:
        return list(dict.fromkeys(w.name for w in self.waits))

    def report(self, listener: ApplyListener, view_of: Callable[[str], str]) -> None:
        for wait in self.waits:
            listener.log(wait.describe(view_of))


class SignalsPendingError(PlanError):
    """A plan's backfill left intervals waiting (for signals, or for a parent's data) that the
    environment shows today (or a model with no data at all), so the environment was not changed:
    moving it would hide data."""

    def __init__(self, environment: str, waits: list[Wait], view_of: Callable[[str], str]):
        self.environment = environment
        self.waits = waits
        lines = "\n".join(f"  {w.describe(view_of)}" for w in waits)
        count = len(dict.fromkeys(w.name for w in waits))
        super().__init__(
            f"Plan not applied: {count} model(s) wait (for signals, or for upstream data) on intervals '{environment}' "
            f"shows today (or have no data yet), so '{environment}' was not changed (its views and record are as "
            f"before).\n{lines}\nThe intervals that were ready are computed and recorded. Run `mesh plan "
            f"{environment}` again once the signals pass and the upstream intervals are recorded (it computes only "
            f"what is still missing), or plan with an --end before the waiting intervals.")


class NotReadyError(MeshError):
    """An explicit materialization asked for intervals a signal says are not ready."""


def check_readiness(registry: SignalRegistry, snapshots: Mapping[str, Snapshot], backfills: Mapping[str, Backfill],
                    order: Iterable[str], execution_ms: int, *, spark: SparkProvider | None = None,
                    owed: Mapping[str, list[Interval]] | None = None, after_parents: bool = False) -> Readiness:
    """`backfills` without the intervals that wait (see the module docstring).

    `owed`: what models outside `backfills` still owe (core/plan/backfills.py `owed_upstream`):
    their children wait for those intervals as for a parent's that waits.

    `after_parents`: a child also waits for the intervals its parents compute now, not only for
    those they leave waiting: a caller that requests each model on its own (Dagster's automation
    conditions) computes a model's interval only once its parents have recorded it, where a run
    computes parents first in the same run.

    `spark` gives the SparkSession to signals that take a `spark` parameter (called only then);
    None where no engine is at hand. A snapshot is checked with the signal functions it captured
    when planned (`signals_of`); `registry` (the project's) serves snapshots stored before captures
    existed, so for those a signal the project no longer defines is a `ModelError`.
    """
    check = _Check(registry, ms_to_datetime(execution_ms), execution_ms, spark)
    # what each model does not compute now, for its children
    unready: dict[str, list[Interval]] = {n: merge_intervals(i) for n, i in (owed or {}).items() if i}
    result = Readiness({})
    for name in order:
        snap = snapshots.get(name)
        if snap is None:
            continue
        upstream = {p.name: unready[p.name] for p in snap.parents if unready.get(p.name)}
        backfill = backfills.get(name)
        if backfill is None:
            if snap.model.kind.is_symbolic and upstream:  # an EMBEDDED model passes its parents' state on
                unready[name] = merge_intervals(i for intervals in upstream.values() for i in intervals)
            continue
        kept, waits = check.model(snap, backfill, upstream)
        if waits:
            result.waits += waits
            unready[name] = _dropped(snap, backfill, kept)
        if after_parents:  # everything it owes, computed now or not
            unready[name] = [ALL_TIME] if snap.model.kind.is_timeless else merge_intervals(backfill.intervals)
        if kept is not None:
            result.backfills[name] = kept
    return result


def require_ready(registry: SignalRegistry, snapshot: Snapshot, window: Interval, execution_ms: int, *,
                  spark: SparkProvider | None, view: str) -> None:
    """Refuse (before anything is written) to compute `window` of a model while a signal says part
    of it is not ready: an explicit materialization asks for exactly that range."""
    backfill = Backfill(snapshot.name, [window], not snapshot.model.kind.is_incremental)
    readiness = check_readiness(registry, {snapshot.name: snapshot}, {snapshot.name: backfill}, [snapshot.name],
                                execution_ms, spark=spark)
    by_signal = [w for w in readiness.waits if w.reason.startswith("signal ")]
    if by_signal:
        unit = snapshot.model.interval_unit
        asked = "its current build" if window == ALL_TIME else format_interval_range([window], unit)
        reasons = "; ".join(f"{w.reason} says {format_interval_range(w.intervals, unit)} is not ready"
                            for w in by_signal)
        raise NotReadyError(f"Cannot materialize {view} for {asked}: {reasons}. Nothing was written; "
                            "materialize it once the signal passes.")


def _dropped(snap: Snapshot, backfill: Backfill, kept: Backfill | None) -> list[Interval]:
    """What a model does not compute now, as its children see it: a timeless model that waits is
    not built at all."""
    if snap.model.kind.is_timeless:
        return [ALL_TIME]
    return subtract_intervals(backfill.intervals, kept.intervals if kept is not None else [])


@dataclass
class _Check:
    registry: SignalRegistry
    execution_time: datetime
    execution_ms: int
    spark: SparkProvider | None

    def model(self, snap: Snapshot, backfill: Backfill,
              upstream: dict[str, list[Interval]]) -> tuple[Backfill | None, list[Wait]]:
        """The part of `backfill` that is ready (None: nothing), and the waits."""
        model = snap.model
        if not model.signals and not upstream:
            return backfill, []
        bound = signals_of(snap, self.registry).bind(model)
        unit = model.interval_unit
        if model.kind.is_timeless:
            return self._timeless(snap, backfill, bound, upstream)
        units = _units(unit, backfill.intervals)
        waits: list[Wait] = []
        blocked: set[Interval] = set()
        for parent, intervals in upstream.items():
            by_parent = [u for u in units if _overlaps(u, intervals)]
            if by_parent:
                waits.append(Wait(snap.name, merge_intervals(by_parent), f"upstream {parent}", unit))
                blocked.update(by_parent)
        pending = [u for u in units if u not in blocked]
        for sig in bound:
            if not pending:
                break
            ready: list[Interval] = []
            for group in _groups(pending, model.batch_size):
                ready += self.call(sig, group)
            not_ready = sorted(set(pending) - set(ready))
            if not_ready:
                waits.append(Wait(snap.name, merge_intervals(not_ready), f"signal {sig.describe()}", unit))
            pending = sorted(set(ready))
        if not waits:
            return backfill, []
        first_gap = min(s for w in waits for s, _ in w.intervals)
        if backfill.clear:  # a history rebuilt from scratch must be rebuilt whole
            if pending:
                waits.append(Wait(snap.name, merge_intervals(pending), "the rest of its rebuild", unit))
            pending = []
        elif model.depends_on_past or backfill.full_refresh:
            later = [u for u in pending if u[0] >= first_gap]
            if later:
                waits.append(Wait(snap.name, merge_intervals(later), "its earlier intervals", unit))
                pending = [u for u in pending if u[0] < first_gap]
        if not pending:
            return None, waits
        return Backfill(snap.name, merge_intervals(pending), backfill.full_refresh, backfill.clear), waits

    def _timeless(self, snap: Snapshot, backfill: Backfill, bound: list[BoundSignal],
                  upstream: dict[str, list[Interval]]) -> tuple[Backfill | None, list[Wait]]:
        """A view or seed: asked about the last complete interval of its cron; all or nothing."""
        unit = snap.model.interval_unit
        end = unit.floor(self.execution_ms)
        checked = (unit.shift(end, -1), end)
        if upstream:
            return None, [Wait(snap.name, [checked], f"upstream {parent}", unit) for parent in upstream]
        for sig in bound:
            if not self.call(sig, [checked]):
                return None, [Wait(snap.name, [checked], f"signal {sig.describe()}", unit)]
        return backfill, []

    def call(self, sig: BoundSignal, units: list[Interval]) -> list[Interval]:
        """The unit intervals of `units` (one batch) the signal says are ready."""
        function = sig.function
        label = f"Signal {sig.describe()} of model {sig.model}"
        kwargs = copy.deepcopy(sig.kwargs)  # the user's function may change what it gets
        if function.takes_execution_time:
            kwargs["execution_time"] = self.execution_time
        if function.takes_spark:
            kwargs["spark"] = self._spark(label)
        batch = [(ms_to_datetime(s), ms_to_datetime(e)) for s, e in units]
        try:
            answer = function.fn(batch, **kwargs)
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything
            package = self.registry.package if self.registry.get(function.name) is function else None
            where, line = (package.failure_location(e, function.path) if package is not None
                           else stored_code_location(e, function.path, function.line))
            text = (str(e).strip().splitlines() or [""])[0]
            raise SignalError(f"{label} failed: {type(e).__name__}{': ' + text if text else ''}", where,
                              line) from e
        return _ready_units(answer, units, label, function.path, function.line)

    def _spark(self, label: str) -> Any:
        session = self.spark() if self.spark is not None else None
        if session is None:
            raise SignalError(f"{label} takes `spark`, but no SparkSession is available here (the engine gives "
                              "none); drop the `spark` parameter or run it where Spark is configured")
        return session


def signals_of(snapshot: Snapshot, project_signals: SignalRegistry) -> SignalRegistry:
    """The signal functions a snapshot is checked with: those captured when it was planned (what
    was reviewed), or for a snapshot stored before captures existed, the project's."""
    if snapshot.capture is None:
        return project_signals
    package = project_signals.package
    return snapshot.capture.signal_registry(package.folder.parent if package is not None else None)


def stored_code_location(error: BaseException, path: str, line: int | None) -> tuple[str, int | None]:
    """Where captured code raised: it is compiled at its original file and lines (core/models/python_env.py),
    so the innermost frame in a file of its folder (`signals/...`) names the file and line."""
    folder = path.split("/")[0] + "/"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(folder)]
    return (frames[-1].filename, frames[-1].lineno) if frames else (path, line)


def _units(unit: IntervalUnit, ranges: Iterable[Interval]) -> list[Interval]:
    """Unit intervals of `ranges`, an incomplete last one (allow_partials) included."""
    out: list[Interval] = []
    for start, end in merge_intervals(ranges):
        pieces = expand_range(unit, start, end)
        tail = pieces[-1][1] if pieces else unit.floor(start)
        if tail < end:
            pieces.append((max(tail, start), end))
        out += pieces
    return out


def _groups(units: list[Interval], size: int | None) -> list[list[Interval]]:
    """The batches the scheduler would run: contiguous unit intervals, at most `size` each."""
    groups: list[list[Interval]] = []
    for unit in units:
        if groups and groups[-1][-1][1] == unit[0] and (size is None or len(groups[-1]) < size):
            groups[-1].append(unit)
        else:
            groups.append([unit])
    return groups


def _overlaps(interval: Interval, merged: list[Interval]) -> bool:
    """Whether `interval` shares any time with the (merged, sorted) intervals."""
    index = bisect.bisect_right(merged, (interval[1], interval[1])) - 1
    while index >= 0 and merged[index][1] > interval[0]:
        if merged[index][0] < interval[1]:
            return True
        index -= 1
    return False


def _ready_units(answer: Any, units: list[Interval], label: str, path: str, line: int | None) -> list[Interval]:
    """Read a signal's answer: True/False for the whole batch, or the ready (start, end) ranges,
    each unit interval being ready when a returned range covers it."""
    if isinstance(answer, bool) or type(answer).__name__ == "bool_":  # numpy's bool too
        return list(units) if bool(answer) else []
    ranges = _ranges(answer)
    if ranges is None:
        shown = repr(answer)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise SignalError(f"{label} returned {shown}: a signal returns True, False, or the ready (start, end) ranges "
                          "of its batch (datetimes or epoch milliseconds)", path, line)
    merged = merge_intervals(ranges)
    starts = [s for s, _ in merged]
    ready = []
    for unit in units:
        index = bisect.bisect_right(starts, unit[0]) - 1
        if index >= 0 and merged[index][1] >= unit[1]:
            ready.append(unit)
    return ready


def _ranges(answer: Any) -> list[Interval] | None:
    if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
        return None
    ranges = []
    for item in answer:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            return None
        start, end = (_ms(v) for v in item)
        if start is None or end is None:
            return None
        ranges.append((start, end))
    return ranges


def _ms(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, datetime):
        return to_ms(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    if isinstance(value, date):
        return to_ms(value)
    return None
