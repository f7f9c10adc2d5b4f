import time

import pytest

from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import MS_PER_DAY, MS_PER_HOUR, to_ds, to_ms
from mesh_dagster.core.time.intervals import (
    batch,
    compute_missing,
    expand_range,
    format_interval_range,
    intervals_cover,
    merge_contiguous,
    merge_intervals,
    missing_intervals,
    missing_ranges,
    subtract_intervals,
)

DAY = IntervalUnit.DAY


def d(text: str) -> int:
    return to_ms(text)


def days(first: str, last_exclusive: str) -> list[tuple[int, int]]:
    """Daily intervals from `first` up to (not including) `last_exclusive`."""
    return [(s, s + MS_PER_DAY) for s in range(d(first), d(last_exclusive), MS_PER_DAY)]


def ds_list(intervals: list[tuple[int, int]]) -> list[str]:
    return [to_ds(s) for s, _ in intervals]


# merge / subtract / cover -------------------------------------------------------------------


def test_merge_intervals():
    assert merge_intervals([]) == []
    assert merge_intervals([(5, 10), (0, 3), (3, 4), (8, 12), (20, 21), (7, 7)]) == [
        (0, 4), (5, 12), (20, 21),
    ]  # fmt: skip
    assert merge_intervals([(0, 10), (2, 3)]) == [(0, 10)]
    assert merge_intervals([(3, 1)]) == []  # reversed = empty
    assert merge_intervals(iter([(1, 2), (2, 3)])) == [(1, 3)]  # any iterable


def test_merge_contiguous_joins_back_to_back_unit_intervals():
    assert merge_contiguous(days("2020-01-01", "2020-01-04") + days("2020-01-05", "2020-01-06")) == [
        (d("2020-01-01"), d("2020-01-04")),
        (d("2020-01-05"), d("2020-01-06")),
    ]


def test_subtract_intervals():
    assert subtract_intervals([(0, 10)], []) == [(0, 10)]
    assert subtract_intervals([(0, 10)], [(0, 10)]) == []
    assert subtract_intervals([(0, 10)], [(2, 3), (5, 7)]) == [(0, 2), (3, 5), (7, 10)]
    assert subtract_intervals([(0, 10)], [(-5, 2), (8, 20)]) == [(2, 8)]
    assert subtract_intervals([(0, 5), (10, 15)], [(3, 12)]) == [(0, 3), (12, 15)]
    assert subtract_intervals([(0, 5), (5, 10)], [(4, 6)]) == [(0, 4), (6, 10)]
    assert subtract_intervals([], [(0, 1)]) == []
    assert subtract_intervals([(0, 10)], [(20, 30)]) == [(0, 10)]
    assert subtract_intervals([(0, 10), (20, 30)], [(5, 25)]) == [(0, 5), (25, 30)]
    # Unsorted, overlapping inputs.
    assert subtract_intervals([(20, 30), (0, 10), (5, 12)], [(25, 26), (1, 2)]) == [
        (0, 1), (2, 12), (20, 25), (26, 30),
    ]  # fmt: skip


def test_intervals_cover():
    stored = [(0, 5), (5, 10), (20, 30)]
    assert intervals_cover(stored, (0, 10))  # adjacent stored intervals join
    assert intervals_cover(stored, (22, 25))
    assert not intervals_cover(stored, (8, 21))
    assert not intervals_cover(stored, (30, 31))
    assert not intervals_cover([], (0, 1))
    assert intervals_cover([], (4, 4))  # an empty interval is trivially covered


# expand_range -------------------------------------------------------------------------------


def test_expand_range_days_floor_both_ends():
    assert expand_range(DAY, d("2020-01-01"), d("2020-01-04")) == days("2020-01-01", "2020-01-04")
    # A start inside a day means that day; an end inside a day drops the incomplete day.
    assert expand_range("day", d("2020-01-01 12:00"), d("2020-01-04 23:59")) == days(
        "2020-01-01", "2020-01-04"
    )


def test_expand_range_empty():
    assert expand_range(DAY, d("2020-01-01"), d("2020-01-01")) == []
    assert expand_range(DAY, d("2020-01-01 01:00"), d("2020-01-01 23:00")) == []
    assert expand_range(DAY, d("2020-01-05"), d("2020-01-01")) == []  # start after end


def test_expand_range_hours_and_sub_hour():
    hours = expand_range(IntervalUnit.HOUR, d("2020-01-01 22:30"), d("2020-01-02 01:00"))
    assert hours == [
        (d("2020-01-01 22:00"), d("2020-01-01 23:00")),
        (d("2020-01-01 23:00"), d("2020-01-02 00:00")),
        (d("2020-01-02 00:00"), d("2020-01-02 01:00")),
    ]
    assert len(expand_range(IntervalUnit.FIVE_MINUTE, d("2020-01-01"), d("2020-01-02"))) == 288
    assert len(expand_range(IntervalUnit.QUARTER_HOUR, d("2020-01-01"), d("2020-01-02"))) == 96
    assert len(expand_range(IntervalUnit.HALF_HOUR, d("2020-01-01"), d("2020-01-02"))) == 48


