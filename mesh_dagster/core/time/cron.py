"""Crons and interval units.

Two different clocks meet here. The *cron* decides when a model is due; the *interval unit*
(inferred from the cron unless written) decides the boundaries of the intervals that are computed
and recorded. `0 6 * * *` therefore has midnight-aligned daily intervals and merely waits until
06:00 to process the day that just ended.

Interval boundaries are computed with integer arithmetic on epoch milliseconds (calendar
arithmetic for months and years) so a plan over thousands of models and years of history never
asks croniter about individual intervals. croniter is only used for a model's own cron, once per
question, and only when the cron is not a simple fixed period.

`cron_tz` moves only the fire times: `0 6 * * *` with `cron_tz America/Los_Angeles` is due at
06:00 in Los Angeles (14:00 or 13:00 UTC, with daylight saving). Intervals stay UTC, and the
interval unit is inferred from the cron alone, so a time zone never changes what a model records.
"""

from __future__ import annotations

from datetime import UTC, datetime
from difflib import get_close_matches
from enum import Enum
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import croniter

from mesh_dagster.core.time.dates import MS_PER_DAY, MS_PER_HOUR, MS_PER_MINUTE, TimeLike, ms_to_datetime, to_ms

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_CANONICAL_ALIAS = {"@annually": "@yearly", "@midnight": "@daily"}

# Fire times sampled to infer an interval unit; a fixed base keeps inference deterministic.
_INFERENCE_SAMPLES = 5
_INFERENCE_BASE = datetime.fromisoformat("2021-01-01T00:00:00+00:00")


