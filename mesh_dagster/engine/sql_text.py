"""Spark SQL text: quoted names, literals, type spellings, and the small helpers every statement
builder of engine/ shares (the adapter, the writes, the generations of a table's files).

Names are `schema.table` strings made of `[A-Za-z0-9_]`, validated and backtick-quoted before they
reach SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from mesh_dagster.core.config.names import COLUMN, COLUMN_RULE, TEMP_PREFIX
from mesh_dagster.core.errors import EngineError


def quote_identifier(name: str) -> str:
    if not COLUMN.fullmatch(name or ""):  # names of schemas and tables were held to IDENTIFIER at load
        raise EngineError(f"Invalid identifier {name!r}: {COLUMN_RULE}")
    return f"`{name}`"


def quote_name(name: str) -> str:
    """Backtick-quote a `[catalog.]schema.table` name after checking each part."""
    parts = (name or "").split(".")
    if not 1 <= len(parts) <= 3:
        raise EngineError(f"Invalid name {name!r}: expected schema.table")
    return ".".join(quote_identifier(part) for part in parts)


def sql_string(value: str) -> str:
    """A Spark SQL string literal (Spark escapes with backslashes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_schema(name: str) -> str:
    """`schema` or `catalog.schema`."""
    if name.count(".") > 1:
        raise EngineError(f"Invalid schema name {name!r}")
    return quote_name(name)


def split_name(name: str) -> tuple[str | None, str]:
    quote_name(name)
    schema, _, table = name.rpartition(".")
    return schema or None, table


def find_column(columns: Mapping[str, Any], name: str) -> str | None:
    """The key of `columns` matching `name` case-insensitively (Spark's default)."""
    lowered = name.lower()
    return next((key for key in columns if key.lower() == lowered), None)


def known_column(columns: Mapping[str, Any], name: str) -> str:
    """`find_column` for a column the caller has checked is there."""
    key = find_column(columns, name)
    if key is None:
        raise EngineError(f"Column {name} is missing from {', '.join(columns)}")
    return key


def normalized_columns(columns: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): ddl_type(kind).replace(" ", "").lower() for name, kind in columns.items()}


def ddl_type(kind: str) -> str:
    return "string" if kind.strip().lower() in ("void", "null") else kind


def strip_sql(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


def temp_name() -> str:
    return f"{TEMP_PREFIX}{uuid.uuid4().hex[:16]}"