def test_expand_range_months_and_years():
    months = expand_range(IntervalUnit.MONTH, d("2019-12-15"), d("2020-03-10"))
    assert months == [
        (d("2019-12-01"), d("2020-01-01")),
        (d("2020-01-01"), d("2020-02-01")),
        (d("2020-02-01"), d("2020-03-01")),
    ]
    years = expand_range(IntervalUnit.YEAR, d("2019-06-01"), d("2022-01-01"))
    assert years == [
        (d("2019-01-01"), d("2020-01-01")),
        (d("2020-01-01"), d("2021-01-01")),
        (d("2021-01-01"), d("2022-01-01")),
    ]


# missing_intervals --------------------------------------------------------------------------


def test_missing_intervals_nothing_present():
    assert missing_intervals(DAY, d("2020-01-01"), d("2020-01-04"), []) == days(
        "2020-01-01", "2020-01-04"
    )


def test_missing_intervals_gaps_and_partial_coverage():
    present = [
        (d("2020-01-01"), d("2020-01-03")),
        (d("2020-01-05 00:00"), d("2020-01-05 12:00")),  # half a day is not the day
        (d("2020-01-06"), d("2020-01-20")),
    ]
    missing = missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), present)
    assert ds_list(missing) == ["2020-01-03", "2020-01-04", "2020-01-05"]


def test_missing_intervals_everything_present_or_empty_range():
    present = [(d("2019-01-01"), d("2021-01-01"))]
    assert missing_intervals(DAY, d("2020-01-01"), d("2020-12-31"), present) == []
    assert missing_intervals(DAY, d("2020-01-05"), d("2020-01-01"), []) == []


def test_missing_intervals_model_end():
    missing = missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), [], model_end_ms=d("2020-01-03"))
    assert ds_list(missing) == ["2020-01-01", "2020-01-02"]


def test_missing_intervals_lookback_at_the_end():
    present = [(d("2020-01-01"), d("2020-01-09"))]
    missing = missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), present, lookback=2)
    assert ds_list(missing) == ["2020-01-07", "2020-01-08", "2020-01-09"]


def test_missing_intervals_lookback_in_the_middle_and_clipped_to_start():
    present = [(d("2020-01-01"), d("2020-01-05")), (d("2020-01-06"), d("2020-01-10"))]
    missing = missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), present, lookback=2)
    # Every interval with a missing one among its next `lookback` is re-processed.
    assert ds_list(missing) == ["2020-01-03", "2020-01-04", "2020-01-05"]
    missing = missing_intervals(DAY, d("2020-01-02"), d("2020-01-10"), [], lookback=5)
    assert ds_list(missing)[0] == "2020-01-02"  # never before the start
    assert len(missing) == 8


def test_missing_intervals_lookback_with_nothing_missing_adds_nothing():
    present = [(d("2020-01-01"), d("2020-01-10"))]
    assert missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), present, lookback=3) == []


def test_missing_intervals_lookback_bounded_by_model_end():
    # The model ended on the 5th: later days are never missing, so no lookback is triggered.
    present = [(d("2020-01-01"), d("2020-01-05"))]
    missing = missing_intervals(
        DAY, d("2020-01-01"), d("2020-01-10"), present, lookback=2, model_end_ms=d("2020-01-05")
    )
    assert missing == []


def test_missing_intervals_negative_lookback():
    with pytest.raises(ValueError, match="Invalid lookback -1: must not be negative"):
        missing_intervals(DAY, d("2020-01-01"), d("2020-01-10"), [], lookback=-1)


def test_missing_intervals_months_with_lookback():
    present = [(d("2020-01-01"), d("2020-05-01"))]
    missing = missing_intervals(IntervalUnit.MONTH, d("2020-01-01"), d("2020-06-15"), present, 1)
    assert missing == [(d("2020-04-01"), d("2020-05-01")), (d("2020-05-01"), d("2020-06-01"))]


def test_missing_intervals_allow_partials_includes_incomplete_tail():
    missing = missing_intervals(
        DAY, d("2020-01-01"), d("2020-01-03 06:00"), [], allow_partials=True
    )
    assert missing == [
        (d("2020-01-01"), d("2020-01-02")),
        (d("2020-01-02"), d("2020-01-03")),
        (d("2020-01-03"), d("2020-01-03 06:00")),
    ]
    present = [(d("2020-01-01"), d("2020-01-03 06:00"))]
    assert missing_intervals(DAY, d("2020-01-01"), d("2020-01-03 06:00"), present, allow_partials=True) == []


