"""Seed CSV files, checked at load time: header, row shape and every value against its type.

A seed without `columns` gets the types SQLMesh gives it, inferred from the values as pandas'
CSV reader infers them: a column of integers is BIGINT (DOUBLE when a value is missing: pandas
holds integers with gaps as floats), of numbers DOUBLE, of `true`/`false` BOOLEAN, anything else
(dates included: pandas does not parse them unless asked) STRING. Left all-STRING, joins and
arithmetic on seed ids would silently differ from what the same project computes in SQLMesh.

A seed is loaded at apply time by pandas (every value as text) and cast by Spark to the declared
column types. Spark (ANSI mode, Spark 4's default) fails the whole write on the first value that
does not cast, without naming the file, row or column, and pandas pads short rows with NULLs. So
the loader reads the CSV the way the seed reader will (same delimiter, quoting, NA values) and
refuses, with `file:line` and the column, any row with the wrong number of fields and any value
Spark would not cast. The verdict is cached by the file's content (plus declared types and CSV
settings), so a warm load of a large seed only hashes it.

The cast rules below follow Spark's string casts (`Cast` / `UTF8String.toLongExact`,
`stringToDate`, `stringToTimestamp`, `Decimal`), leaning lenient where Spark's grammar is wider than
what we check (time zone names): a value we accept that Spark refuses still fails at apply, a value
we refuse that Spark accepts would be a false alarm.
"""

from __future__ import annotations

import csv
import io
import re
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlglot import exp

from mesh_dagster.core.config.cache import ProjectCache, content_key
from mesh_dagster.core.config.files import UTF8_BOM, decode_text
from mesh_dagster.core.config.names import COLUMN, COLUMN_RULE
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.model import Model

# pandas.read_csv's default NA strings (pandas._libs.parsers.STR_NA_VALUES): these become NULL.
DEFAULT_NA_VALUES = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
_CACHE_NAMESPACE = "seeds-2"  # (header, inferred types)


@dataclass(frozen=True)
class SeedFile:
    """What the loader learnt about a seed CSV: its header, the hash of its bytes, and the bytes
    themselves (what a plan captures: the file may change before the apply reads it)."""

    header: list[str]
    content_hash: str  # of the bytes without a byte-order mark: an editor adding one changes no data
    types: dict[str, str] = field(default_factory=dict)  # inferred, when the model declares no columns
    data: bytes = field(default=b"", repr=False, compare=False)


def check_seed(model: Model, shown: str, cache: ProjectCache | None = None, *, check_values: bool = True) -> SeedFile:
    """The seed's header, after checking the whole file (see the module docstring)."""
    kind = model.kind.seed
    assert kind is not None  # only seed models are read from a CSV
    path = Path(kind.path or "")
    try:
        data = path.read_bytes()
    except OSError:
        raise ModelError(f"Seed file not found: {shown}", model.path, model.line_of("kind")) from None
    settings = kind.csv_settings
    key = content_key(b"\0".join([data, repr(sorted((model.columns or {}).items())).encode(),
                                  repr(sorted(settings.items())).encode(), str(check_values).encode()]))
    cached = cache.get(_CACHE_NAMESPACE, key) if cache is not None else None
    if cached is None:
        text = decode_text(data, shown, ModelError, str(settings.get("encoding", "utf-8")))
        header, types = _check_rows(model, shown, text, check_values)
        cached = (tuple(header), tuple(types.items()))
        if cache is not None:
            cache.put(_CACHE_NAMESPACE, key, cached)
    header_t, types_t = cached
    return SeedFile(list(header_t), content_key(data.removeprefix(UTF8_BOM)), types=dict(types_t), data=data)


def _check_rows(model: Model, shown: str, text: str, check_values: bool) -> tuple[list[str], dict[str, str]]:
    """The header and, for a seed without declared columns, the types its values infer."""
    kind = model.kind.seed
    assert kind is not None  # only seed models are read from a CSV
    settings = kind.csv_settings
    rows = _rows(text, settings, shown)
    first = next(rows, None)
    if first is None:
        raise ModelError("Seed CSV is empty: it needs a header row", shown, 1)
    line, header = first[0], [h.strip().lower() for h in first[1]]
    _check_header(model, shown, line, header)
    checks = _value_checks(model, shown, header) if check_values else {}
    na = _na_values(settings)
    inferred = [_Inferred() for _ in header] if model.columns is None else []
    for line, row in rows:
        if len(row) != len(header):
            raise ModelError(f"Row has {len(row)} field{'s' if len(row) != 1 else ''}, the header has {len(header)}",
                             shown, line)
        for index, check in checks.items():
            value = row[index]
            if value not in na and not check(value):
                type_text = (model.columns or {})[header[index]]
                raise ModelError(f"Value '{value}' of column {header[index]} is not a valid {type_text}", shown, line)
        for column, value in zip(inferred, row):
            column.see(value, value in na)
    return header, {name: column.type() for name, column in zip(header, inferred)}


