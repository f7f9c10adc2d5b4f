"""Which model and column names mesh_dagster accepts, decided once, at load time.

A name becomes part of Hive metastore object names (`mesh__<schema>.<schema>__<table>__<version>`,
views `<schema>__<env>.<table>`) and of the SQL we send to Spark. The Hive metastore accepts
letters, digits and underscores only (its `validateName`), stores names in lower case, and keeps
database names in a VARCHAR(128) and table names in a VARCHAR(256) (package.jdo of
hive-metastore 2.3). The engine quotes exactly these identifiers (`quote_identifier`). Checking
the same rule here means a name that cannot be created is refused with its file and line before
any table exists, instead of failing halfway through an apply.
"""

from __future__ import annotations

import re

IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# The Hive metastore stores schema names in DBS.NAME VARCHAR(128) (hive-metastore 2.3's
# package.jdo, the schema Spark's embedded Derby and a Postgres-backed metastore both use); a
# 129-character name fails inside CREATE SCHEMA, i.e. in the middle of an apply.
MAX_DATABASE_NAME = 128
MAX_TABLE_NAME = 256  # Hive metastore TBLS.TBL_NAME
PHYSICAL_SCHEMA_PREFIX = "mesh__"
_VERSION_DIGITS = 10  # versions are unsigned crc32 values written in decimal
_QUOTES = "`\"'"


def unquote(part: str) -> str:
    part = part.strip()
    if len(part) >= 2 and part[0] == part[-1] and part[0] in _QUOTES:
        return part[1:-1]
    return part


def check_identifier(name: str, what: str = "Column name") -> str:
    """`name` without quotes, lower case; ValueError when Spark or the metastore cannot hold it."""
    bare = unquote(name)
    if not IDENTIFIER.fullmatch(bare):
        raise ValueError(f"{what} '{bare}' is not supported: use letters, digits and underscores only")
    return bare.lower()


def check_model_name(text: str) -> str:
    """`schema.table` (or a bare `table`, in schema `default`), lower case, checked part by part."""
    parts = [p for p in _split_name(text)]
    if not 1 <= len(parts) <= 2 or any(not p.strip() for p in parts):
        raise ValueError(f"Model name '{text.strip()}' is not supported: write it as schema.table "
                         "(catalogs are not supported; no empty parts)")
    schema, table = (["default"] + parts)[-2:]
    schema = check_identifier(schema, "Model name part")
    table = check_identifier(table, "Model name part")
    longest_schema = MAX_DATABASE_NAME - len(PHYSICAL_SCHEMA_PREFIX)
    if len(schema) > longest_schema:
        raise ValueError(f"Schema name '{schema}' is too long: at most {longest_schema} characters "
                         "(the metastore limits database names to 128)")
    longest_table = MAX_TABLE_NAME - len("____") - _VERSION_DIGITS
    if len(schema) + len(table) > longest_table:
        raise ValueError(f"Model name '{schema}.{table}' is too long: schema and table together at most "
                         f"{longest_table} characters (the metastore limits table names to 256)")
    return f"{schema}.{table}" if len(parts) == 2 else table


def _split_name(text: str) -> list[str]:
    """Split on dots outside quotes: "`a.b`.c" is two parts, the first of which is refused later."""
    parts, current, quote = [], "", None
    for ch in text.strip():
        if quote:
            current += ch
            if ch == quote:
                quote = None
        elif ch in _QUOTES:
            quote = ch
            current += ch
        elif ch == ".":
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts
