"""The bounds of an interval on a model's time column: one decision for writes and audits.

An INCREMENTAL_BY_TIME_RANGE write keeps `time_column BETWEEN low AND high` of the query's output
and replaces exactly those rows; an audit of the same interval reads exactly those rows. Both
must therefore spell `low` and `high` identically, and the spelling depends on the column's type:
an INT `ds` in `%Y%m%d` is bounded by `20200101`, a STRING one by `'20200101'`, a DATE by a DATE.
A bound of another type would be coerced by Spark (an INT compared with a TIMESTAMP counts
seconds since 1970), silently selecting other rows.

The type that decides is the type the column has in the physical table (what the rows are stored
as): callers that can ask the engine pass it; the declared `columns` are the fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import ParseError

NUMERIC_TYPES = exp.DataType.INTEGER_TYPES | exp.DataType.REAL_TYPES
TIMESTAMP_TYPES = {
    exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATETIME,
}
_ONE_MICROSECOND = timedelta(microseconds=1)


class TimeColumnError(ValueError):
    """The time column's type cannot be bounded with its format (the caller names file and line)."""


def interval_bounds(start: datetime, end: datetime, column_type: str | None,
                    time_format: str) -> tuple[exp.Expr, exp.Expr]:
    """Inclusive low and high bounds of `[start, end)` as literals of the column's type.

    `end` is exclusive; the high bound is the last microsecond before it, formatted. Without a
    known type the bounds are TIMESTAMPs, which Spark compares correctly with DATE, TIMESTAMP and
    ISO-formatted string columns (the case of a model whose columns are unknown before it runs).
    """
    low, high = _as_utc(start), _as_utc(end) - _ONE_MICROSECOND
    data_type = _data_type(column_type)
    if data_type is None or data_type.this in TIMESTAMP_TYPES:
        target = data_type.copy() if data_type is not None else exp.DataType.build("TIMESTAMP")
        return (exp.cast(exp.Literal.string(_timestamp_text(low)), target),
                exp.cast(exp.Literal.string(_timestamp_text(high)), target))
    if data_type.this == exp.DataType.Type.DATE:
        return (exp.cast(exp.Literal.string(low.strftime("%Y-%m-%d")), "DATE"),
                exp.cast(exp.Literal.string(high.strftime("%Y-%m-%d")), "DATE"))
    if data_type.is_type(*exp.DataType.TEXT_TYPES):
        return exp.Literal.string(low.strftime(time_format)), exp.Literal.string(high.strftime(time_format))
    if data_type.this in NUMERIC_TYPES:
        return _number(low, time_format, column_type), _number(high, time_format, column_type)
    raise TimeColumnError(f"a time column of type {column_type} cannot hold time; use DATE, TIMESTAMP, "
                          "a string or an integer with a format such as '%Y%m%d'")


def interval_condition(column: str, start: datetime, end: datetime, column_type: str | None,
                       time_format: str) -> exp.Between:
    """`column BETWEEN low AND high` for `[start, end)`."""
    low, high = interval_bounds(start, end, column_type, time_format)
    return exp.Between(this=exp.column(column, quoted=True), low=low, high=high)


@lru_cache(maxsize=256)
def check_time_column(column_type: str | None, time_format: str) -> None:
    """Raise `TimeColumnError` now if intervals could not be bounded on such a column later (for
    the loader, when the column's type is known before anything runs). Memoised: a project's
    models share a handful of (type, format) pairs and the loader checks every model each load."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    interval_bounds(epoch, epoch + timedelta(days=1), column_type, time_format)


def find_type(columns: Mapping[str, str | None] | None, column: str) -> str | None:
    """The type of `column` in `columns`, matched case-insensitively like Spark does."""
    lowered = column.lower()
    return next((t for c, t in (columns or {}).items() if c.lower() == lowered), None)


@lru_cache(maxsize=256)
def _data_type(column_type: str | None) -> exp.DataType | None:
    if not column_type:
        return None
    try:
        return exp.DataType.build(column_type, dialect="spark")
    except (ParseError, ValueError):
        raise TimeColumnError(f"unknown time column type {column_type!r}") from None


def _number(moment: datetime, time_format: str, column_type: str | None) -> exp.Expr:
    text = moment.strftime(time_format)
    if not text.isdigit():
        raise TimeColumnError(f"the time column is {column_type}, but its format {time_format!r} gives "
                              f"{text!r}, not a number; declare a numeric format such as '%Y%m%d'")
    return exp.Literal.number(int(text))


def _timestamp_text(moment: datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
