"""The Spark engine: everything mesh_dagster needs from Spark, on one session, as three parts.

Each part is an object of one concern, which a reader can take alone, and callers reach the part
they need (`engine.writes.upsert(...)`, `engine.catalog.columns(...)`, `engine.session.execute(...)`):

- `session` (statements.py, `SparkStatements`): statements, the SparkSession Python models compute
  with, its settings and temporary views (Python models' frames, frames.py), the mapping of Spark's
  failures to `EngineError` and the SQL trace;
- `catalog` (catalog.py, `SparkCatalog`, given the session): schemas, tables and views, their DDL
  and what they hold (columns, partitions, locations);
- `writes` (writes.py, `TableWrites`, given the catalog): every way a table's rows change, seeds
  and schema migrations included, kill-safely, on generations of its files (generations.py) or by
  swapping tables (swaps.py), and finishing what a killed process left.

The parts are composed, not stacked as base classes, and nothing here forwards to them: the
execution side's `Engine` Protocol (execution/ports.py) names the same three parts, which the
in-memory engines of the tests implement too.

Writes map query output to table columns by name (with a cast to the table's type), never by
position: INSERT resolves columns positionally, so a reordered SELECT would otherwise silently
shuffle values between columns of compatible types.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from mesh_dagster.core.config.names import TEMP_PREFIX as TEMP_PREFIX  # re-exported: part of this module's API
from mesh_dagster.engine.catalog import SparkCatalog
from mesh_dagster.engine.catalog import type_sql as type_sql  # re-exported: part of this module's API
from mesh_dagster.engine.sql_text import quote_identifier, quote_name, sql_string
from mesh_dagster.engine.statements import SQL_TRACE_ENV as SQL_TRACE_ENV  # re-exported: part of this module's API
from mesh_dagster.engine.statements import SparkStatements
from mesh_dagster.engine.writes import TableWrites

__all__ = ["SQL_TRACE_ENV", "TEMP_PREFIX", "SparkEngine", "quote_identifier", "quote_name", "sql_string", "type_sql"]


class SparkEngine:
    """The engine on one SparkSession: its `session`, `catalog` and `writes` (see the module's docstring)."""

    def __init__(self, spark: SparkSession, *, files_here: bool = False):
        self.session = SparkStatements(spark, files_here=files_here)
        self.catalog = SparkCatalog(self.session)
        self.writes = TableWrites(self.catalog)