def test_missing_ranges_are_merged_without_expanding():
    present = [(d("2020-01-10"), d("2020-01-12"))]
    ranges = missing_ranges(DAY, d("2020-01-01"), d("2020-02-01"), present)
    assert ranges == [(d("2020-01-01"), d("2020-01-10")), (d("2020-01-12"), d("2020-02-01"))]
    assert ranges == merge_contiguous(missing_intervals(DAY, d("2020-01-01"), d("2020-02-01"), present))


# compute_missing ----------------------------------------------------------------------------


def test_compute_missing_daily_up_to_last_complete_day():
    missing = compute_missing(
        cron="@daily", model_start="2020-01-01", execution_time="2020-01-05 10:00"
    )
    assert ds_list(missing) == ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]


def test_compute_missing_waits_for_the_cron():
    # Daily intervals, but the cron only makes yesterday due at 06:00.
    before = compute_missing(cron="0 6 * * *", model_start="2020-01-01", execution_time="2020-01-05 05:59")
    after = compute_missing(cron="0 6 * * *", model_start="2020-01-01", execution_time="2020-01-05 06:00")
    assert ds_list(before) == ["2020-01-01", "2020-01-02", "2020-01-03"]
    assert ds_list(after) == ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]
    ignored = compute_missing(
        cron="0 6 * * *", model_start="2020-01-01", execution_time="2020-01-05 05:59", ignore_cron=True
    )
    assert ds_list(ignored) == ds_list(after)


def test_compute_missing_weekly_cron_processes_daily_intervals_once_a_week():
    # 2020-01-05 is a Sunday (the @weekly fire day).
    missing = compute_missing(cron="@weekly", model_start="2020-01-01", execution_time="2020-01-11")
    assert ds_list(missing) == ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]


def test_compute_missing_plan_range_and_model_range():
    common = dict(cron="@daily", execution_time="2020-02-01")
    # Plan start before the model start is clamped to the model start.
    assert ds_list(compute_missing(model_start="2020-01-10", plan_start="2020-01-01",
                                   plan_end="2020-01-11", **common)) == ["2020-01-10", "2020-01-11"]  # fmt: skip
    # Date-only plan end is inclusive; a timestamp end is exclusive.
    assert ds_list(compute_missing(model_start="2020-01-01", plan_start="2020-01-03",
                                   plan_end="2020-01-04", **common)) == ["2020-01-03", "2020-01-04"]  # fmt: skip
    assert ds_list(compute_missing(model_start="2020-01-01", plan_start="2020-01-03",
                                   plan_end="2020-01-04 00:00:00", **common)) == ["2020-01-03"]  # fmt: skip
    # Model end (date-only, inclusive) bounds the end.
    assert ds_list(compute_missing(model_start="2020-01-01", model_end="2020-01-02",
                                   **common)) == ["2020-01-01", "2020-01-02"]  # fmt: skip
    # Plan end in the future is still bounded by the execution time.
    assert len(compute_missing(model_start="2020-01-01", plan_end="2021-01-01", **common)) == 31
    # Start after end.
    assert compute_missing(model_start="2020-03-01", **common) == []


def test_compute_missing_end_bounded_by_prod():
    missing = compute_missing(
        cron="@daily",
        model_start="2020-01-01",
        execution_time="2020-02-01",
        present=[(d("2020-01-01"), d("2020-01-03"))],
        lookback=1,
        end_bounded_by=d("2020-01-05"),
    )
    assert ds_list(missing) == ["2020-01-02", "2020-01-03", "2020-01-04"]


def test_compute_missing_default_start_is_previous_cron_tick():
    missing = compute_missing(cron="0 6 * * *", model_start=None, execution_time="2020-01-05 10:00")
    assert ds_list(missing) == ["2020-01-04"]
    assert compute_missing(cron="@hourly", model_start=None, execution_time="2020-01-05 10:30") == [
        (d("2020-01-05 09:00"), d("2020-01-05 10:00"))
    ]


def test_compute_missing_relative_values_are_read_at_the_execution_time():
    missing = compute_missing(
        cron="@daily", model_start="3 days ago", plan_end="yesterday", execution_time="2020-01-10 12:00"
    )
    assert ds_list(missing) == ["2020-01-07", "2020-01-08"]


def test_compute_missing_range_shorter_than_a_unit_is_nothing():
    assert compute_missing(cron="@daily", model_start="2020-01-05 01:00", execution_time="2020-01-05 23:00") == []


