from datetime import datetime

import pytest

from mesh_dagster.core.time.cron import (
    IntervalUnit,
    cron_floor,
    cron_floor_ms,
    cron_next,
    cron_next_ms,
    cron_prev,
    cron_prev_ms,
    interval_unit,
    validate_cron,
)
from mesh_dagster.core.time.dates import MS_PER_DAY, UTC, to_ms


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("@daily", "@daily"),
        (" @DAILY ", "@daily"),
        ("@hourly", "@hourly"),
        ("@weekly", "@weekly"),
        ("@monthly", "@monthly"),
        ("@yearly", "@yearly"),
        ("@annually", "@yearly"),
        ("@midnight", "@daily"),
        ("0 6 * * *", "0 6 * * *"),
        ("  0   6 *  * * ", "0 6 * * *"),
        ("*/15 * * * *", "*/15 * * * *"),
        ("0 0 * * mon-fri", "0 0 * * mon-fri"),
    ],
)
def test_validate_cron_normalises(expr, expected):
    assert validate_cron(expr) == expected


def test_validate_cron_unknown_alias():
    with pytest.raises(ValueError) as e:
        validate_cron("@reboot")
    assert str(e.value) == (
        "Invalid cron '@reboot': unknown alias; expected one of "
        "@hourly, @daily, @weekly, @monthly, @yearly"
    )


@pytest.mark.parametrize("expr, count", [("0 0 * *", 4), ("0 0 * * * *", 6), ("daily", 1)])
def test_validate_cron_wrong_field_count(expr, count):
    with pytest.raises(ValueError) as e:
        validate_cron(expr)
    assert str(e.value) == (
        f"Invalid cron '{expr}': expected 5 fields (minute hour day-of-month month day-of-week), "
        f"got {count}"
    )


@pytest.mark.parametrize("expr", ["61 * * * *", "0 25 * * *", "0 0 32 * *", "x y z w v"])
def test_validate_cron_bad_values(expr):
    with pytest.raises(ValueError, match=rf"^Invalid cron '{expr.replace('*', '[*]')}': .+"):
        validate_cron(expr)


@pytest.mark.parametrize("expr", ["", "   ", None])
def test_validate_cron_empty(expr):
    with pytest.raises(ValueError, match=r"Invalid cron '.*': expected @hourly, @daily"):
        validate_cron(expr)


def test_interval_unit_enum_properties():
    assert [u.value for u in IntervalUnit] == [
        "year", "month", "day", "hour", "half_hour", "quarter_hour", "five_minute",
    ]  # fmt: skip
    assert IntervalUnit.DAY.seconds == 86_400
    assert IntervalUnit.MONTH.seconds == 28 * 86_400
    assert IntervalUnit.YEAR.seconds == 365 * 86_400
    assert IntervalUnit.FIVE_MINUTE.milliseconds == 300_000
    assert IntervalUnit.MONTH.milliseconds is None
    assert IntervalUnit.DAY.cron_expression == "0 0 * * *"
    assert IntervalUnit.HALF_HOUR.cron_expression == "*/30 * * * *"
    assert IntervalUnit.DAY.is_date_granularity and not IntervalUnit.HOUR.is_date_granularity
    assert IntervalUnit.YEAR.is_calendar and not IntervalUnit.DAY.is_calendar
    assert IntervalUnit.DAY == "day"  # str enum: compares and serialises as its value
    # Every unit's own cron infers that unit.
    for unit in IntervalUnit:
        assert interval_unit(unit.cron_expression) is unit


def test_interval_unit_parse():
    assert IntervalUnit.parse(" Half_Hour ") is IntervalUnit.HALF_HOUR
    assert IntervalUnit.parse(IntervalUnit.DAY) is IntervalUnit.DAY
    with pytest.raises(ValueError) as e:
        IntervalUnit.parse("weekly")
    assert str(e.value) == (
        "Invalid interval_unit 'weekly': expected one of year, month, day, hour, half_hour, "
        "quarter_hour, five_minute"
    )


@pytest.mark.parametrize(
    "cron, unit",
    [
        ("@yearly", IntervalUnit.YEAR),
        ("@monthly", IntervalUnit.MONTH),
        ("@weekly", IntervalUnit.DAY),  # a week is no unit: daily intervals, processed weekly
        ("@daily", IntervalUnit.DAY),
        ("0 6 * * *", IntervalUnit.DAY),
        ("0 0 * * 1-5", IntervalUnit.DAY),
        ("0 0 1 1,7 *", IntervalUnit.MONTH),
        ("0 0 29 2 *", IntervalUnit.YEAR),
        ("0 */6 * * *", IntervalUnit.HOUR),
        ("@hourly", IntervalUnit.HOUR),
        ("15 * * * *", IntervalUnit.HOUR),
        ("*/30 * * * *", IntervalUnit.HALF_HOUR),
        ("*/20 * * * *", IntervalUnit.QUARTER_HOUR),
        ("*/15 * * * *", IntervalUnit.QUARTER_HOUR),
        ("*/10 * * * *", IntervalUnit.FIVE_MINUTE),
        ("*/5 * * * *", IntervalUnit.FIVE_MINUTE),
        ("*/7 * * * *", IntervalUnit.FIVE_MINUTE),
    ],
)
def test_interval_unit_inference(cron, unit):
    assert interval_unit(cron) is unit


