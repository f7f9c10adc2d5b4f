from datetime import date, datetime, timedelta, timezone

import pytest

from mesh_dagster.core.time.dates import (
    MS_PER_DAY,
    UTC,
    add_months,
    is_date_only,
    is_relative,
    ms_to_datetime,
    now_ms,
    parse_ttl,
    to_datetime,
    to_ds,
    to_end_ms,
    to_ms,
    to_ts_str,
)

BASE = datetime(2024, 3, 31, 15, 30, 45, tzinfo=UTC)
JAN1_MS = 1_577_836_800_000  # 2020-01-01 00:00:00 UTC


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2020-01-01", utc(2020, 1, 1)),
        ("  2020-01-01  ", utc(2020, 1, 1)),
        ("2020-01-01 12:00:00", utc(2020, 1, 1, 12)),
        ("2020-01-01 12:34", utc(2020, 1, 1, 12, 34)),
        ("2020-01-01T12:00:00", utc(2020, 1, 1, 12)),
        ("2020-01-01T12:00:00Z", utc(2020, 1, 1, 12)),
        ("2020-01-01T12:00:00+02:00", utc(2020, 1, 1, 10)),
        ("2020-01-01T00:30:00-01:00", utc(2020, 1, 1, 1, 30)),
        ("2020-01-01 12:00:00.250", utc(2020, 1, 1, 12, 0, 0, 250_000)),
        ("2020-01-01 00:00:00 UTC", utc(2020, 1, 1)),
        ("20200101", utc(2020, 1, 1)),
        (str(JAN1_MS), utc(2020, 1, 1)),
        (JAN1_MS, utc(2020, 1, 1)),
        (float(JAN1_MS), utc(2020, 1, 1)),
        (0, utc(1970, 1, 1)),
        (-MS_PER_DAY, utc(1969, 12, 31)),
        (date(2020, 2, 29), utc(2020, 2, 29)),
        (datetime(2020, 1, 1, 5), utc(2020, 1, 1, 5)),  # naive is UTC, never local time
        (datetime(2020, 1, 1, 5, tzinfo=timezone(timedelta(hours=5))), utc(2020, 1, 1)),
    ],
)
def test_to_datetime_absolute(value, expected):
    result = to_datetime(value)
    assert result == expected
    assert result.tzinfo == UTC


@pytest.mark.parametrize(
    "text, expected",
    [
        ("now", BASE),
        ("NOW", BASE),
        ("today", utc(2024, 3, 31)),
        ("yesterday", utc(2024, 3, 30)),
        ("tomorrow", utc(2024, 4, 1)),
        ("1 week ago", utc(2024, 3, 24)),
        ("3 days ago", utc(2024, 3, 28)),
        ("a day ago", utc(2024, 3, 30)),
        ("2 hours ago", utc(2024, 3, 31, 13, 30, 45)),
        ("30 minutes ago", utc(2024, 3, 31, 15, 0, 45)),
        ("in 1 week", utc(2024, 4, 7)),
        ("in 2 days", utc(2024, 4, 2)),
        ("in 3 hours", utc(2024, 3, 31, 18, 30, 45)),
        ("1 year ago", utc(2023, 3, 31)),
        ("1 month ago", utc(2024, 2, 29)),  # day clamped to the shorter month
        ("13 months ago", utc(2023, 2, 28)),
        ("2 weeks ago", utc(2024, 3, 17)),
    ],
)
def test_to_datetime_relative(text, expected):
    assert to_datetime(text, relative_base=BASE) == expected


def test_relative_day_expressions_are_midnight_whatever_the_hour():
    early = datetime(2024, 3, 31, 0, 0, 1, tzinfo=UTC)
    late = datetime(2024, 3, 31, 23, 59, 59, tzinfo=UTC)
    assert to_datetime("1 year ago", early) == to_datetime("1 year ago", late)


def test_relative_without_base_uses_now():
    before = now_ms()
    value = to_ms("now")
    assert before <= value <= now_ms()
    assert to_datetime("today").hour == 0