class IntervalUnit(str, Enum):
    """The granularity of a model's intervals, largest first."""

    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    HALF_HOUR = "half_hour"
    QUARTER_HOUR = "quarter_hour"
    FIVE_MINUTE = "five_minute"

    @classmethod
    def parse(cls, value: str | IntervalUnit) -> IntervalUnit:
        if isinstance(value, IntervalUnit):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(unit.value for unit in cls)
            message = f"Invalid interval_unit '{value}': expected one of {allowed}"
            raise ValueError(message) from None

    @property
    def seconds(self) -> int:
        """Length in seconds; the shortest possible month (28 days) and year (365 days).

        Using the shortest length lets unit inference pick MONTH for `@monthly` even though
        February is shorter than the average month.
        """
        return _SECONDS[self]

    @property
    def milliseconds(self) -> int | None:
        """Exact length in ms, or None for calendar units whose length varies."""
        return None if self.is_calendar else _SECONDS[self] * 1000

    @property
    def cron_expression(self) -> str:
        return _UNIT_CRONS[self]

    @property
    def is_calendar(self) -> bool:
        return self in (IntervalUnit.YEAR, IntervalUnit.MONTH)

    @property
    def is_date_granularity(self) -> bool:
        """Whole days or more: printed and rendered as dates rather than timestamps."""
        return self in (IntervalUnit.YEAR, IntervalUnit.MONTH, IntervalUnit.DAY)

    def index_of(self, ms: int) -> int:
        """Number of the unit interval containing `ms` (0 = the one starting at the epoch)."""
        if self is IntervalUnit.MONTH:
            year, month, _ = _civil_from_days(ms // MS_PER_DAY)
            return (year - 1970) * 12 + month - 1
        if self is IntervalUnit.YEAR:
            return _civil_from_days(ms // MS_PER_DAY)[0] - 1970
        return ms // (_SECONDS[self] * 1000)

    def start_of(self, index: int) -> int:
        """Epoch ms at which unit interval number `index` starts."""
        if self is IntervalUnit.MONTH:
            year, month0 = divmod(index, 12)
            return _days_from_civil(1970 + year, month0 + 1, 1) * MS_PER_DAY
        if self is IntervalUnit.YEAR:
            return _days_from_civil(1970 + index, 1, 1) * MS_PER_DAY
        return index * _SECONDS[self] * 1000

    def floor(self, ms: int) -> int:
        """Latest unit boundary <= ms."""
        step = self.milliseconds
        return ms - ms % step if step else self.start_of(self.index_of(ms))

    def ceil(self, ms: int) -> int:
        """Earliest unit boundary >= ms."""
        floor = self.floor(ms)
        return floor if floor == ms else self.shift(floor, 1)

    def ceil_index(self, ms: int) -> int:
        """Index of the first unit interval starting at or after `ms`."""
        index = self.index_of(ms)
        return index if self.start_of(index) == ms else index + 1

    def shift(self, boundary_ms: int, count: int) -> int:
        """The boundary `count` units after (before, if negative) an aligned boundary."""
        step = self.milliseconds
        if step:
            return boundary_ms + count * step
        return self.start_of(self.index_of(boundary_ms) + count)


_SECONDS = {
    IntervalUnit.YEAR: 365 * 86_400,
    IntervalUnit.MONTH: 28 * 86_400,
    IntervalUnit.DAY: 86_400,
    IntervalUnit.HOUR: 3_600,
    IntervalUnit.HALF_HOUR: 1_800,
    IntervalUnit.QUARTER_HOUR: 900,
    IntervalUnit.FIVE_MINUTE: 300,
}
_UNIT_CRONS = {
    IntervalUnit.YEAR: "0 0 1 1 *",
    IntervalUnit.MONTH: "0 0 1 * *",
    IntervalUnit.DAY: "0 0 * * *",
    IntervalUnit.HOUR: "0 * * * *",
    IntervalUnit.HALF_HOUR: "*/30 * * * *",
    IntervalUnit.QUARTER_HOUR: "*/15 * * * *",
    IntervalUnit.FIVE_MINUTE: "*/5 * * * *",
}


@lru_cache(maxsize=4096)
def validate_cron(expr: str) -> str:
    """The normalised cron text (lower-case alias or single-spaced 5 fields), or ValueError."""
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError(
            f"Invalid cron '{expr}': expected @hourly, @daily, @weekly, @monthly, @yearly or a "
            "5-field cron expression"
        )
    text = " ".join(expr.split())
    if text.startswith("@"):
        alias = text.lower()
        if alias not in ALIASES:
            raise ValueError(
                f"Invalid cron '{expr}': unknown alias; expected one of "
                "@hourly, @daily, @weekly, @monthly, @yearly"
            )
        return _CANONICAL_ALIAS.get(alias, alias)
    fields = text.split(" ")
    if len(fields) != 5:
        raise ValueError(
            f"Invalid cron '{expr}': expected 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(fields)}"
        )
    try:
        croniter(text)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"Invalid cron '{expr}': {e}") from None
    return text


def validate_cron_tz(name: str) -> str:
    """An IANA time zone name (`Europe/Paris`, `UTC`), or ValueError naming close ones."""
    text = str(name).strip()
    try:
        _zone(text)
    except (ZoneInfoNotFoundError, ValueError):
        close = get_close_matches(text, sorted(available_timezones()), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else " (an IANA name such as Europe/Paris)"
        raise ValueError(f"Unknown time zone '{name}'{hint}") from None
    return text


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _is_utc(tz: str | None) -> bool:
    return tz is None or tz.upper() in ("UTC", "ETC/UTC", "Z")


def interval_unit(cron: str, explicit: str | IntervalUnit | None = None) -> IntervalUnit:
    """The model's interval unit: the explicit one (checked against the cron) or inferred.

    Inference: the largest unit not longer than the shortest gap between upcoming fire times.
    An explicit unit longer than that gap is refused — the cron would fire before an interval
    could be complete.
    """
    gap = _min_gap_seconds(validate_cron(cron))
    if explicit is not None:
        unit = IntervalUnit.parse(explicit)
        if unit.seconds > gap:
            raise ValueError(
                f"Invalid interval_unit '{unit.value}' for cron '{cron}': the cron fires every "
                f"{_describe(gap)}, more often than one {unit.value}"
            )
        return unit
    for unit in IntervalUnit:
        if unit.seconds <= gap:
            return unit
    raise ValueError(
        f"Invalid cron '{cron}': it fires every {_describe(gap)}; the shortest supported "
        "interval is 5 minutes"
    )


def cron_floor(cron: str, dt: TimeLike, tz: str | None = None) -> datetime:
    """Latest fire time <= dt (fire times in `tz`, default UTC)."""
    return ms_to_datetime(cron_floor_ms(cron, to_ms(dt), tz))


def cron_next(cron: str, dt: TimeLike, tz: str | None = None) -> datetime:
    """Earliest fire time > dt."""
    return ms_to_datetime(cron_next_ms(cron, to_ms(dt), tz))


def cron_prev(cron: str, dt: TimeLike, tz: str | None = None) -> datetime:
    """Latest fire time < dt."""
    return ms_to_datetime(cron_prev_ms(cron, to_ms(dt), tz))


def cron_floor_ms(cron: str, ms: int, tz: str | None = None) -> int:
    period = _fixed_period(validate_cron(cron)) if _is_utc(tz) else None
    if period is not None:
        step, offset = period
        return ms - (ms - offset) % step
    minute = ms - ms % MS_PER_MINUTE  # crons fire on whole minutes
    expression = _expression(cron)
    at = _local(minute, tz)
    if croniter.match(expression, at):
        return minute
    return to_ms(croniter(expression, at).get_prev(datetime))


def cron_next_ms(cron: str, ms: int, tz: str | None = None) -> int:
    period = _fixed_period(validate_cron(cron)) if _is_utc(tz) else None
    if period is not None:
        return cron_floor_ms(cron, ms) + period[0]
    minute = ms - ms % MS_PER_MINUTE
    return to_ms(croniter(_expression(cron), _local(minute, tz)).get_next(datetime))


def cron_prev_ms(cron: str, ms: int, tz: str | None = None) -> int:
    # Fire times are whole milliseconds, so "latest < ms" is "latest <= ms - 1".
    return cron_floor_ms(cron, ms - 1, tz)


def fixed_period_ms(cron: str, tz: str | None = None) -> int | None:
    """The time between two ticks of a cron that ticks at one fixed period (every day at 06:00,
    every hour, every 15 minutes) in UTC; None for any other (weekdays only, monthly, or a time
    zone whose daylight saving makes some days 23 or 25 hours long)."""
    period = _fixed_period(validate_cron(cron)) if _is_utc(tz) else None
    return period[0] if period is not None else None


@lru_cache(maxsize=256)
def longest_gap_ms(cron: str, tz: str | None = None) -> int:
    """The longest time between two ticks of `cron` in `tz` over a year of ticks (a weekday cron's
    weekend; the longest month; a day lengthened by daylight saving)."""
    period = fixed_period_ms(cron, tz)
    if period is not None:
        return period
    it = croniter(_expression(cron), _INFERENCE_BASE if _is_utc(tz) else _INFERENCE_BASE.astimezone(_zone(tz)))
    fires = [it.get_next(datetime) for _ in range(_GAP_SAMPLES)]
    return max(to_ms(b) - to_ms(a) for a, b in zip(fires, fires[1:]))


_GAP_SAMPLES = 400  # over a year of a daily cron's ticks, enough weeks and months for any other


def _local(ms: int, tz: str | None) -> datetime:
    """`ms` as an aware datetime in `tz`: croniter then reads the fields as that zone's wall clock
    (and steps over daylight-saving gaps and folds)."""
    utc = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return utc if _is_utc(tz) else utc.astimezone(_zone(tz))


def _expression(cron: str) -> str:
    normalised = validate_cron(cron)
    return ALIASES.get(normalised, normalised)


@lru_cache(maxsize=4096)
def _fixed_period(cron: str) -> tuple[int, int] | None:
    """(period ms, offset ms from the epoch) for crons that fire at a fixed period, else None.

    Covers daily-at-a-time, hourly-at-a-minute and every-N-minutes/hours crons, i.e. almost
    every cron a project uses, without croniter.
    """
    minute, hour, dom, month, dow = _expression(cron).split(" ")
    if (dom, month, dow) != ("*", "*", "*"):
        return None
    if minute.isdigit() and hour.isdigit():
        return MS_PER_DAY, int(hour) * MS_PER_HOUR + int(minute) * MS_PER_MINUTE
    if minute.isdigit() and hour == "*":
        return MS_PER_HOUR, int(minute) * MS_PER_MINUTE
    if hour == "*" and (minute == "*" or _divisor_step(minute, 60)):
        return (_divisor_step(minute, 60) or 1) * MS_PER_MINUTE, 0
    if minute.isdigit() and (hours := _divisor_step(hour, 24)):
        return hours * MS_PER_HOUR, int(minute) * MS_PER_MINUTE
    return None


def _divisor_step(field: str, modulus: int) -> int | None:
    """N for a `*/N` field when N divides the field's range evenly (so the period is fixed)."""
    if not field.startswith("*/") or not field[2:].isdigit():
        return None
    step = int(field[2:])
    return step if 0 < step and modulus % step == 0 else None


@lru_cache(maxsize=4096)
def _min_gap_seconds(cron: str) -> int:
    period = _fixed_period(cron)
    if period is not None:
        return period[0] // 1000
    it = croniter(_expression(cron), _INFERENCE_BASE)
    fires = [it.get_next(datetime) for _ in range(_INFERENCE_SAMPLES)]
    return int(min((b - a).total_seconds() for a, b in zip(fires, fires[1:])))


def _describe(seconds: int) -> str:
    for size, name in ((86_400, "day"), (3_600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {name}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


# Proleptic Gregorian calendar <-> days since 1970-01-01, in integers only (valid for any year).
def _days_from_civil(year: int, month: int, day: int) -> int:
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1_460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_piece = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_piece + 2) // 5 + 1
    month = month_piece + (3 if month_piece < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day
