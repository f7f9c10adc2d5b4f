"""What each Dagster run did of its environment's `before_all` / `after_all` (`mesh_statement_runs`,
schema v6): they run once per run, whichever of its steps — in any process — gets there first
(execution/intervals/statement_runs.py decides; its lock makes the read and the write one decision).

A run's marks are kept a week (`RETENTION_MS`), long enough for any run's retries; each new run
forgets older ones.
"""

from __future__ import annotations

from sqlalchemy import delete, select

from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, now_ms

RETENTION_MS = 7 * 24 * 3600 * 1000


class StatementRuns:
    """The marks of the runs of one state store (`StateStore.statement_runs`)."""

    def __init__(self, db: Database):
        self._db = db

    def marks(self, run_key: str) -> dict[str, str | None]:
        """`run_key`'s marks: `before_all`, `after_all` or `step:<model>` -> None when it ran, or why it failed."""
        table = schema.statement_runs
        with self._db.read() as conn:
            rows = conn.execute(select(table.c.mark, table.c.failed).where(table.c.run_key == run_key)).all()
        return {r.mark: r.failed for r in rows}

    def mark(self, run_key: str, mark: str, failed: str | None = None) -> None:
        """Record `mark` of `run_key` (again: the latest outcome holds)."""
        table = schema.statement_runs
        with self._db.write() as conn:
            self._db.upsert(conn, table, {"run_key": run_key, "mark": mark, "failed": failed,
                                          "created_ts": now_ms()}, ["run_key", "mark"])

    def forget_old(self, now: int | None = None) -> None:
        """Drop the marks of runs older than `RETENTION_MS`."""
        table = schema.statement_runs
        with self._db.write() as conn:
            conn.execute(delete(table).where(table.c.created_ts < (now or now_ms()) - RETENTION_MS))