def test_naive_relative_base_is_utc():
    assert to_datetime("2 hours ago", datetime(2024, 1, 1, 12)) == utc(2024, 1, 1, 10)


@pytest.mark.parametrize(
    "value",
    ["", "   ", "not a date", "1 fortnight ago", "in 2 blorps", "ago", "yesterday-ish", "aday ago"],
)  # fmt: skip
def test_to_datetime_invalid_strings(value):
    with pytest.raises(ValueError) as e:
        to_datetime(value)
    assert f"Invalid date/time '{value}'" in str(e.value)
    assert "expected a date like '2020-01-01'" in str(e.value)


@pytest.mark.parametrize("value", [True, None, [2020], float("nan"), float("inf")])
def test_to_datetime_invalid_types(value):
    with pytest.raises(ValueError, match=r"Invalid date/time .*expected a date like"):
        to_datetime(value)


def test_to_datetime_out_of_range():
    with pytest.raises(ValueError, match=r"Invalid date/time .*out of the supported range"):
        to_datetime(10**20)
    with pytest.raises(ValueError, match=r"Invalid date/time '5000 years ago': out of the supported"):
        to_datetime("5000 years ago", BASE)


def test_to_ms_and_back():
    assert to_ms("2020-01-01") == JAN1_MS
    assert to_ms(JAN1_MS) == JAN1_MS
    assert to_ms(utc(2020, 1, 1, 0, 0, 0, 1999)) == JAN1_MS + 1  # floors to the millisecond
    assert to_ms(utc(1969, 12, 31, 23, 59, 59, 999_000)) == -1
    assert ms_to_datetime(JAN1_MS) == utc(2020, 1, 1)
    assert ms_to_datetime(JAN1_MS + 1).microsecond == 1000
    assert to_ms("1 week ago", BASE) == to_ms(utc(2024, 3, 24))


def test_to_end_ms_date_only_is_inclusive():
    assert to_end_ms("2020-01-05") == to_ms("2020-01-06")
    assert to_end_ms(date(2020, 1, 5)) == to_ms("2020-01-06")
    assert to_end_ms("2020-01-05 00:00:00") == to_ms("2020-01-05")
    assert to_end_ms(to_ms("2020-01-05")) == to_ms("2020-01-05")
    assert to_end_ms("yesterday", BASE) == to_ms(utc(2024, 3, 30))


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2020-01-05", True),
        (" 2020-01-05 ", True),
        (date(2020, 1, 5), True),
        ("2020-01-05 00:00:00", False),
        ("2020-01-05T00:00", False),
        (datetime(2020, 1, 5), False),
        ("2020-02-30", False),
        ("yesterday", False),
        ("20200105", False),
        (JAN1_MS, False),
        (None, False),
    ],
)
def test_is_date_only(value, expected):
    assert is_date_only(value) is expected


def test_is_relative():
    assert is_relative("1 week ago")
    assert is_relative(" Yesterday ")
    assert is_relative("in 2 days")
    assert not is_relative("2020-01-01")
    assert not is_relative("1 week")


def test_to_ds_and_ts_str():
    assert to_ds("2020-01-05 23:59:59") == "2020-01-05"
    assert to_ds(JAN1_MS) == "2020-01-01"
    assert to_ds(date(5, 1, 2)) == "0005-01-02"
    assert to_ts_str("2020-01-05") == "2020-01-05 00:00:00"
    assert to_ts_str(JAN1_MS + 1) == "2020-01-01 00:00:00.001000"
    assert to_ts_str("2020-01-05T10:11:12+01:00") == "2020-01-05 09:11:12"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("in 1 week", 7 * MS_PER_DAY),
        ("1 week", 7 * MS_PER_DAY),
        ("IN 2 DAYS", 2 * MS_PER_DAY),
        ("12 hours", 12 * 3_600_000),
        ("in 30 minutes", 30 * 60_000),
        ("in a day", MS_PER_DAY),
        ("1 month", 30 * MS_PER_DAY),
        ("in 2 years", 730 * MS_PER_DAY),
        ("0 days", 0),
        (5000, 5000),
    ],
)
def test_parse_ttl(text, expected):
    assert parse_ttl(text) == expected


