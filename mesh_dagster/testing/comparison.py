"""Comparing the rows a query returned with the rows a test expects, and explaining differences.

Expected values come from YAML (ints, floats, strings, `date`s) and actual ones from Spark via
pandas (numpy numbers, `Timestamp`s, `Decimal`s, NaN for NULL). Comparing them literally would
fail tests that are right, so each expected value is first coerced towards the kind of value
Spark returned in that column (`'2020-01-01'` vs a DATE, `2` vs `2.0`, `None` vs NaN), then both
sides are put in one canonical form. Row order matters only when the query ends in ORDER BY.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

MAX_SHOWN_ROWS = 20


@dataclass
class Table:
    """Rows as tuples under named columns (names lower-case)."""

    columns: list[str]
    rows: list[tuple]

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Table:
        lowered = [{str(k).lower(): v for k, v in r.items()} for r in records]
        names = list(columns) if columns is not None else _union_keys(lowered)
        return cls(names, [tuple(r.get(c) for c in names) for r in lowered])

    @classmethod
    def from_frame(cls, frame: Any) -> Table:
        """A pandas DataFrame (as returned by the engine)."""
        columns = [str(c).lower() for c in frame.columns]
        return cls(columns, [tuple(row) for row in frame.itertuples(index=False, name=None)])

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]


def _union_keys(records: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for record in records:
        for key in record:
            if key not in names:
                names.append(key)
    return names


# ---------------------------------------------------------------------------------------------
# Canonical values


def canonical(value: Any) -> Any:
    """A hashable, comparable form of a value from YAML or from pandas."""
    if value is None:
        return None
    if hasattr(value, "asDict"):  # a Spark Row (struct)
        value = value.asDict(recursive=True)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy scalars and arrays
        value = value.tolist()
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        if _is_nat(value):
            return None
        value = value.to_pydatetime()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return float(f"{value:.12g}")
    if isinstance(value, Decimal):
        return canonical(float(value)) if value.is_finite() else None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), canonical(v)) for k, v in value.items()))
    if _is_nat(value):
        return None
    return value


def _is_nat(value: Any) -> bool:
    if type(value).__name__ == "NAType":  # pandas.NA: `NA != NA` is NA, which has no truth value
        return True
    try:
        return bool(value != value)  # NaN, NaT, pd.NA-like
    except (TypeError, ValueError):
        return False


def coerce(expected: Any, sample: Any) -> Any:
    """`expected` (canonical) as the kind of value `sample` (canonical, not None) is."""
    if expected is None or sample is None:
        return expected
    if isinstance(sample, datetime):
        if isinstance(expected, str):
            parsed = _parse_datetime(expected)
            return parsed if parsed is not None else expected
        if isinstance(expected, date) and not isinstance(expected, datetime):
            return datetime(expected.year, expected.month, expected.day)
        return expected
    if isinstance(sample, date):
        if isinstance(expected, datetime) and expected.time() == datetime.min.time():
            return expected.date()
        if isinstance(expected, str):
            parsed = _parse_datetime(expected)
            if parsed is not None and parsed.time() == datetime.min.time():
                return parsed.date()
        return expected
    if isinstance(sample, bool):
        if isinstance(expected, str) and expected.strip().lower() in ("true", "false"):
            return expected.strip().lower() == "true"
        return expected
    if isinstance(sample, (int, float)):
        if isinstance(expected, str):
            for cast in (int, float):
                try:
                    return canonical(cast(expected.strip()))
                except ValueError:
                    continue
        return expected
    if isinstance(sample, str):
        if isinstance(expected, bool):
            return "true" if expected else "false"
        if isinstance(expected, datetime):
            return expected.isoformat(sep=" ")
        if isinstance(expected, date):
            return expected.isoformat()
        if isinstance(expected, (int, float)):
            return str(expected)
        return expected
    return expected


def _parse_datetime(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return canonical(parsed)


# ---------------------------------------------------------------------------------------------
# Comparing


@dataclass
class Comparison:
    ok: bool
    message: str = ""


def compare(expected: Table, actual: Table, partial: bool = False, ordered: bool = False) -> Comparison:
    """Whether `actual` holds exactly the `expected` rows; if not, a readable explanation."""
    unknown = [c for c in expected.columns if c not in actual.columns]
    if unknown:
        return Comparison(False, f"Expected column{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                                 f"not in the output (output columns: {', '.join(actual.columns) or 'none'})")
    columns = [c for c in actual.columns if c in expected.columns] if partial else list(actual.columns)
    indexes = [actual.columns.index(c) for c in columns]
    actual_rows = [tuple(canonical(row[i]) for i in indexes) for row in actual.rows]
    samples = [next((r[j] for r in actual_rows if r[j] is not None), None) for j in range(len(columns))]
    expected_index = {c: i for i, c in enumerate(expected.columns)}
    expected_rows = [
        tuple(coerce(canonical(row[expected_index[c]]) if c in expected_index else None, samples[j])
              for j, c in enumerate(columns))
        for row in expected.rows
    ]
    if _same(expected_rows, actual_rows, ordered):
        return Comparison(True)
    lines = [f"Data mismatch ({len(expected_rows)} expected rows, {len(actual_rows)} actual rows):"]
    lines += _explain(columns, expected_rows, actual_rows, ordered)
    absent = [c for c in columns if c not in expected_index]
    if absent and not partial:
        lines.append(f"Note: column{'s' if len(absent) > 1 else ''} {', '.join(absent)} "
                     f"{'are' if len(absent) > 1 else 'is'} in no expected row, so expected NULL; "
                     "use `partial: true` to compare only the listed columns.")
    shown = (lambda rows: rows) if ordered else _sorted
    lines.append("Expected:")
    lines += _format_table(columns, shown(expected_rows))
    lines.append("Actual:")
    lines += _format_table(columns, shown(actual_rows))
    return Comparison(False, "\n".join(lines))


def _same(expected: list[tuple], actual: list[tuple], ordered: bool) -> bool:
    if ordered:
        return expected == actual
    return Counter(expected) == Counter(actual)


def _explain(columns: list[str], expected: list[tuple], actual: list[tuple], ordered: bool) -> list[str]:
    lines: list[str] = []
    if ordered:
        missing, unexpected = expected[len(actual):], actual[len(expected):]
        for i, (e, a) in enumerate(zip(expected, actual), 1):
            if e != a:
                lines.append(f"  row {i}: " + _cell_differences(columns, e, a))
    else:
        missing, unexpected = _unmatched(expected, actual)
        if len(columns) > 1:
            paired, missing, unexpected = _pair(missing, unexpected)
            for e, a in paired:
                same = [f"{c}={_show(v)}" for c, v, w in zip(columns, e, a) if v == w]
                lines.append(f"  row ({', '.join(same)}): " + _cell_differences(columns, e, a))
    if missing:
        lines.append("  expected but not in the output:")
        lines += [f"    {_show_row(columns, r)}" for r in missing[:MAX_SHOWN_ROWS]]
    if unexpected:
        lines.append("  in the output but not expected:")
        lines += [f"    {_show_row(columns, r)}" for r in unexpected[:MAX_SHOWN_ROWS]]
    return lines


def _unmatched(expected: list[tuple], actual: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    remaining = Counter(actual)
    missing = []
    for row in expected:
        if remaining[row] > 0:
            remaining[row] -= 1
        else:
            missing.append(row)
    unexpected = []
    left = Counter(expected)
    for row in actual:
        if left[row] > 0:
            left[row] -= 1
        else:
            unexpected.append(row)
    return missing, unexpected


def _pair(missing: list[tuple], unexpected: list[tuple]) -> tuple[list[tuple[tuple, tuple]], list[tuple], list[tuple]]:
    """Match each missing row with the unexpected row sharing most values (at least one)."""
    pool = list(unexpected)
    pairs, unpaired = [], []
    for row in missing:
        scores = [sum(a == b for a, b in zip(row, other)) for other in pool]
        best = max(range(len(pool)), key=lambda i: scores[i], default=None)
        if best is None or scores[best] == 0:
            unpaired.append(row)
            continue
        pairs.append((row, pool.pop(best)))
    return pairs, unpaired, pool


def _sorted(rows: list[tuple]) -> list[tuple]:
    """Rows in a stable order for display, whatever the mix of types and NULLs."""
    return sorted(rows, key=lambda row: tuple((v is not None, type(v).__name__, v if isinstance(v, (int, float)) and
                                                not isinstance(v, bool) else str(v)) for v in row))


def _cell_differences(columns: list[str], expected: tuple, actual: tuple) -> str:
    return "; ".join(f"{c}: expected {_show(e)}, actual {_show(a)}"
                     for c, e, a in zip(columns, expected, actual) if e != a)


def _show(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return repr(value)


def _show_row(columns: list[str], row: tuple) -> str:
    return "{" + ", ".join(f"{c}: {_show(v)}" for c, v in zip(columns, row)) + "}"


def _format_table(columns: list[str], rows: list[tuple]) -> list[str]:
    shown = [[_show(v) for v in row] for row in rows[:MAX_SHOWN_ROWS]]
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(columns)]
    out = ["  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    out += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in shown]
    if len(rows) > MAX_SHOWN_ROWS:
        out.append(f"  ... {len(rows) - MAX_SHOWN_ROWS} more rows")
    if not rows:
        out.append("  (no rows)")
    return out