def test_interval_unit_too_frequent():
    with pytest.raises(ValueError) as e:
        interval_unit("* * * * *")
    assert str(e.value) == (
        "Invalid cron '* * * * *': it fires every 1 minute; the shortest supported interval is "
        "5 minutes"
    )
    with pytest.raises(ValueError, match="fires every 2 minutes; the shortest"):
        interval_unit("*/2 * * * *")


def test_interval_unit_explicit():
    assert interval_unit("@daily", "hour") is IntervalUnit.HOUR
    assert interval_unit("@hourly", IntervalUnit.FIVE_MINUTE) is IntervalUnit.FIVE_MINUTE
    assert interval_unit("@daily", "day") is IntervalUnit.DAY
    with pytest.raises(ValueError) as e:
        interval_unit("@hourly", "day")
    assert str(e.value) == (
        "Invalid interval_unit 'day' for cron '@hourly': the cron fires every 1 hour, "
        "more often than one day"
    )
    with pytest.raises(ValueError, match="Invalid interval_unit 'fortnight'"):
        interval_unit("@daily", "fortnight")


def test_interval_unit_invalid_cron():
    with pytest.raises(ValueError, match="Invalid cron 'nope'"):
        interval_unit("nope")


@pytest.mark.parametrize(
    "cron, at, floor, next_, prev",
    [
        ("@daily", utc(2024, 3, 31, 15, 30), utc(2024, 3, 31), utc(2024, 4, 1), utc(2024, 3, 31)),
        ("@daily", utc(2024, 3, 31), utc(2024, 3, 31), utc(2024, 4, 1), utc(2024, 3, 30)),
        ("0 6 * * *", utc(2024, 3, 31, 5), utc(2024, 3, 30, 6), utc(2024, 3, 31, 6), utc(2024, 3, 30, 6)),
        ("0 6 * * *", utc(2024, 3, 31, 6), utc(2024, 3, 31, 6), utc(2024, 4, 1, 6), utc(2024, 3, 30, 6)),
        ("@hourly", utc(2024, 3, 31, 15, 30), utc(2024, 3, 31, 15), utc(2024, 3, 31, 16), utc(2024, 3, 31, 15)),
        ("15 * * * *", utc(2024, 3, 31, 15, 10), utc(2024, 3, 31, 14, 15), utc(2024, 3, 31, 15, 15), utc(2024, 3, 31, 14, 15)),
        ("*/15 * * * *", utc(2024, 3, 31, 15, 44, 59), utc(2024, 3, 31, 15, 30), utc(2024, 3, 31, 15, 45), utc(2024, 3, 31, 15, 30)),
        ("30 */6 * * *", utc(2024, 3, 31, 6, 29), utc(2024, 3, 31, 0, 30), utc(2024, 3, 31, 6, 30), utc(2024, 3, 31, 0, 30)),
        ("@weekly", utc(2024, 3, 27), utc(2024, 3, 24), utc(2024, 3, 31), utc(2024, 3, 24)),
        ("@monthly", utc(2024, 3, 1), utc(2024, 3, 1), utc(2024, 4, 1), utc(2024, 2, 1)),
        ("@monthly", utc(2024, 3, 15), utc(2024, 3, 1), utc(2024, 4, 1), utc(2024, 3, 1)),
        ("@yearly", utc(2024, 3, 15), utc(2024, 1, 1), utc(2025, 1, 1), utc(2024, 1, 1)),
        ("0 0 * * 1-5", utc(2024, 3, 31, 12), utc(2024, 3, 29), utc(2024, 4, 1), utc(2024, 3, 29)),
        ("*/7 * * * *", utc(2024, 3, 31, 1, 2), utc(2024, 3, 31, 1), utc(2024, 3, 31, 1, 7), utc(2024, 3, 31, 1)),
        ("*/7 * * * *", utc(2024, 3, 31, 0, 59), utc(2024, 3, 31, 0, 56), utc(2024, 3, 31, 1), utc(2024, 3, 31, 0, 56)),
    ],
)  # fmt: skip
def test_cron_floor_next_prev(cron, at, floor, next_, prev):
    assert cron_floor(cron, at) == floor
    assert cron_next(cron, at) == next_
    assert cron_prev(cron, at) == prev
    ms = to_ms(at)
    assert cron_floor_ms(cron, ms) == to_ms(floor)
    assert cron_next_ms(cron, ms) == to_ms(next_)
    assert cron_prev_ms(cron, ms) == to_ms(prev)


