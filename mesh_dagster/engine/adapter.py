"""The Spark engine: everything mesh_dagster needs from Spark, on one session.

It is built from parts, one concern each, so each can be read alone:

- the session (statements.py, `SparkStatements`): statements, the session's cache, the mapping of
  Spark's failures to `EngineError` and the SQL trace;
- the catalog (catalog.py, `SparkCatalog`, on the session): schemas, tables and views, their DDL
  and what they hold (columns, partitions, locations);
- the writes (writes.py, `TableWrites`, which this engine holds): every way a table's rows
  change, kill-safely, on generations of its files (generations.py);
- Python models' frames and seeds' rows on their way into Spark (frames.py).

`SparkEngine` is the catalog, with the write and frame operations of `execution/engine.py`'s
`Engine` on top. `Engine` names every operation flat (`engine.upsert`, `engine.columns`), which the
in-memory engines of the tests implement too; so the engine keeps that flat surface, and the
catalog and session come in as base classes rather than as attributes to reach through.

Writes map query output to table columns by name (with a cast to the table's type), never by
position: INSERT resolves columns positionally, so a reordered SELECT would otherwise silently
shuffle values between columns of compatible types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from mesh_dagster.core.config.names import TEMP_PREFIX as TEMP_PREFIX  # re-exported: part of this module's API
from mesh_dagster.core.models.merge import Upsert
from mesh_dagster.engine import frames as python_frames
from mesh_dagster.engine.catalog import SparkCatalog
from mesh_dagster.engine.catalog import type_sql as type_sql  # re-exported: part of this module's API
from mesh_dagster.engine.sql_text import (
    ddl_type,
    known_column,
    quote_identifier,
    quote_name,
    sql_string,
)
from mesh_dagster.engine.statements import SQL_TRACE_ENV as SQL_TRACE_ENV  # re-exported: part of this module's API
from mesh_dagster.engine.swaps import Journal, Layout
from mesh_dagster.engine.writes import TableWrites

__all__ = ["SQL_TRACE_ENV", "TEMP_PREFIX", "SparkEngine", "quote_identifier", "quote_name", "sql_string", "type_sql"]


class SparkEngine(SparkCatalog):
    """The operations the rest of mesh_dagster needs from Spark, on one session (see the module's
    docstring for its parts)."""

    def __init__(self, spark: SparkSession):
        super().__init__(spark)
        self._writes = TableWrites(self)

    # -- Python models and seeds (frames.py) ---------------------------------------------------

    def register_frames(self, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
        """One temporary view over what a Python model returned (PySpark or pandas DataFrames;
        nothing is collected to the driver); its name. The caller drops it (`drop_temp_view`)."""
        return python_frames.register_frames(self, frames, columns)

    def load_seed(self, table: str, df: pd.DataFrame, columns: Mapping[str, str],
                  comments: Mapping[str, str] | None = None, *, journal: Journal | None = None,
                  batch_size: int | None = None) -> None:
        """(Re)create `table` with exactly `columns` and fill it from the frame, casting in Spark.

        Values travel as booleans, 64-bit integers, doubles or text and are cast to the declared
        types by Spark, so `2020-01-01` becomes a DATE under Spark's rules, not pandas'.
        """
        python_frames.check_seed_columns(table, df, columns)
        names = list(columns)
        view = python_frames.seed_view(self, table, df, names, batch_size)
        source = {name: f"c{i}" for i, name in enumerate(names)}

        def rows(table_columns: dict[str, str]) -> str:
            select = ", ".join(f"CAST({quote_identifier(source[known_column(columns, name)])} AS {ddl_type(kind)})"
                               f" AS {quote_identifier(name)}" for name, kind in table_columns.items())
            return f"SELECT {select} FROM {quote_identifier(view)}"

        try:
            self._writes.replace_whole(table, Layout(dict(columns), (), "parquet", comments), rows, journal=journal)
        finally:
            self.drop_temp_view(view)

    # -- schema migration of a kept table (swaps.py) ---------------------------------------------

    def retype_table(self, table: str, columns: Mapping[str, str], *, journal: Journal | None = None) -> None:
        self._writes.retype_table(table, columns, journal=journal)

    # -- writes (writes.py) ----------------------------------------------------------------------

    def replace_table(self, table: str, query_sql: str, partitioned_by: Sequence[str] = (),
                      storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                      comments: Mapping[str, str] | None = None, *, journal: Journal | None = None,
                      reads_self: bool = False) -> None:
        self._writes.replace_table(table, query_sql, partitioned_by, storage_format, columns, comments,
                                   journal=journal, reads_self=reads_self)

    def insert_overwrite_interval(self, table: str, query_sql: str, time_column: str, low_sql: str, high_sql: str,
                                  *, journal: Journal | None = None, reads_self: bool = False,
                                  columns: Mapping[str, str] | None = None) -> None:
        self._writes.insert_overwrite_interval(table, query_sql, time_column, low_sql, high_sql, journal=journal,
                                               reads_self=reads_self, columns=columns)

    def rewrite_table(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        self._writes.rewrite_table(table, query_sql, journal=journal)

    def upsert(self, table: str, query_sql: str, upsert: Upsert, duplicates_shown: int = 5, *,
               journal: Journal | None = None) -> list[tuple]:
        return self._writes.upsert(table, query_sql, upsert, duplicates_shown, journal=journal)

    def overwrite_partitions(self, table: str, query_sql: str, *, journal: Journal | None = None,
                             reads_self: bool = False) -> None:
        self._writes.overwrite_partitions(table, query_sql, journal=journal, reads_self=reads_self)

    def append(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        self._writes.append(table, query_sql, journal=journal)

    def stage(self, table: str, query_sql: str) -> str:
        return self._writes.stage(table, query_sql)

    def finish_write(self, payload: dict[str, Any]) -> bool:
        return self._writes.finish(payload)

    def discard_write(self, payload: dict[str, Any]) -> None:
        self._writes.discard(payload)