_PANDAS_TRUE, _PANDAS_FALSE = frozenset({"True", "TRUE", "true"}), frozenset({"False", "FALSE", "false"})
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass
class _Inferred:
    """What pandas' CSV reader would make of one column, seen value by value."""

    integers: bool = True
    numbers: bool = True
    booleans: bool = True
    values: int = 0
    missing: int = 0

    def see(self, value: str, missing: bool) -> None:
        if missing:
            self.missing += 1
            return
        self.values += 1
        text = value.strip()
        integer = bool(_INTEGER.fullmatch(text))
        if integer and not _INT64[0] <= int(text) <= _INT64[1]:
            self.integers = self.numbers = False  # pandas keeps integers past 64 bits as text
        elif self.integers and not integer:
            self.integers = False
        if self.numbers and not integer and not _is_pandas_float(text):
            self.numbers = False
        if self.booleans and text not in _PANDAS_TRUE and text not in _PANDAS_FALSE:
            self.booleans = False

    def type(self) -> str:
        if self.values == 0:
            return "DOUBLE" if self.missing else "STRING"  # pandas: all-NA is float64, no rows object
        if self.booleans:
            return "STRING" if self.missing else "BOOLEAN"  # booleans with gaps stay objects
        if self.integers:
            return "DOUBLE" if self.missing else "BIGINT"
        return "DOUBLE" if self.numbers else "STRING"


def _is_pandas_float(text: str) -> bool:
    """A decimal number or an infinity (a NaN text is a missing value, counted before this)."""
    return text.lower() in _FLOAT_SPECIAL - {"nan"} or bool(_DECIMAL.fullmatch(text))


