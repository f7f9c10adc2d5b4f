"""Swaps: how a table gets a new layout (columns, partitioning) without ever being empty.

Spark cannot drop or retype a column of a Parquet table in place, nor change its partitioning, and
a Hive table has no CREATE OR REPLACE. So the table is built anew under a staging name
(`__mesh_tmp_...`, beside it), with its new layout and all of its rows (its own rows cast to the new
types for a schema migration, a model's query output for a full rewrite), while the table keeps
serving the old ones. Then the journal hears of it, the table is dropped and the staging table is
renamed to the table's name (`ALTER TABLE ... RENAME TO`: the metastore moves the staged files,
partitions included, to the table's own location). Between the drop and the rename the table is
absent, never empty nor half-written, and every row is in the staging table, which the journal
names: a process killed there leaves what the next one needs to finish the rename (`finish`), and
the janitor never drops a staging table the journal still needs.

The steps, each a kill point (kill_points.py): `staged` (the staging table is complete, nothing
journaled: it is the janitor's), `journaled` (the table is untouched), `dropped` (the table is gone,
its rows are staged), `committed` (renamed; the journal hears of it once more).

Hive's metastore records a rename before it moves the directory: a process dying inside that one
call leaves the table at an empty location. The payload notes the staged row count, so finishing
refuses such a table (naming the staged files) instead of taking it for complete.

Verified on Spark 4.3 (Hive metastore on Derby; classic and Spark Connect run the same catalog code).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import generations
from mesh_dagster.engine.kill_points import kill_point
from mesh_dagster.engine.session import SparkSQLError
from mesh_dagster.engine.sql_text import TEMP_PREFIX, quote_name, split_name, temp_name

if TYPE_CHECKING:
    from mesh_dagster.engine.catalog import SparkCatalog

Journal = Callable[[dict[str, Any]], None]
# The rows of the new table, given its columns (name -> type, in table order): a SELECT of them.
Rows = Callable[[dict[str, str]], str]


class Layout(NamedTuple):
    """What a table is made of besides its rows: its columns (name -> Spark type), its partition
    columns, its storage format and its column comments."""

    columns: Mapping[str, str]
    partitioned_by: Sequence[str] = ()
    storage_format: str = "parquet"
    comments: Mapping[str, str] | None = None


def staging_name(table: str) -> str:
    """A new name beside `table` for rows on their way into it (`__mesh_tmp_...`): the janitor drops
    such a table unless the journal still needs it."""
    schema, name = split_name(table)
    return f"{schema + '.' if schema else ''}{TEMP_PREFIX}{name[:40]}_{temp_name()[-12:]}"


def swap_in(catalog: SparkCatalog, table: str, layout: Layout, rows: Rows, journal: Journal | None, *,
            completes_write: bool) -> None:
    """Replace `table` by a table of `layout` holding `rows`, kill-safely (see the module's docstring).

    `completes_write`: the rows are the output of the write in progress (a full rewrite), so a
    resumed swap completes it; otherwise (a schema migration before a write) the write is still to
    be made once the swap is finished."""
    staging = staging_name(table)
    catalog.create_table(staging, None, layout.partitioned_by, layout.storage_format, layout.columns,
                        layout.comments)
    payload: dict[str, Any] = {"operation": "swap", "table": table, "staging": [staging],
                               "completes_write": completes_write, "committed": False}
    try:
        catalog.session.execute(f"INSERT INTO {quote_name(staging)} {rows(catalog.columns(staging))}")
        payload["rows"] = _count(catalog, staging)
        kill_point("staged", table)
        if journal is not None:
            journal(payload)
    except BaseException:
        catalog.drop_table(staging)  # nobody knows of it: the table is untouched
        raise
    kill_point("journaled", table)
    _replace_by(catalog, table, staging)
    kill_point("committed", table)
    if journal is not None:  # a resumed process must not count rows written after the swap
        journal({**payload, "committed": True})


def finish(catalog: SparkCatalog, payload: dict[str, Any]) -> bool:
    """Complete a journaled swap (idempotent); whether it completed the write it was part of. False
    too when the table and its staged rows are both gone (dropped by hand): nothing is left to finish,
    and the table is missing (execution/intervals/physical_check.py says so before anything writes it)."""
    table, staging = payload["table"], payload["staging"][0]
    if catalog.table_exists(staging):  # not renamed yet: the table, if it is still there, is the one replaced
        _replace_by(catalog, table, staging)
    elif not catalog.table_exists(table):
        return False
    elif not payload.get("committed"):
        _check_renamed(catalog, table, staging, payload["rows"])
    return bool(payload["completes_write"])


def _replace_by(catalog: SparkCatalog, table: str, staging: str) -> None:
    catalog.drop_table(table)
    kill_point("dropped", table)
    rename = f"ALTER TABLE {quote_name(staging)} RENAME TO {quote_name(table)}"
    try:
        catalog.session.execute(rename)
    except SparkSQLError as e:
        if e.condition != "LOCATION_ALREADY_EXISTS":
            raise
        # Files of the dropped table whose deletion a crash interrupted (generations.drop): no table
        # owns them, and Spark refuses to give the name to a managed table over them.
        generations.clear_default_location(catalog.session, table)
        catalog.session.execute(rename)
    catalog.session.refresh(table)


def _check_renamed(catalog: SparkCatalog, table: str, staging: str, rows: int) -> None:
    """The staging table was renamed, unless a crash interrupted the rename inside the metastore:
    the table then lacks the staged rows."""
    found = _count(catalog, table)
    if found != rows:
        raise EngineError(
            f"Cannot finish the interrupted rewrite of {table}: it was being renamed from {staging} when the process "
            f"died, and holds {found} of the {rows} staged rows (the others may still be in the staging table's "
            f"directory). Nothing more was written: restore them, or restate the model to rebuild it.")


def _count(catalog: SparkCatalog, table: str) -> int:
    return int(catalog.session.fetchall(f"SELECT COUNT(*) FROM {quote_name(table)}")[0][0])
