"""An apply with `concurrent_tasks` on the in-memory engine: independent models overlap, and no
model is created before, or written before, the models it reads are created and recorded."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import AuditError
from mesh_dagster.execution.events import ApplyListener
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

FILES = {
    "models/seed.sql": "MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, ds DATE));\n",
    "seeds/seed.csv": "id,ds\n1,2024-01-01\n2,2024-01-02\n",
    "models/a.sql": "MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), audits (not_null(columns := (id))));\n"
                    "SELECT id, ds FROM s.seed WHERE ds BETWEEN @start_ds AND @end_ds\n",
    "models/c.sql": "MODEL (name s.c, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
                    "SELECT id, ds FROM s.seed WHERE ds BETWEEN @start_ds AND @end_ds\n",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, ds FROM s.a\n",
    "models/d.sql": "MODEL (name s.d, kind FULL);\nSELECT a.id, c.ds FROM s.a AS a JOIN s.c AS c ON a.id = c.id\n",
    "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id FROM s.b\n",
}
READS = {"s.a": ["s.seed"], "s.c": ["s.seed"], "s.b": ["s.a"], "s.d": ["s.a", "s.c"], "s.v": ["s.b"]}


def config(concurrent_tasks: int) -> str:
    return (f"gateways:\n  local:\n    connection:\n      concurrent_tasks: {concurrent_tasks}\n"
            "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n")


class OrderEngine(FakeEngine):
    """Logs when each write begins and ends, on which thread; the interval writes of `s.a` and
    `s.c` wait for each other (a barrier), so an apply that ran them one after the other fails."""

    WRITES = ("create_table", "replace_table", "insert_overwrite_interval", "load_seed", "create_view")

    def __init__(self, overlap: set[str] = frozenset(), failing_audit: str | None = None):  # type: ignore[assignment]
        super().__init__(query_columns={"id": "int", "ds": "date"})
        self.tick = itertools.count()
        self.log: list[tuple[int, str, str, str]] = []  # (tick, "begin" | "end" | other event, method, table)
        self.threads: set[str] = set()
        self.overlap = overlap
        self.barrier = threading.Barrier(2)
        self.failing_audit = failing_audit
        self.lock = threading.Lock()

    def event(self, what: str, method: str = "", table: str = "") -> None:
        with self.lock:
            self.log.append((next(self.tick), what, method, table))

    def __getattribute__(self, name: str) -> Any:
        attribute = object.__getattribute__(self, name)
        if name not in OrderEngine.WRITES:
            return attribute

        def logged(table: str, *args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.current_thread().name)
            self.event("begin", name, table)
            if name == "insert_overwrite_interval" and table in self.overlap:
                self.barrier.wait(timeout=10)
            result = attribute(table, *args, **kwargs)
            self.event("end", name, table)
            return result

        return logged

    def fetchall(self, sql: str) -> list[tuple]:
        super().fetchall(sql)
        return [(1,)] if self.failing_audit and self.failing_audit in sql else [(0,)]


class Recorder(ApplyListener):
    def __init__(self, engine: OrderEngine):
        self.engine = engine

    def backfill_start(self, total_batches: int) -> None:
        self.engine.event("backfill")

    def batch_done(self, name: str, index: int, count: int, description: str, seconds: float,
                   audits_passed: int, audits_failed: int) -> None:
        self.engine.event("recorded", table=name)


def apply(tmp_path: Path, concurrent_tasks: int, engine: OrderEngine) -> tuple[Context, dict[str, str]]:
    ctx = Context(write_project(tmp_path / f"p{concurrent_tasks}", FILES, config(concurrent_tasks)), engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-03")
    tables = {name: snap.table_name for name, snap in plan.snapshots.items()}
    try:
        ctx.reviews.apply(plan, Recorder(engine))
    finally:
        ctx.close()
    return ctx, tables


def first(log: list, what: str, table: str, after: int = -1) -> int:
    return min(t for t, w, _, n in log if w == what and n == table and t > after)


def test_independent_models_overlap_and_every_model_waits_for_what_it_reads(tmp_path) -> None:
    engine = OrderEngine()
    _, tables = apply(tmp_path, 4, engine)
    log = engine.log
    backfill = first(log, "backfill", "")
    assert len(engine.threads - {threading.current_thread().name}) > 1  # (the views move on the caller's)
    assert not [e for e in log if e[0] > backfill and e[1] == "begin" and e[3] == tables["s.v"]]  # issue 36
    for child, parents in READS.items():
        for parent in parents:
            # creating a child analyses its query, which reads its parents' tables
            assert first(log, "begin", tables[child]) > first(log, "end", tables[parent]), (child, parent)
            if child == "s.v":  # the view, defined by the physical layer, is found so by the backfill
                continue
            # writing a child reads its parents' recorded data
            child_write = first(log, "begin", tables[child], after=backfill)
            assert child_write > first(log, "recorded", parent), (child, parent, log)


def test_the_interval_writes_of_independent_models_run_at_once(tmp_path) -> None:
    tables = _tables(tmp_path)
    engine = OrderEngine(overlap={tables["s.a"], tables["s.c"]})
    apply(tmp_path, 4, engine)
    assert not engine.barrier.broken  # both were in flight together


def test_concurrent_and_one_at_a_time_applies_issue_the_same_calls(tmp_path) -> None:
    one, four = OrderEngine(), OrderEngine()
    apply(tmp_path, 1, one)
    apply(tmp_path, 4, four)
    assert len(one.threads) == 1
    assert Counter((c.method, c.name) for c in one.calls) == Counter((c.method, c.name) for c in four.calls)


def test_a_failing_audit_stops_what_reads_the_model_and_promotes_nothing(tmp_path) -> None:
    tables = _tables(tmp_path)
    engine = OrderEngine(failing_audit=tables["s.a"])
    with pytest.raises(AuditError, match="Audit 'not_null' failed for s.a"):
        apply(tmp_path, 4, engine)
    backfill = first(engine.log, "backfill", "")
    written_after = {n for t, w, _, n in engine.log if w == "begin" and t > backfill}
    assert tables["s.b"] not in written_after and tables["s.d"] not in written_after
    ctx = Context(tmp_path / "p4", engine=engine)
    try:
        assert ctx.state.environments.get_environment("prod") is None
        a = ctx.plans.plan(execution_time="2024-01-03").snapshots["s.a"]
        assert ctx.state.intervals.get_intervals([a.interval_key]).get(a.interval_key, []) == []
    finally:
        ctx.close()


def _tables(tmp_path: Path) -> dict[str, str]:
    """Physical table names of the project (the same for every concurrency: it is not in the hash)."""
    ctx = Context(write_project(tmp_path / "names", FILES, config(4)))
    try:
        return {name: snap.table_name for name, snap in ctx.plans.plan(execution_time="2024-01-03").snapshots.items()}
    finally:
        ctx.close()