def test_cron_functions_accept_any_time_like():
    assert cron_floor("@daily", "2024-03-31 10:00:00") == utc(2024, 3, 31)
    assert cron_floor("@daily", to_ms("2024-03-31 10:00:00")) == utc(2024, 3, 31)
    assert cron_next("@daily", "2024-03-31") == utc(2024, 4, 1)


def test_cron_sub_minute_precision():
    # Fire times are whole minutes; a millisecond after a fire time floors back to it.
    at = to_ms("2024-03-31 06:00:00") + 1
    assert cron_floor_ms("0 6 * * *", at) == at - 1
    assert cron_floor_ms("0 6 * * 1-5", to_ms("2024-04-01 06:00:00") + 1) == to_ms("2024-04-01 06:00")
    assert cron_prev_ms("0 6 * * 1-5", to_ms("2024-04-01 06:00:00")) == to_ms("2024-03-29 06:00")


def test_fast_path_agrees_with_croniter_semantics():
    # `0 6 * * *` (fixed-period fast path) and `0 6 * * 0-6` (croniter) fire at the same times.
    for hour in range(0, 48, 5):
        at = to_ms("2024-02-28") + hour * 3_600_000 + 17
        assert cron_floor_ms("0 6 * * *", at) == cron_floor_ms("0 6 * * 0-6", at)
        assert cron_next_ms("0 6 * * *", at) == cron_next_ms("0 6 * * 0-6", at)


def test_unit_index_and_boundaries_fixed():
    day = IntervalUnit.DAY
    jan1 = to_ms("2020-01-01")
    assert day.index_of(jan1) == jan1 // MS_PER_DAY
    assert day.start_of(day.index_of(jan1 + 5)) == jan1
    assert day.floor(jan1 + 5) == jan1
    assert day.ceil(jan1 + 5) == jan1 + MS_PER_DAY
    assert day.ceil(jan1) == jan1
    assert day.ceil_index(jan1) == day.index_of(jan1)
    assert day.ceil_index(jan1 + 1) == day.index_of(jan1) + 1
    assert day.shift(jan1, -2) == to_ms("2019-12-30")
    assert IntervalUnit.FIVE_MINUTE.floor(to_ms("2020-01-01 00:09:59")) == to_ms("2020-01-01 00:05")
    assert IntervalUnit.QUARTER_HOUR.floor(to_ms("2020-01-01 00:44")) == to_ms("2020-01-01 00:30")
    assert IntervalUnit.HALF_HOUR.shift(to_ms("2020-01-01 23:30"), 1) == to_ms("2020-01-02")
    assert day.floor(-1) == -MS_PER_DAY  # before the epoch still floors downwards


def test_unit_boundaries_calendar():
    month, year = IntervalUnit.MONTH, IntervalUnit.YEAR
    assert month.index_of(to_ms("1970-01-31")) == 0
    assert month.index_of(to_ms("2020-02-29 23:59")) == 50 * 12 + 1
    assert month.start_of(50 * 12 + 1) == to_ms("2020-02-01")
    assert month.floor(to_ms("2020-02-29 12:00")) == to_ms("2020-02-01")
    assert month.ceil(to_ms("2020-02-29 12:00")) == to_ms("2020-03-01")
    assert month.ceil(to_ms("2020-12-01")) == to_ms("2020-12-01")
    assert month.shift(to_ms("2020-11-01"), 3) == to_ms("2021-02-01")
    assert month.shift(to_ms("2020-01-01"), -1) == to_ms("2019-12-01")
    assert month.floor(to_ms("1969-12-15")) == to_ms("1969-12-01")
    assert month.floor(to_ms("1900-03-15")) == to_ms("1900-03-01")
    assert year.floor(to_ms("2024-07-04")) == to_ms("2024-01-01")
    assert year.ceil(to_ms("2024-07-04")) == to_ms("2025-01-01")
    assert year.index_of(to_ms("1969-06-01")) == -1
    assert year.start_of(-1) == to_ms("1969-01-01")
    assert year.shift(to_ms("2000-01-01"), 100) == to_ms("2100-01-01")


def test_calendar_boundaries_match_datetime_for_every_month_of_four_centuries():
    month = IntervalUnit.MONTH
    for index in range(-12 * 170, 12 * 230, 7):
        year, month0 = divmod(index, 12)
        assert month.start_of(index) == to_ms(datetime(1970 + year, month0 + 1, 1, tzinfo=UTC))
        assert month.index_of(month.start_of(index)) == index
        assert month.index_of(month.start_of(index) - 1) == index - 1
