"""Points in time as users write them, and as the rest of the system stores them.

Everything is UTC. Users write dates in many shapes (`2020-01-01`, `1 year ago`, epoch ms from
YAML); the state store and interval arithmetic want plain epoch-millisecond integers. This module
is the single door between the two, so every other module can assume an `int` or a tz-aware UTC
`datetime`.

Errors are `DateError`s: a `MeshError`, so a bad `--start` on the command line is one clear line,
and a `ValueError`, so callers that know the file and line a value came from keep wrapping it
with them.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, date, datetime, timedelta

from mesh_dagster.core.errors import MeshError

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS_PER_SECOND = 1_000
MS_PER_MINUTE = 60 * MS_PER_SECOND
MS_PER_HOUR = 60 * MS_PER_MINUTE
MS_PER_DAY = 24 * MS_PER_HOUR

TimeLike = datetime | date | int | float | str

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INTEGER = re.compile(r"^-?\d+$")
_YYYYMMDD = re.compile(r"^\d{8}$")

# Units of relative expressions. Calendar units (month, year) have no fixed length: they are
# applied with calendar arithmetic by `_shift`, and approximated only for TTLs.
_UNIT_ALIASES = {
    "s": "second", "sec": "second", "secs": "second", "second": "second", "seconds": "second",
    "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute",
    "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour",
    "d": "day", "day": "day", "days": "day",
    "w": "week", "week": "week", "weeks": "week",
    "month": "month", "months": "month",
    "y": "year", "year": "year", "years": "year",
}  # fmt: skip
_FIXED_UNIT_MS = {
    "second": MS_PER_SECOND,
    "minute": MS_PER_MINUTE,
    "hour": MS_PER_HOUR,
    "day": MS_PER_DAY,
    "week": 7 * MS_PER_DAY,
}
_TTL_CALENDAR_MS = {"month": 30 * MS_PER_DAY, "year": 365 * MS_PER_DAY}
_SUB_DAY_UNITS = {"second", "minute", "hour"}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1}

_AMOUNT = r"(?P<amount>\d+|(?:a|an|one)(?=\s))\s*(?P<unit>[a-z]+)"
_AGO = re.compile(rf"^{_AMOUNT}\s+ago$")
_IN = re.compile(rf"^in\s+{_AMOUNT}$")
_BARE = re.compile(rf"^{_AMOUNT}$")
_DAY_WORDS = {"today": 0, "yesterday": -1, "tomorrow": 1}

_EXPECTED = (
    "expected a date like '2020-01-01', a timestamp like '2020-01-01 12:00:00' or ISO 8601, "
    "epoch milliseconds, or a relative expression like 'now', 'yesterday', '1 week ago', "
    "'in 2 days'"
)
_OUT_OF_RANGE = "out of the supported range"
_EXPECTED_TTL = "expected a duration like 'in 1 week' or '2 days'"


class DateError(MeshError, ValueError):
    """A time or duration users wrote cannot be read; `reason` says what is accepted."""

    def __init__(self, value: object, reason: str = _EXPECTED, what: str = "date/time"):
        self.value = value
        self.reason = reason
        shown = f"'{value}'" if isinstance(value, str) else repr(value)
        super().__init__(f"Invalid {what} {shown}: {reason}")


def to_datetime(value: TimeLike, relative_base: datetime | None = None) -> datetime:
    """Any supported time value as a tz-aware UTC datetime.

    Relative expressions whose finest unit is a day or more (`yesterday`, `1 week ago`) are
    truncated to midnight: a model `start: 1 year ago` must name the same interval boundary no
    matter at which hour the project is loaded. `now` and `2 hours ago` keep the time of day.
    """
    try:
        return _to_datetime(value, relative_base)
    except OverflowError:
        raise DateError(value, _OUT_OF_RANGE) from None


def _to_datetime(value: TimeLike, relative_base: datetime | None) -> datetime:
    if isinstance(value, datetime):
        return _as_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, bool):
        raise DateError(value)
    if isinstance(value, int):
        return ms_to_datetime(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DateError(value)
        return ms_to_datetime(round(value))
    if isinstance(value, str):
        return _parse_text(value, relative_base)
    raise DateError(value)


def to_ms(value: TimeLike, relative_base: datetime | None = None) -> int:
    """Epoch milliseconds (UTC) — the representation of every stored interval boundary."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return (to_datetime(value, relative_base) - EPOCH) // timedelta(milliseconds=1)


def to_end_ms(value: TimeLike, relative_base: datetime | None = None) -> int:
    """An *exclusive* end in epoch ms: a date-only end names its whole day.

    `--end 2020-01-05` means "up to and including Jan 5th", i.e. up to 2020-01-06 00:00.
    """
    ms = to_ms(value, relative_base)
    return ms + MS_PER_DAY if is_date_only(value) else ms


def time_range(start: TimeLike, end: TimeLike, relative_base: datetime | None = None) -> tuple[int, int]:
    """`[start, end)` in epoch ms, a date-only end naming its whole day.

    An empty range is refused rather than computed: it would do nothing, silently, and a start
    after the end is always a mistake (swapped or mistyped dates).
    """
    start_ms, end_ms = to_ms(start, relative_base), to_end_ms(end, relative_base)
    if start_ms < end_ms:
        return start_ms, end_ms
    shown_end = to_ts_str(end) if isinstance(end, int) and not isinstance(end, bool) else end
    if start_ms > to_ms(end, relative_base):
        raise DateError(start, f"it is after the end '{shown_end}'", what="start")
    raise DateError(start, f"it is not before the end '{shown_end}', so the range is empty", what="start")


