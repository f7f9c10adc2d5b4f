"""Fixture rows as Spark SQL: the `SELECT` a test input's temporary view is made of.

Every cell is cast to its column's type on its own (`VALUES (CAST(1 AS INT), ...)`), so Spark
never has to find a common type across rows — a column whose first rows are NULL, or that mixes
`1` and `1.5`, still gets exactly the declared type. Plain SQL text, so it works unchanged on
classic sessions and on Spark Connect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any, cast


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def string_literal(value: str) -> str:
    """A Spark SQL string literal (Spark escapes with backslashes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fixture_columns(
    rows: Sequence[Mapping[str, Any]],
    declared: Mapping[str, str],
    known: Mapping[str, str | None] | None,
) -> dict[str, str]:
    """Ordered column -> Spark type of a fixture.

    The upstream model's own columns come first, in its order (a `SELECT *` downstream must see
    them all, NULL when the test leaves them out), then any other column the test mentions.
    Types: the test's `columns:`, else the model's known type, else inferred from the values.
    """
    names: list[str] = []
    for source in (known or {}, declared, *rows):
        for name in source:
            if name.lower() not in names:
                names.append(name.lower())
    known_lower = {k.lower(): v for k, v in (known or {}).items()}
    declared_lower = {k.lower(): v for k, v in declared.items()}
    return {
        name: declared_lower.get(name) or known_lower.get(name) or infer_type([row.get(name) for row in rows])
        for name in names
    }


def infer_type(values: Sequence[Any]) -> str:
    """The Spark type a column of YAML/CSV values most plausibly has (pandas-like: ints are BIGINT)."""
    kinds = {_kind(v) for v in values if not _is_null(v)}
    if not kinds:
        return "STRING"
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds <= {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    if kinds <= {"DATE", "TIMESTAMP"}:
        return "TIMESTAMP"
    return "STRING"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, (float, Decimal)):
        return "DOUBLE"
    if isinstance(value, datetime):
        return "TIMESTAMP"
    if isinstance(value, date):
        return "DATE"
    if isinstance(value, list):
        element = infer_type(value)
        return f"ARRAY<{element}>"
    if isinstance(value, dict):
        fields = ", ".join(f"{quote(str(k))}: {infer_type([v])}" for k, v in value.items())
        return f"STRUCT<{fields}>"
    return "STRING"


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def literal(value: Any, type_text: str | None = None) -> str:
    """A Python value from YAML/CSV as a Spark SQL expression, shaped for `type_text` if given."""
    upper = (type_text or "").upper().strip()
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # Spark reads `1.5` as a DECIMAL literal and has no literal for NaN/inf: go through text.
        return f"CAST({string_literal(repr(value))} AS DOUBLE)"
    if isinstance(value, Decimal):
        return f"CAST({string_literal(str(value))} AS DECIMAL(38, {max(-cast(int, value.as_tuple().exponent), 0)}))"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return f"TIMESTAMP {string_literal(value.isoformat(sep=' '))}"
    if isinstance(value, date):
        return f"DATE {string_literal(value.isoformat())}"
    if isinstance(value, time):
        return string_literal(value.isoformat())
    if isinstance(value, list):
        element = _inner_type(upper, "ARRAY")
        return "ARRAY(" + ", ".join(_cast(literal(v, element), element) for v in value) + ")"
    if isinstance(value, dict):
        if upper.startswith("MAP"):
            key_type, value_type = _map_types(upper)
            parts = [f"{_cast(literal(k, key_type), key_type)}, {_cast(literal(v, value_type), value_type)}"
                     for k, v in value.items()]
            return "MAP(" + ", ".join(parts) + ")"
        fields = _struct_fields(type_text or "")
        parts = [
            f"{string_literal(str(k))}, {_cast(literal(v, fields.get(str(k).lower())), fields.get(str(k).lower()))}"
            for k, v in value.items()
        ]
        return "NAMED_STRUCT(" + ", ".join(parts) + ")"
    return string_literal(str(value))


def cell(value: Any, type_text: str) -> str:
    return _cast(literal(value, type_text), type_text)


def _cast(sql: str, type_text: str | None) -> str:
    return f"CAST({sql} AS {type_text})" if type_text else sql


def _inner_type(upper: str, head: str) -> str | None:
    if upper.startswith(head + "<") and upper.endswith(">"):
        return upper[len(head) + 1 : -1].strip()
    return None


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _map_types(upper: str) -> tuple[str | None, str | None]:
    inner = _inner_type(upper, "MAP")
    parts = _split_top(inner) if inner else []
    return (parts[0], parts[1]) if len(parts) == 2 else (None, None)


def _struct_fields(type_text: str) -> dict[str, str]:
    inner = _inner_type(type_text.strip().upper(), "STRUCT")
    if inner is None:
        return {}
    original = type_text.strip()[len("STRUCT<") : -1]
    fields = {}
    for part in _split_top(original):
        name, _, field_type = part.partition(":") if ":" in part.split("<")[0] else part.partition(" ")
        fields[name.strip().strip("`").lower()] = field_type.strip()
    return fields


def fixture_select(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str]) -> str:
    """`SELECT ... FROM VALUES ...` producing `rows` with exactly `columns` (missing cells NULL)."""
    if not columns:
        raise ValueError("a fixture needs at least one column")
    names = list(columns)
    if not rows:
        projections = ", ".join(f"CAST(NULL AS {columns[n]}) AS {quote(n)}" for n in names)
        return f"SELECT {projections} WHERE FALSE"
    lowered = [{str(k).lower(): v for k, v in row.items()} for row in rows]
    values = ", ".join("(" + ", ".join(cell(row.get(n), columns[n]) for n in names) + ")" for row in lowered)
    aliases = ", ".join(quote(n) for n in names)
    return f"SELECT * FROM VALUES {values} AS fixture({aliases})"
