"""How long each batch written took (`mesh_batch_timings`, schema v8): what plans estimate their
backfill from (core/plan/estimate.py). A batch's timing is kept once its interval is recorded;
a batch killed or failed leaves none.

The store's `timings` part, over its shared connection; every method is one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, insert, select

from mesh_dagster.core.plan.estimate import BatchTiming
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, now_ms

KEPT_PER_MODEL = 50  # the latest timings of a model an estimate reads


class BatchTimings:
    """The batch timings of one state store (`StateStore.timings`)."""

    def __init__(self, db: Database):
        self._db = db

    def record(self, timings: Iterable[BatchTiming]) -> None:
        ts = now_ms()
        rows = [dict(name=t.name, version=t.version, units=t.units, seconds=t.seconds, full_refresh=t.full_refresh,
                     created_ts=ts) for t in timings]
        if rows:
            with self._db.write("record batch timings in") as conn:
                conn.execute(insert(schema.batch_timings), rows)

    def history(self, names: Iterable[str]) -> dict[str, list[BatchTiming]]:
        """The latest timings of each model of `names` (at most KEPT_PER_MODEL), oldest first."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        table = schema.batch_timings
        # The latest of each model only, chosen by the database: a model's history grows with every run,
        # and every plan (a Dagster code location's load too) reads it.
        newest = func.row_number().over(partition_by=table.c.name, order_by=table.c.id.desc()).label("newest")
        ranked = select(table, newest).where(table.c.name.in_(wanted)).subquery()
        query = select(ranked).where(ranked.c.newest <= KEPT_PER_MODEL).order_by(ranked.c.id)
        out: dict[str, list[BatchTiming]] = {}
        with self._db.read() as conn:
            for r in conn.execute(query).all():
                out.setdefault(r.name, []).append(
                    BatchTiming(r.name, r.version, r.units, float(r.seconds), bool(r.full_refresh)))
        return out