@pytest.mark.parametrize("text", ["", "forever", "1 week ago", "in a while", "-1 day", "week"])
def test_parse_ttl_invalid(text):
    with pytest.raises(ValueError) as e:
        parse_ttl(text)
    assert str(e.value) == (
        f"Invalid TTL '{text}': expected a duration like 'in 1 week' or '2 days'"
    )


def test_parse_ttl_invalid_types():
    with pytest.raises(ValueError, match="Invalid TTL -1: must not be negative"):
        parse_ttl(-1)
    with pytest.raises(ValueError, match="Invalid TTL None: expected a duration"):
        parse_ttl(None)


def test_add_months_clamps_and_crosses_years():
    assert add_months(utc(2024, 1, 31), 1) == utc(2024, 2, 29)
    assert add_months(utc(2023, 1, 31), 1) == utc(2023, 2, 28)
    assert add_months(utc(2024, 3, 31), -13) == utc(2023, 2, 28)
    assert add_months(utc(2024, 12, 15, 7), 1) == utc(2025, 1, 15, 7)
    assert add_months(utc(2100, 3, 29), -1) == utc(2100, 2, 28)  # 2100 is not a leap year
    assert add_months(utc(2000, 3, 29), -1) == utc(2000, 2, 29)  # 2000 is


# -- errors users see, and ranges ------------------------------------------------------------


def test_date_errors_are_mesh_errors_and_value_errors():
    # A MeshError so the CLI shows one line (a bad --start was a traceback); a ValueError so the
    # loaders that add the file and line of a bad `start:` keep catching it.
    from mesh_dagster.core.errors import MeshError
    from mesh_dagster.core.time.dates import DateError

    with pytest.raises(DateError) as e:
        to_ms("yesterdayish")
    assert isinstance(e.value, MeshError) and isinstance(e.value, ValueError)
    assert e.value.value == "yesterdayish" and e.value.reason.startswith("expected a date like")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("2020-99-99", "month must be in 1..12"),
        ("2020-13-01", "month must be in 1..12"),
        ("2020-02-30", "day is out of range for month"),
        ("2020-01-01 25:00", "hour must be in 0..23"),
    ],
)
def test_a_well_shaped_but_impossible_date_says_which_part_is_wrong(text, reason):
    from mesh_dagster.core.time.dates import DateError

    with pytest.raises(DateError) as e:
        to_ms(text)
    assert e.value.reason == reason
    assert str(e.value) == f"Invalid date/time '{text}': {reason}"


def test_time_range_is_start_and_exclusive_end():
    from mesh_dagster.core.time.dates import time_range

    assert time_range("2020-01-01", "2020-01-01") == (JAN1_MS, JAN1_MS + MS_PER_DAY)  # the end's whole day
    assert time_range("2020-01-01", JAN1_MS + 1) == (JAN1_MS, JAN1_MS + 1)


@pytest.mark.parametrize(
    "start, end, message",
    [
        ("2020-02-01", "2020-01-01", "Invalid start '2020-02-01': it is after the end '2020-01-01'"),
        ("2020-01-02", "2020-01-01", "Invalid start '2020-01-02': it is after the end '2020-01-01'"),
        ("2020-01-01 10:00", "2020-01-01 10:00",
         "Invalid start '2020-01-01 10:00': it is not before the end '2020-01-01 10:00', so the range is empty"),
        ("2020-01-02", JAN1_MS, "Invalid start '2020-01-02': it is after the end '2020-01-01 00:00:00'"),
    ],
)
def test_time_range_refuses_an_empty_or_reversed_range(start, end, message):
    from mesh_dagster.core.time.dates import DateError, time_range

    with pytest.raises(DateError) as e:
        time_range(start, end)
    assert str(e.value) == message
