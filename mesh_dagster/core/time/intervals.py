"""Intervals: which slices of time a model has computed, and which it still owes.

An interval is a half-open `(start_ms, end_ms)` pair of epoch milliseconds (UTC). The state store
keeps them merged; plans and runs need them as interval-unit steps. To stay cheap for a thousand
models over years of daily history, the missing computation works on *runs* of unit indexes —
integers — and expands to unit-sized tuples only for what is actually missing.
"""

from __future__ import annotations

from collections.abc import Iterable

from mesh_dagster.core.time.cron import IntervalUnit, cron_floor_ms, cron_prev_ms, interval_unit
from mesh_dagster.core.time.dates import TimeLike, ms_to_datetime, now_ms, to_ds, to_end_ms, to_ms, to_ts_str

Interval = tuple[int, int]


def merge_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, with overlapping or touching intervals joined and empty ones dropped."""
    merged: list[Interval] = []
    for start, end in sorted(interval for interval in intervals if interval[0] < interval[1]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def merge_contiguous(intervals: Iterable[Interval]) -> list[Interval]:
    """Runs of back-to-back intervals as single ranges (what a batch or a printout covers)."""
    return merge_intervals(intervals)


def subtract_intervals(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """The parts of `a` not covered by `b`, merged."""
    removed = merge_intervals(b)
    result: list[Interval] = []
    j = 0
    for start, end in merge_intervals(a):
        while j < len(removed) and removed[j][1] <= start:
            j += 1
        cursor = start
        k = j
        while k < len(removed) and removed[k][0] < end:
            if removed[k][0] > cursor:
                result.append((cursor, removed[k][0]))
            cursor = max(cursor, removed[k][1])
            k += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def intersect_intervals(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """The parts of `a` that `b` covers too, merged."""
    a = merge_intervals(a)
    return subtract_intervals(a, subtract_intervals(a, b))


def intervals_cover(intervals: Iterable[Interval], interval: Interval) -> bool:
    """Whether `interval` lies entirely inside the union of `intervals` (empty ones always do)."""
    return not subtract_intervals([interval], intervals)


def expand_range(unit: IntervalUnit | str, start_ms: int, end_ms: int) -> list[Interval]:
    """The unit intervals from `floor(start)` up to `floor(end)`.

    The start is floored (a start in the middle of a day means that whole day), the end is
    floored too (an incomplete last interval is not an interval yet).
    """
    unit = IntervalUnit.parse(unit)
    return _expand_runs(unit, [(unit.index_of(start_ms), unit.index_of(end_ms))])


def missing_intervals(
    unit: IntervalUnit | str,
    start_ms: int,
    end_ms: int,
    present: Iterable[Interval],
    lookback: int = 0,
    model_end_ms: int | None = None,
    allow_partials: bool = False,
) -> list[Interval]:
    """Unit intervals of `expand_range(start, end)` not fully covered by `present`.

    Lookback: when interval i+k (1 <= k <= lookback) is missing, interval i is returned too, so
    late-arriving data for the preceding intervals is picked up. Lookback only ever reaches
    backwards, so it cannot go past `end` or the model's end. With `allow_partials` the end is not
    floored: a last, incomplete interval `[floor(end), end)` is included.
    """
    unit = IntervalUnit.parse(unit)
    return _expand_runs(
        unit,
        _missing_runs(unit, start_ms, end_ms, present, lookback, model_end_ms, allow_partials),
        end_cap=_end_cap(end_ms, model_end_ms) if allow_partials else None,
    )


def missing_ranges(
    unit: IntervalUnit | str,
    start_ms: int,
    end_ms: int,
    present: Iterable[Interval],
    lookback: int = 0,
    model_end_ms: int | None = None,
    allow_partials: bool = False,
) -> list[Interval]:
    """`missing_intervals` already merged into contiguous ranges, without expanding them.

    Costs O(stored ranges) whatever the length of history: use it for plan summaries.
    """
    unit = IntervalUnit.parse(unit)
    runs = _missing_runs(unit, start_ms, end_ms, present, lookback, model_end_ms, allow_partials)
    cap = _end_cap(end_ms, model_end_ms)
    return [(unit.start_of(a), min(unit.start_of(b), cap)) for a, b in runs]


def compute_missing(
    *,
    cron: str,
    cron_tz: str | None = None,
    model_start: TimeLike | None,
    model_end: TimeLike | None = None,
    plan_start: TimeLike | None = None,
    plan_end: TimeLike | None = None,
    execution_time: TimeLike | None = None,
    present: Iterable[Interval] = (),
    lookback: int = 0,
    end_bounded_by: int | None = None,
    allow_partials: bool = False,
    unit: IntervalUnit | str | None = None,
    ignore_cron: bool = False,
    min_intervals: int = 0,
    merged: bool = False,
) -> list[Interval]:
    """The intervals an incremental model must (re)compute, following SQLMesh's run rules.

    1. start = max(plan start or model start, model start); no model start → the previous cron
       tick before the latest one. Relative values (`1 week ago`) are read at the execution
       time. end = min(plan end or execution time, model end); date-only
       ends are inclusive of their day.
    2. The cron must have fired for an interval to be due: the end is capped at
       `cron_floor(execution_time)` in `cron_tz` (execution time itself with `ignore_cron`),
       floored to the interval unit unless `allow_partials`.
    3. `end_bounded_by` caps the end (dev plans: never beyond what prod already has).
    4. `min_intervals` moves the start back (never before the model's start) so that at least
       that many intervals before the end are checked, however late the plan start is.
    5. Unit intervals in [start, end) not covered by `present`, plus lookback re-inclusion.

    Returns unit-sized intervals, or contiguous ranges with `merged=True`.
    """
    unit = interval_unit(cron, unit)
    execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
    base = ms_to_datetime(execution_ms)  # relative expressions are read at the execution time
    model_start_ms = (
        to_ms(model_start, base)
        if model_start is not None
        else cron_prev_ms(cron, cron_floor_ms(cron, execution_ms, cron_tz), cron_tz)
    )
    start = model_start_ms if plan_start is None else max(to_ms(plan_start, base), model_start_ms)
    end = execution_ms if plan_end is None else to_end_ms(plan_end, base)
    model_end_ms = None if model_end is None else to_end_ms(model_end, base)

    upper = execution_ms if ignore_cron else cron_floor_ms(cron, execution_ms, cron_tz)
    if not allow_partials:
        upper = unit.floor(upper)
    end = min(value for value in (end, upper, end_bounded_by) if value is not None)
    if min_intervals > 0:
        start = max(model_start_ms, min(start, unit.shift(unit.floor(end), -min_intervals)))

    find = missing_ranges if merged else missing_intervals
    return find(unit, start, end, present, lookback, model_end_ms, allow_partials)


def batch(intervals: Iterable[Interval], batch_size: int | None) -> list[Interval]:
    """Contiguous unit intervals grouped into ranges of at most `batch_size` intervals each.

    `None` means no limit: one range per contiguous run (a gap always starts a new batch,
    since a batch is processed as one `[start, end)` query).
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"Invalid batch_size {batch_size}: must be a positive integer")
    batches: list[Interval] = []
    count = 0
    for start, end in sorted(intervals):
        if batches and batches[-1][1] == start and (batch_size is None or count < batch_size):
            batches[-1] = (batches[-1][0], end)
            count += 1
        else:
            batches.append((start, end))
            count = 1
    return batches