def test_compute_missing_allow_partials():
    missing = compute_missing(
        cron="@daily",
        model_start="2020-01-01",
        execution_time="2020-01-02 10:30",
        allow_partials=True,
        ignore_cron=True,
    )
    assert missing == [(d("2020-01-01"), d("2020-01-02")), (d("2020-01-02"), d("2020-01-02 10:30"))]
    # Without ignore_cron the cron floor (midnight) is the upper bound: no partial left.
    assert compute_missing(
        cron="@daily", model_start="2020-01-01", execution_time="2020-01-02 10:30", allow_partials=True
    ) == [(d("2020-01-01"), d("2020-01-02"))]


def test_compute_missing_explicit_unit_and_merged():
    hourly = compute_missing(
        cron="@daily", unit="hour", model_start="2020-01-01", execution_time="2020-01-02 10:00"
    )
    assert len(hourly) == 24
    assert hourly[0] == (d("2020-01-01"), d("2020-01-01") + MS_PER_HOUR)
    merged = compute_missing(
        cron="@daily", model_start="2020-01-01", execution_time="2020-01-11", merged=True,
        present=[(d("2020-01-05"), d("2020-01-06"))],
    )  # fmt: skip
    assert merged == [(d("2020-01-01"), d("2020-01-05")), (d("2020-01-06"), d("2020-01-11"))]


def test_compute_missing_monthly():
    missing = compute_missing(cron="@monthly", model_start="2020-01-15", execution_time="2020-04-20")
    assert ds_list(missing) == ["2020-01-01", "2020-02-01", "2020-03-01"]


def test_compute_missing_errors_carry_the_value():
    with pytest.raises(ValueError, match="Invalid cron 'every day'"):
        compute_missing(cron="every day", model_start="2020-01-01")
    with pytest.raises(ValueError, match="Invalid date/time 'last tuesday'"):
        compute_missing(cron="@daily", model_start="last tuesday")
    with pytest.raises(ValueError, match="Invalid interval_unit 'day' for cron '@hourly'"):
        compute_missing(cron="@hourly", unit="day", model_start="2020-01-01")


# batch / format -----------------------------------------------------------------------------


def test_batch():
    intervals = days("2020-01-01", "2020-01-06") + days("2020-01-08", "2020-01-10")
    assert batch(intervals, None) == [
        (d("2020-01-01"), d("2020-01-06")),
        (d("2020-01-08"), d("2020-01-10")),
    ]
    assert batch(intervals, 2) == [
        (d("2020-01-01"), d("2020-01-03")),
        (d("2020-01-03"), d("2020-01-05")),
        (d("2020-01-05"), d("2020-01-06")),
        (d("2020-01-08"), d("2020-01-10")),
    ]
    assert batch(intervals, 1) == intervals
    assert batch(list(reversed(intervals)), 100) == batch(intervals, None)
    assert batch([], 3) == []


@pytest.mark.parametrize("size", [0, -2])
def test_batch_invalid_size(size):
    with pytest.raises(ValueError) as e:
        batch([(0, 1)], size)
    assert str(e.value) == f"Invalid batch_size {size}: must be a positive integer"


def test_format_interval_range():
    assert format_interval_range(days("2020-01-01", "2025-06-23"), DAY) == "2020-01-01 - 2025-06-22"
    assert format_interval_range(days("2020-01-01", "2020-01-02"), "day") == "2020-01-01 - 2020-01-01"
    assert format_interval_range(
        days("2020-01-01", "2020-01-03") + days("2020-01-05", "2020-01-06"), DAY
    ) == "2020-01-01 - 2020-01-02, 2020-01-05 - 2020-01-05"
    assert format_interval_range([(d("2020-01-01"), d("2020-03-01"))], IntervalUnit.MONTH) == (
        "2020-01-01 - 2020-02-29"
    )
    assert format_interval_range([(d("2020-01-01 00:00"), d("2020-01-01 02:00"))], "hour") == (
        "2020-01-01 00:00:00 - 2020-01-01 01:59:59"
    )
    assert format_interval_range([], DAY) == ""


# scale --------------------------------------------------------------------------------------


def test_plan_sized_computation_stays_cheap():
    """1,000 daily models over six years: mostly backfilled, and one fully missing.

    Prints the time instead of asserting it (no timed assertions); the counts are asserted.
    """
    present = [(d("2020-01-01"), d("2025-12-30"))]
    started = time.perf_counter()
    total = 0
    for _ in range(1000):
        total += len(
            compute_missing(
                cron="@daily",
                model_start=d("2020-01-01"),
                execution_time=d("2026-01-01 10:00"),
                present=present,
                lookback=3,
            )
        )
    mostly_done = time.perf_counter() - started
    started = time.perf_counter()
    everything = compute_missing(cron="@daily", model_start="2020-01-01", execution_time="2026-01-01")
    one_full = time.perf_counter() - started
    print(f"1000 up-to-date models: {mostly_done:.3f}s; one 6-year backfill: {one_full:.4f}s")
    assert total == 1000 * 5  # 2 missing days + 3 lookback days
    assert len(everything) == 2192
