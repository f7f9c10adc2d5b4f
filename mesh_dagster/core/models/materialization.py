"""Custom materializations: how a CUSTOM model's table is written, in the user's own Python.

A model says `kind CUSTOM (materialization 'my_mat', materialization_properties (k = 'v'))`, and
the project's `materializations/*.py` defines the class of that NAME:

    from mesh_dagster import Materialization

    class Upsert(Materialization):
        NAME = "my_mat"

        def insert(self, table, query, context):
            context.execute(f"INSERT INTO {table} {query}")

`insert` is called once per batch of intervals, in order (a CUSTOM model builds on its table's
history: its batches never run side by side, and restating any part of it rebuilds all of it),
with the model's physical table, its query rendered for the batch (Spark SQL), and a context
(`MaterializationContext`). `create` makes the table before the first insert; by default it is the
query's columns (and the model's partitioning and storage format), empty; a subclass overriding
it must keep those columns (a kept table is migrated to the query's columns as any other is).

This is mesh_dagster's own API, small on purpose: SQLMesh's `CustomMaterialization` subclasses
work on its engine adapters, which mesh_dagster does not have, and are refused (by name, at the
line of their import). The class's code, and what it uses, is stored with each snapshot of the
models using it, so a change to it is a change of those models (a new version), and an evaluation
runs the code it was planned with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Protocol


class MaterializationContext(Protocol):
    """What a materialization may use: the batch, the model's properties and the Spark session."""

    model_name: str  # the model (`schema.table`)
    start: datetime  # the batch's first instant
    end: datetime  # its last instant (inclusive, as a Python model's `end`)
    execution_time: datetime
    properties: dict[str, Any]  # `materialization_properties`: strings, numbers, booleans, lists, or SQL text

    @property
    def spark(self) -> Any:
        """The SparkSession (for DataFrame work)."""

    def execute(self, sql: str) -> None:
        """Run a Spark SQL statement."""

    def fetchall(self, sql: str) -> list[tuple]: ...

    def fetchdf(self, sql: str) -> Any:
        """The query's rows as a pandas DataFrame."""

    def table_exists(self, name: str) -> bool: ...

    def columns(self, name: str) -> dict[str, str]:
        """A table's columns and their Spark types."""

    def create_table(self, table: str, query: str) -> None:
        """Create `table` (if missing) with the query's columns, the model's partitioning and storage format."""

    def replace(self, table: str, query: str) -> None:
        """Make the table hold exactly the query's rows (kill-safe)."""

    def append(self, table: str, query: str) -> None:
        """Add the query's rows to the table."""

    def overwrite_partitions(self, table: str, query: str) -> None:
        """Replace the partitions the query's rows fall in (the whole table when it has none)."""


class Materialization:
    """The base class of custom materializations: subclass it in `materializations/*.py`, set
    `NAME` to what models write in `materialization '...'`, and implement `insert`."""

    NAME: ClassVar[str] = ""

    def create(self, table: str, query: str, context: MaterializationContext) -> None:
        """Create the model's table before its first batch (the query is only analysed)."""
        context.create_table(table, query)

    def insert(self, table: str, query: str, context: MaterializationContext) -> None:
        """Write one batch: `query` computes its rows."""
        raise NotImplementedError(f"{type(self).__name__} must implement insert(self, table, query, context)")
