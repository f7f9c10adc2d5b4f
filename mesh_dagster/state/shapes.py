"""What mesh knows of its physical tables' shapes (`mesh_table_shapes`, schema v7): each table's
columns as mesh last left them, and the last analysis of the query written into it, keyed by the
digest of that analysis' inputs (execution/evaluate/shapes.py decides what the inputs are).

Why in the state store: the daily run would otherwise ask Spark to analyse every model's query
again (its migration check, a full rewrite's columns), although nothing it reads changed since the
previous run; what the previous run learned, every process (the CLI, Dagster's runs) can read.

The store's `shapes` part, over its shared connection; every method is one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import delete, select

from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, now_ms

Columns = Mapping[str, str]


@dataclass(frozen=True)
class TableShape:
    """One table: its `columns` (None: unknown), and the `output` columns of its query's analysis
    under the inputs digested as `inputs` (both None: no analysis remembered)."""

    table: str
    columns: Columns | None = None
    inputs: str | None = None
    output: Columns | None = None


def _dump(columns: Columns | None) -> str | None:
    return None if columns is None else json.dumps(list(columns.items()))


def _load(text: str | None) -> dict[str, str] | None:
    return None if text is None else {str(name): str(kind) for name, kind in json.loads(text)}


class TableShapes:
    """The table shapes of one state store (`StateStore.shapes`)."""

    def __init__(self, db: Database):
        self._db = db

    def table_shapes(self, tables: Iterable[str]) -> dict[str, TableShape]:
        """The shapes known of `tables` (those with none are left out), in one read."""
        wanted = sorted(set(tables))
        if not wanted:
            return {}
        table = schema.table_shapes
        with self._db.read() as conn:
            rows = conn.execute(select(table).where(table.c.table_name.in_(wanted))).all()
        return {r.table_name: TableShape(r.table_name, _load(r.columns), r.inputs, _load(r.output)) for r in rows}

    def remember(self, shape: TableShape) -> None:
        """Keep `shape` for its table (it replaces what was known)."""
        with self._db.write("remember a table's columns in") as conn:
            self._db.upsert(conn, schema.table_shapes,
                            {"table_name": shape.table, "columns": _dump(shape.columns), "inputs": shape.inputs,
                             "output": _dump(shape.output), "updated_ts": now_ms()}, ["table_name"])

    def forget(self, tables: Iterable[str]) -> None:
        """Know nothing of `tables` any more: before a write that may change their columns, and
        once they are dropped."""
        names = sorted(set(tables))
        if not names:
            return
        with self._db.write("forget tables' columns in") as conn:
            conn.execute(delete(schema.table_shapes).where(schema.table_shapes.c.table_name.in_(names)))
