"""The journal of writes: what a write under way needs to be finished or undone after a crash.

A rewrite that cannot simply be computed again (it reads the table it replaces, or appends) leaves a
*pending* row before its destructive step: the engine's description of how to finish it exactly
(`PendingWrite.payload`). The row is deleted in the very transaction that records the write's
interval, so a crash anywhere leaves either a recorded interval or a pending row, never a gap in
between. Former locations of a table's files (generations a rewrite switched away from) are kept as
*retired* rows until nobody can read them any more.

`Journal` is the store's part for it (`StateStore.journal`): each of its methods is one transaction
of the shared connection, and the functions below run inside those transactions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection, and_, delete, insert, or_, select

from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, now_ms
from mesh_dagster.state.intervals import insert_intervals
from mesh_dagster.state.locks import Lease, hold

RETIRED = "retired"


class PendingWrite(BaseModel):
    """A write whose destructive step may have started, and the interval it is for."""

    table: str
    operation: str  # "switch" | "overwrite" | "append": how the engine finishes it (its payload says)
    name: str
    version: str
    start: int
    end: int
    payload: dict[str, Any] = Field(default_factory=dict)
    owner: str = ""
    created_ts: int = 0

    @property
    def interval_key(self) -> tuple[str, str]:
        return self.name, self.version


def put(conn: Connection, write: PendingWrite, now_ms: int) -> None:
    """Make `write` the table's pending write (replacing an earlier state of the same write)."""
    table = schema.pending_writes
    conn.execute(delete(table).where(table.c.table_name == write.table, table.c.operation != RETIRED))
    conn.execute(insert(table).values(
        table_name=write.table, operation=write.operation, name=write.name, version=write.version,
        start_ts=write.start, end_ts=write.end, location=write.payload.get("location"),
        payload=json.dumps(write.payload, sort_keys=True), owner=write.owner, created_ts=write.created_ts or now_ms))


def pending(conn: Connection, table_name: str | None = None) -> list[PendingWrite]:
    """The pending writes (of one table: at most one), oldest first."""
    table = schema.pending_writes
    query = select(table).where(table.c.operation != RETIRED).order_by(table.c.id)
    if table_name is not None:
        query = query.where(table.c.table_name == table_name)
    return [_pending(row) for row in conn.execute(query)]


def finish(conn: Connection, table_name: str, interval: tuple[str, str, int, int] | None, retire: Iterable[str],
           now_ms: int, owner: str) -> None:
    """End the table's pending write: record `interval` (if any) and retire `retire` with it."""
    table = schema.pending_writes
    conn.execute(delete(table).where(table.c.table_name == table_name, table.c.operation != RETIRED))
    if interval is not None:
        name, version, start, end = interval
        conn.execute(insert(schema.intervals).values(name=name, version=version, start_ts=start, end_ts=end,
                                                     is_removed=False, created_ts=now_ms))
    rows = [{"table_name": table_name, "operation": RETIRED, "location": location, "owner": owner,
             "created_ts": now_ms} for location in dict.fromkeys(retire)]
    if rows:
        conn.execute(insert(table), rows)


def retired(conn: Connection, table_name: str | None = None) -> list[tuple[str, str]]:
    """(table, location) of retired generations, oldest first."""
    table = schema.pending_writes
    query = select(table.c.table_name, table.c.location).where(table.c.operation == RETIRED).order_by(table.c.id)
    if table_name is not None:
        query = query.where(table.c.table_name == table_name)
    return [(row.table_name, row.location) for row in conn.execute(query)]


def forget_retired(conn: Connection, items: Iterable[tuple[str, str]]) -> None:
    """Forget retired generations once their files are deleted."""
    table = schema.pending_writes
    pairs = list(dict.fromkeys(items))
    if pairs:
        conn.execute(delete(table).where(table.c.operation == RETIRED, or_(*(
            and_(table.c.table_name == name, table.c.location == location) for name, location in pairs))))


def _pending(row: Any) -> PendingWrite:
    return PendingWrite(table=row.table_name, operation=row.operation, name=row.name, version=row.version,
                        start=row.start_ts, end=row.end_ts, payload=json.loads(row.payload or "{}"),
                        owner=row.owner, created_ts=row.created_ts)


class Journal:
    """The journal of writes of one state store (`StateStore.journal`)."""

    def __init__(self, db: Database):
        self._db = db

    def journal_write(self, write: PendingWrite, lease: Lease | None = None,
                      forget: Iterable[tuple[str, str, int, int]] = ()) -> None:
        """Make `write` its table's pending write, before its destructive step; with `lease`, only
        while that lock (the table's) is still held. `forget`: intervals the write will no longer
        hold (a history about to be rebuilt), forgotten in the same transaction."""
        forget = list(forget)
        with self._db.write() as conn:
            if lease is not None:
                hold(conn, lease)
            put(conn, write, now_ms())
            if forget:
                insert_intervals(conn, forget, removed=True)

    def pending_write(self, table: str) -> PendingWrite | None:
        with self._db.read() as conn:
            found = pending(conn, table)
        return found[0] if found else None

    def pending_writes(self) -> list[PendingWrite]:
        with self._db.read() as conn:
            return pending(conn)

    def finish_write(self, table: str, interval: tuple[str, str, int, int] | None, retire: Iterable[str] = (),
                     lease: Lease | None = None) -> None:
        """In one transaction: record `interval` (if any), end `table`'s pending write and retire the
        locations `retire` (a generation the write switched away from)."""
        if interval is not None and not interval[2] < interval[3]:
            raise ValueError(f"Invalid interval for {interval[0]}: start {interval[2]} is not before end {interval[3]}")
        with self._db.write() as conn:
            if lease is not None:
                hold(conn, lease)
            finish(conn, table, interval, retire, now_ms(), lease.owner if lease is not None else "mesh")

    def retired_locations(self, table: str | None = None) -> list[tuple[str, str]]:
        """(table, location) of the generations rewrites switched away from, oldest first."""
        with self._db.read() as conn:
            return retired(conn, table)

    def forget_retired(self, items: Iterable[tuple[str, str]]) -> None:
        with self._db.write() as conn:
            forget_retired(conn, items)
