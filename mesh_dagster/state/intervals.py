"""Processed intervals in the state store (`mesh_intervals`): an append-only log per model version.

Each row adds or removes `[start_ts, end_ts)` (epoch ms) for a `(name, version)`; the intervals a
version holds are the log replayed in order, so concurrent writers only ever append.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, insert, select, tuple_

from mesh_dagster.core.time.intervals import Interval, merge_intervals, subtract_intervals
from mesh_dagster.state import schema
from mesh_dagster.state.connection import BATCH_SIZE, Database, chunks, now_ms

IntervalKey = tuple[str, str]


class Intervals:
    """The interval log of one state store (`StateStore.intervals`)."""

    def __init__(self, db: Database):
        self._db = db

    def add_interval(self, name: str, version: str, start_ts: int, end_ts: int) -> None:
        self.add_intervals([(name, version, start_ts, end_ts)])

    def add_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Record processed intervals `[start_ts, end_ts)` (epoch ms), all or none."""
        self._append_intervals(items, removed=False)

    def remove_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Forget processed intervals (restatement), all or none."""
        self._append_intervals(items, removed=True)

    def get_intervals(self, keys: Iterable[IntervalKey]) -> dict[IntervalKey, list[Interval]]:
        """Processed intervals per `(name, version)`, merged and sorted; every key is present."""
        logs: dict[IntervalKey, list[tuple[int, int, bool]]] = {(n, v): [] for n, v in keys}
        table = schema.intervals
        key = tuple_(table.c.name, table.c.version)
        columns = (table.c.name, table.c.version, table.c.start_ts, table.c.end_ts, table.c.is_removed)
        with self._db.read() as conn:
            for chunk in chunks(list(logs), BATCH_SIZE):
                query = select(*columns).where(key.in_(chunk)).order_by(table.c.id)
                for name, version, start, end, removed in conn.execute(query):
                    logs[(name, version)].append((start, end, bool(removed)))
        return {k: _replay(log) for k, log in logs.items()}

    def _append_intervals(self, items: Iterable[tuple[str, str, int, int]], removed: bool) -> None:
        rows = _interval_rows(items, removed, now_ms())
        if not rows:
            return
        with self._db.write() as conn:
            for chunk in chunks(rows, 1000):
                conn.execute(insert(schema.intervals), chunk)


def insert_intervals(conn: Connection, items: Iterable[tuple[str, str, int, int]], removed: bool) -> None:
    """Append to the interval log inside a transaction the caller holds (the journal's)."""
    for chunk in chunks(_interval_rows(items, removed, now_ms()), 1000):
        conn.execute(insert(schema.intervals), chunk)


def _interval_rows(items: Iterable[tuple[str, str, int, int]], removed: bool, ts: int) -> list[dict[str, Any]]:
    rows = []
    for name, version, start, end in items:
        if not start < end:
            raise ValueError(f"Invalid interval for {name} (version {version}): start {start} is not before end {end}")
        rows.append({"name": name, "version": version, "start_ts": start, "end_ts": end, "is_removed": removed,
                     "created_ts": ts})
    return rows


# ---------------------------------------------------------------------- interval arithmetic


def _replay(log: list[tuple[int, int, bool]]) -> list[Interval]:
    """Apply an add/remove log in order: a removal only cancels what was added before it."""
    current: list[Interval] = []
    added: list[Interval] = []  # consecutive adds are merged in one go
    for start, end, removed in log:
        if removed:
            current = subtract_intervals([*current, *added], [(start, end)])
            added = []
        else:
            added.append((start, end))
    return merge_intervals([*current, *added])
