"""Generations of a table's files: how an unpartitioned table is rewritten without ever being empty.

Spark's INSERT OVERWRITE of an unpartitioned table deletes the table's files before its job writes
the new ones: killed in between, the table is left empty (or half-written). So a rewrite writes the
new content into a fresh directory beside the table's (`<location>__mesh_g<id>`, a *generation*;
INSERT OVERWRITE DIRECTORY, which may read the table itself), and then points the table at it with
`ALTER TABLE ... SET LOCATION`: one metastore update. Until then the table is untouched; after it,
every new query reads the new files. The previous generation stays for queries that listed its files
before the switch; it is deleted later (`delete`), at the table's next rewrite or by the janitor.

A table keeps its type (MANAGED) across switches, and DROP TABLE deletes its current location; its
default location (where it started) must go too, or Spark refuses to create a table of that name
again (`LOCATION_ALREADY_EXISTS`): `drop` does both.

Verified on Spark 4.3, classic and Spark Connect (Hive metastore on Derby).
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote, urlparse

from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.session import SparkSQLError
from mesh_dagster.engine.sql_text import TEMP_PREFIX, quote_identifier, quote_name, split_name, sql_string

if TYPE_CHECKING:
    from mesh_dagster.engine.statements import SparkStatements

_GENERATION = re.compile(r"__mesh_g[0-9a-f]{12}$")
# Formats Spark writes as plain files into a directory: the only ones a generation can hold.
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "avro", "text"})
NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "TABLE_NOT_FOUND")  # Spark's error classes for a missing table
_T = TypeVar("_T")


def unless_missing(call: Callable[[], _T]) -> _T | None:
    """`call()`, or None when the table it asks about does not exist: one round trip answers both
    whether the table exists and what was asked of it."""
    try:
        return call()
    except SparkSQLError as e:
        if e.condition in NOT_FOUND:
            return None
        raise


def base_location(location: str) -> str:
    """The location a table started at (its default), from any of its generations."""
    return _GENERATION.sub("", location.rstrip("/"))


def next_generation(location: str) -> str:
    return f"{base_location(location)}__mesh_g{uuid.uuid4().hex[:12]}"


def describe(session: SparkStatements, table: str) -> tuple[str, str] | None:
    """(location, provider) of a table; None when it does not exist."""
    rows = describe_rows(session, table)
    return located(rows) if rows is not None else None


def describe_rows(session: SparkStatements, table: str) -> list[tuple] | None:
    """The rows of DESCRIBE TABLE EXTENDED (columns, partitioning, location, provider: one round
    trip answers all of them); None when the table does not exist."""
    return unless_missing(lambda: session.fetchall(f"DESCRIBE TABLE EXTENDED {quote_name(table)}"))


def located(rows: list[tuple]) -> tuple[str, str]:
    """(location, provider) from DESCRIBE TABLE EXTENDED's rows."""
    info = {str(r[0]).strip().lower(): str(r[1] or "").strip() for r in rows}
    return info.get("location", ""), (info.get("provider") or "parquet").lower()


def write(session: SparkStatements, location: str, provider: str, select_sql: str) -> None:
    """Write the query's rows as a new generation (a directory no table points at yet)."""
    session.execute(f"INSERT OVERWRITE DIRECTORY {sql_string(location)} USING {quote_identifier(provider)}\n"
                   f"{select_sql}")


def switch(session: SparkStatements, table: str, location: str) -> None:
    """Point the table at `location` (one metastore update). No refresh follows: Spark's ALTER TABLE
    ... SET LOCATION forgets what this session cached of the table itself, so the session's next
    query lists the new generation's files (tests/spark/test_engine_write_path.py reads right after
    a switch); other sessions refresh before they write (writes.py), as they always had to."""
    session.execute(f"ALTER TABLE {quote_name(table)} SET LOCATION {sql_string(location)}")


def delete(session: SparkStatements, locations: list[str]) -> None:
    """Delete directories of generations nobody points at any more.

    A classic session deletes through Hadoop's file system API (any file system Spark reaches). A
    client of the project's warm server deletes `file:` directories itself: they are this machine's.
    Any other Spark Connect client has no file system at hand: it creates a database at the directory
    and drops it with CASCADE, which makes the metastore delete the database's directory with all it
    holds (Spark SQL only; two statements, where a borrowed managed table took five)."""
    if not locations:
        return
    paths = [p for x in locations if (p := _local_path(x)) is not None] if session.files_here else []
    if not session.is_classic and len(paths) == len(locations):
        for location, path in zip(locations, paths):
            _remove_tree(path, location)
        return
    if session.is_classic:
        with session.errors(f"Cannot delete {', '.join(locations)}"):
            jvm, context = session.spark._jvm, session.spark._jsc
            assert jvm is not None and context is not None, "a classic session has a JVM"
            conf = context.hadoopConfiguration()
            for location in locations:
                path = jvm.org.apache.hadoop.fs.Path(location)
                path.getFileSystem(conf).delete(path, True)
        return
    for location in locations:
        database = quote_identifier(f"{TEMP_PREFIX}delete_{uuid.uuid4().hex[:12]}")
        session.execute(f"CREATE DATABASE {database} LOCATION {sql_string(location)}")
        session.execute(f"DROP DATABASE IF EXISTS {database} CASCADE")


def _local_path(location: str) -> Path | None:
    """The directory a `file:` location (or a bare absolute path) names; None for another scheme."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") and not parsed.netloc and parsed.path.startswith("/"):
        return Path(unquote(parsed.path))
    return None


def _remove_tree(path: Path, location: str) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass  # deleted already (a rerun after a crash), as Hadoop's delete of a missing path
    except OSError as e:
        raise EngineError(f"Cannot delete {location}: {e.strerror or e}") from e


def drop(session: SparkStatements, table: str) -> None:
    """DROP TABLE, and delete its default location when the table had moved away from it."""
    described = None if split_name(table)[1].startswith(TEMP_PREFIX) else describe(session, table)
    session.execute(f"DROP TABLE IF EXISTS {quote_name(table)}")
    if described is not None and base_location(described[0]) != described[0].rstrip("/"):
        delete(session, [base_location(described[0])])


def clear_default_location(session: SparkStatements, table: str) -> None:
    """Delete what a crash left at the default location of a table that does not exist (Spark
    refuses to create a managed table over a non-empty directory)."""
    schema, name = split_name(table)
    rows = session.fetchall(f"DESCRIBE SCHEMA EXTENDED {quote_identifier(schema or 'default')}")
    info = {str(r[0]).strip().lower(): str(r[1] or "").strip() for r in rows}
    root = info.get("location", "").rstrip("/")
    if root:
        delete(session, [f"{root}/{name.lower()}"])