def _rows(text: str, settings: dict, shown: str) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of every row but blank lines (pandas skips those), read like pandas
    reads it: same delimiter, quoting and escaping."""
    options: dict[str, Any] = {
        "delimiter": str(settings.get("delimiter", ",")), "quotechar": str(settings.get("quotechar", '"'))
    }
    if settings.get("escapechar"):
        options["escapechar"] = str(settings["escapechar"])
    reader = csv.reader(io.StringIO(text, newline=""), **options)
    line = 1
    try:
        for row in reader:
            if row and not (len(row) == 1 and not row[0].strip()):
                yield line, row
            line = reader.line_num + 1
    except csv.Error as e:
        raise ModelError(f"Cannot read the CSV: {e}", shown, reader.line_num) from None


def _check_header(model: Model, shown: str, line: int, header: list[str]) -> None:
    seen: set[str] = set()
    for name in header:
        if not name:
            raise ModelError("The header has an empty column name", shown, line)
        if not COLUMN.fullmatch(name):
            raise ModelError(f"Column name '{name}' is not supported: {COLUMN_RULE}", shown, line)
        if name in seen:
            raise ModelError(f"Column '{name}' appears twice in the header", shown, line)
        seen.add(name)
    if model.columns is not None and set(header) != set(model.columns):
        missing = [c for c in model.columns if c not in header]
        extra = [c for c in header if c not in model.columns]
        detail = "; ".join(filter(None, [f"missing in CSV: {', '.join(missing)}" if missing else None,
                                         f"not declared in columns: {', '.join(extra)}" if extra else None]))
        raise ModelError(f"Seed CSV header does not match the columns of {model.name} ({model.where()}): {detail}",
                         shown, line)


def _na_values(settings: dict) -> frozenset[str]:
    extra = settings.get("na_values") or []
    base = DEFAULT_NA_VALUES if settings.get("keep_default_na", True) else frozenset()
    return base | frozenset(str(v) for v in extra)


def _value_checks(model: Model, shown: str, header: list[str]) -> dict[int, Callable[[str], bool]]:
    """Column index → predicate, for the declared columns whose casts can fail."""
    checks: dict[int, Callable[[str], bool]] = {}
    for index, name in enumerate(header):
        type_text = (model.columns or {}).get(name)
        if type_text is None:
            continue
        check = cast_check(type_text)
        if check is _NOT_CASTABLE:
            raise ModelError(f"Seed column {name} has type {type_text}: a CSV value cannot be cast to it "
                             "(use a scalar type)", model.path, model.line_of("columns"))
        if check is not None:
            checks[index] = check
    return checks


# ---------------------------------------------------------------------------------------------
# Spark's string casts


_SPACE = "".join(chr(c) for c in range(33))  # UTF8String.trimAll: whitespace and ASCII controls
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?|NaN|Infinity"
                    r"|0[xX][0-9a-fA-F.]+[pP][+-]?[0-9]+[fFdD]?)")
_FLOAT_SPECIAL = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}
_TRUE_FALSE = {"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"}
_DATE = re.compile(r"([+-]?[0-9]{4,7})(?:-([0-9]{1,2})(?:-([0-9]{1,2}))?)?")
_TIME = re.compile(r"([0-9]{1,2})(?::([0-9]{1,2})(?::([0-9]{1,2})(?:\.[0-9]{0,9})?)?)?")
_OFFSET = re.compile(r"(?:(?:UTC|GMT|UT)?[+-][0-9]{1,2}(?::?[0-9]{2}(?::?[0-9]{2})?)?|[zZ]|UTC|GMT|UT)")
# java.time.ZoneId.SHORT_IDS, which Spark accepts beside the tz database's region names.
_JAVA_SHORT_ZONES = frozenset("ACT AET AGT ART AST BET BST CAT CNT CST CTT EAT ECT EST HST IET IST JST MIT MST NET "
                              "NST PLT PNT PRT PST SST VST".split())
_INTEGER_BITS = {exp.DataType.Type.TINYINT: 8, exp.DataType.Type.SMALLINT: 16, exp.DataType.Type.INT: 32,
                 exp.DataType.Type.BIGINT: 64}


def _NOT_CASTABLE(value: str) -> bool:
    return False


def cast_check(type_text: str) -> Callable[[str], bool] | None:
    """A predicate telling whether Spark's ANSI `CAST(text AS type_text)` succeeds; None when every
    text casts (strings, binary); `_NOT_CASTABLE` for types no text casts to (arrays, maps, structs)."""
    data_type = exp.DataType.build(type_text, dialect="spark")
    kind = data_type.this
    if kind in _INTEGER_BITS:
        return _integer_check(_INTEGER_BITS[kind])
    if kind in (exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE):
        return _is_float
    if kind == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in data_type.expressions] or [10, 0]
        return _decimal_check(params[0], params[1] if len(params) > 1 else 0)
    if kind == exp.DataType.Type.BOOLEAN:
        return lambda value: value.strip(_SPACE).lower() in _TRUE_FALSE
    if kind == exp.DataType.Type.DATE:
        return _is_date
    if kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPTZ):
        return _is_timestamp
    if kind == exp.DataType.Type.TIMESTAMPNTZ:
        return lambda value: _is_timestamp(value, local=True)
    if kind in (exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR) and data_type.expressions:
        # The cast keeps the text; writing it into the column fails (EXCEED_LIMIT_LENGTH).
        length = int(data_type.expressions[0].this.this)
        return lambda value: len(value) <= length
    if kind in (exp.DataType.Type.ARRAY, exp.DataType.Type.MAP, exp.DataType.Type.STRUCT):
        return _NOT_CASTABLE
    return None


def _integer_check(bits: int) -> Callable[[str], bool]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: str) -> bool:
        text = value.strip(_SPACE)
        return bool(_INTEGER.fullmatch(text)) and low <= int(text) <= high

    return check


def _is_float(value: str) -> bool:
    text = value.strip(_SPACE)
    return text.lower() in _FLOAT_SPECIAL or bool(_FLOAT.fullmatch(text))


def _decimal_check(precision: int, scale: int) -> Callable[[str], bool]:
    """Spark rounds to the scale (half up) and fails when the integer digits exceed precision - scale."""

    def check(value: str) -> bool:
        text = value.strip(_SPACE)
        if not _DECIMAL.fullmatch(text):
            return False
        number = Decimal(text)
        if number and number.adjusted() + 1 > precision - scale:
            return False
        rounded = number.quantize(
            Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=Context(prec=precision + 2)
        )
        return not rounded or rounded.adjusted() + 1 <= precision - scale

    return check


def _date_part(text: str) -> tuple[re.Match, str] | None:
    """The leading `yyyy[-m[m][-d[d]]]` of a date/timestamp if it is a real date, and the rest."""
    m = _DATE.match(text)
    if m is None:
        return None
    year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    try:
        date(2000 if leap else 2001, month, day)  # Spark takes any year of 4 to 7 digits, even 0000
    except ValueError:
        return None
    return m, text[m.end():]


def _is_date(value: str) -> bool:
    text = value.strip(_SPACE)
    found = _date_part(text)
    if found is None:
        return False
    m, rest = found
    # `yyyy-mm-dd` may be followed by ' ' or 'T' and anything (a time): Spark keeps the date.
    return rest == "" or (m.group(3) is not None and rest[0] in " T")


def _is_timestamp(value: str, local: bool = False) -> bool:
    """`date[( |T)time][zone]`, or a time alone (today's date), as Spark's stringToTimestamp;
    `local` (TIMESTAMP_NTZ) takes neither a time alone nor a zone name."""
    text = value.strip(_SPACE)
    found = _date_part(text)
    if found is None:
        rest = text[1:] if text.startswith("T") else text
        return not local and _time_and_zone(rest, required=True, local=local)
    m, rest = found
    if not rest:
        return True
    return m.group(3) is not None and rest[0] in " T" and bool(rest[1:]) and _time_and_zone(rest[1:], False, local)


def _time_and_zone(text: str, required: bool, local: bool) -> bool:
    time = _TIME.match(text)
    if time is None or (required and time.group(2) is None):
        return not required and _is_zone(text.strip(), local)
    hour, minute, second = int(time.group(1)), int(time.group(2) or 0), int(time.group(3) or 0)
    return hour <= 23 and minute <= 59 and second <= 59 and _is_zone(text[time.end():].strip(), local)


def _is_zone(text: str, local: bool) -> bool:
    if not text or _OFFSET.fullmatch(text):
        return True
    return not local and (text in _JAVA_SHORT_ZONES or text in _zone_names())


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())