def format_interval_range(intervals: Iterable[Interval], unit: IntervalUnit | str) -> str:
    """How plans print missing intervals: `2020-01-01 - 2025-06-22`, ends inclusive.

    Date-granularity units print days (the last day is the one before the exclusive end);
    finer units print timestamps ending one second before the next interval.
    """
    unit = IntervalUnit.parse(unit)
    fmt = to_ds if unit.is_date_granularity else _to_second
    return ", ".join(f"{fmt(start)} - {fmt(end - 1)}" for start, end in merge_intervals(intervals))


def _to_second(ms: int) -> str:
    return to_ts_str(ms - ms % 1000)


def _end_cap(end_ms: int, model_end_ms: int | None) -> int:
    return end_ms if model_end_ms is None else min(end_ms, model_end_ms)


def _missing_runs(
    unit: IntervalUnit,
    start_ms: int,
    end_ms: int,
    present: Iterable[Interval],
    lookback: int,
    model_end_ms: int | None,
    allow_partials: bool,
) -> list[tuple[int, int]]:
    """Half-open runs `[first, last)` of unit indexes that are missing (with lookback)."""
    if lookback < 0:
        raise ValueError(f"Invalid lookback {lookback}: must not be negative")
    cap = _end_cap(end_ms, model_end_ms)
    first = unit.index_of(start_ms)
    stop = unit.ceil_index(cap) if allow_partials else unit.index_of(cap)
    if first >= stop:
        return []
    window = (unit.start_of(first), min(unit.start_of(stop), cap))
    runs = [
        (max(unit.index_of(gap_start) - lookback, first), min(unit.ceil_index(gap_end), stop))
        for gap_start, gap_end in subtract_intervals([window], present)
    ]
    return merge_intervals(runs)


def _expand_runs(
    unit: IntervalUnit, runs: Iterable[tuple[int, int]], end_cap: int | None = None
) -> list[Interval]:
    step = unit.milliseconds
    out: list[Interval] = []
    for first, stop in runs:
        if step:
            bounds = list(range(first * step, stop * step + 1, step))
        else:
            bounds = [unit.start_of(index) for index in range(first, stop + 1)]
        if end_cap is not None and bounds and bounds[-1] > end_cap:
            bounds[-1] = end_cap
        out.extend(zip(bounds, bounds[1:]))
    return out