def ms_to_datetime(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def now() -> datetime:
    return ms_to_datetime(now_ms())


def to_ds(value: TimeLike) -> str:
    """`YYYY-MM-DD`, the date string used by `@ds`-style macros and plan output."""
    dt = to_datetime(value)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"


def to_ts_str(value: TimeLike) -> str:
    """`YYYY-MM-DD HH:MM:SS`, with `.ffffff` only when there is a sub-second part.

    No offset suffix: every timestamp we print is UTC, and Spark parses this form directly.
    """
    dt = to_datetime(value)
    text = f"{to_ds(dt)} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    return f"{text}.{dt.microsecond:06d}" if dt.microsecond else text


def is_date_only(value: object) -> bool:
    """Whether a value names a whole day (`2020-01-05` or a `date`), not an instant.

    Relative expressions (`yesterday`) and epoch values are instants, never whole days.
    """
    if isinstance(value, datetime):
        return False
    if isinstance(value, date):
        return True
    if isinstance(value, str) and _DATE_ONLY.match(value.strip()):
        try:
            date.fromisoformat(value.strip())
        except ValueError:
            return False
        return True
    return False


def is_relative(text: str) -> bool:
    """Whether a string is a relative expression, i.e. its meaning depends on when it is read."""
    return _relative_delta(text.strip().lower()) is not None


def parse_ttl(text: str | int) -> int:
    """A duration like `in 1 week` or `2 days` in milliseconds (integers are taken as ms).

    Months and years count as 30 and 365 days: a TTL is a duration, not a calendar position.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise DateError(text, "must not be negative", what="TTL")
        return text
    if not isinstance(text, str):
        raise DateError(text, _EXPECTED_TTL, what="TTL")
    cleaned = text.strip().lower()
    match = _IN.match(cleaned) or _BARE.match(cleaned)
    unit = _UNIT_ALIASES.get(match.group("unit")) if match else None
    if match is None or unit is None:
        raise DateError(text, _EXPECTED_TTL, what="TTL")
    unit_ms = _FIXED_UNIT_MS[unit] if unit in _FIXED_UNIT_MS else _TTL_CALENDAR_MS[unit]
    return _amount(match.group("amount")) * unit_ms


def _as_utc(dt: datetime) -> datetime:
    # Naive datetimes are taken as UTC (never the machine's local zone).
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _parse_text(text: str, relative_base: datetime | None) -> datetime:
    cleaned = text.strip()
    if not cleaned:
        raise DateError(text)
    if _YYYYMMDD.match(cleaned):
        try:
            return datetime.strptime(cleaned, "%Y%m%d").replace(tzinfo=UTC)
        except ValueError:
            pass  # not a calendar date: fall through to epoch milliseconds
    if _INTEGER.match(cleaned):
        return ms_to_datetime(int(cleaned))
    relative = _relative_datetime(cleaned.lower(), relative_base)
    if relative is not None:
        return relative
    iso = cleaned[:-4].rstrip() if cleaned.upper().endswith(" UTC") else cleaned
    try:
        return _as_utc(datetime.fromisoformat(iso))
    except ValueError as e:
        # `2020-99-99` has the right shape: say which part is wrong rather than list every shape.
        detail = str(e)
        raise DateError(text, _EXPECTED if detail.startswith("Invalid isoformat") else detail) from None


def _relative_datetime(text: str, relative_base: datetime | None) -> datetime | None:
    delta = _relative_delta(text)
    if delta is None:
        return None
    amount, unit = delta
    base = _as_utc(relative_base) if relative_base is not None else now()
    try:
        shifted = _shift(base, amount, unit)
    except (OverflowError, ValueError):
        raise DateError(text, _OUT_OF_RANGE) from None
    if unit in _SUB_DAY_UNITS:
        return shifted
    return shifted.replace(hour=0, minute=0, second=0, microsecond=0)


def _relative_delta(text: str) -> tuple[int, str] | None:
    """(signed amount, unit) of a relative expression, or None if it is not one."""
    if text == "now":
        return 0, "second"
    if text in _DAY_WORDS:
        return _DAY_WORDS[text], "day"
    for pattern, sign in ((_AGO, -1), (_IN, 1)):
        match = pattern.match(text)
        if match and match.group("unit") in _UNIT_ALIASES:
            return sign * _amount(match.group("amount")), _UNIT_ALIASES[match.group("unit")]
    return None


def _amount(text: str) -> int:
    return _NUMBER_WORDS[text] if text in _NUMBER_WORDS else int(text)


def _shift(dt: datetime, amount: int, unit: str) -> datetime:
    if unit in _FIXED_UNIT_MS:
        return dt + timedelta(milliseconds=amount * _FIXED_UNIT_MS[unit])
    months = amount * (12 if unit == "year" else 1)
    return add_months(dt, months)


def add_months(dt: datetime, months: int) -> datetime:
    """Calendar month arithmetic; the day is clamped (Mar 31 - 1 month = Feb 28/29)."""
    index = dt.year * 12 + dt.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    return dt.replace(year=year, month=month, day=min(dt.day, _days_in_month(year, month)))


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31
