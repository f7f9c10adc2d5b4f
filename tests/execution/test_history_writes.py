"""Writes that read the table they write, on the in-memory engine (no JVM): SCD type 2 rewrites and
self-referencing models are written `reads_self` (the engine never reads and overwrites a table in
one statement: tests/spark/test_kill_safe_writes.py), and models that depend on their past run
their intervals in order, stop at the first failure, and refuse an interval whose predecessor is
missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.intervals.materialize import Outcome
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

FILES = {
    "external_models.yaml": "- name: raw.events\n  columns:\n    id: INT\n    ds: DATE\n    value: DOUBLE\n",
    "models/scd.sql": """
        MODEL (name s.scd, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [value], invalidate_hard_deletes true));
        SET spark.sql.shuffle.partitions = 2;
        SELECT id, ds, value FROM raw.events;
        ANALYZE TABLE @this_model COMPUTE STATISTICS;
    """,
    "models/scd_declared.sql": """
        MODEL (name s.scd_declared, kind SCD_TYPE_2 (unique_key id, updated_at_name ds),
               columns (id INT, ds DATE));
        SELECT id, ds FROM raw.events
    """,
    "models/totals.sql": """
        MODEL (name s.totals, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1));
        SELECT ds, CAST(SUM(value) + COALESCE((SELECT MAX(t.value) FROM s.totals AS t), 0) AS DOUBLE) AS value,
               CAST(1 AS INT) AS id
        FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds GROUP BY ds
    """,
    "models/runs.sql": """
        MODEL (name s.runs, kind FULL);
        SELECT CAST(COUNT(*) + 1 AS BIGINT) AS n FROM s.runs
    """,
}
DAY1, DAY2, DAY3, DAY4 = (to_ms(f"2024-01-0{d}") for d in range(1, 5))
CONFIG = "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n"


@pytest.fixture
def ctx(tmp_path):
    context = Context(Path(write_project(tmp_path / "p", FILES, CONFIG)), engine=FakeEngine())
    yield context
    context.close()


def _writes(engine: FakeEngine) -> list:
    return [c for c in engine.calls if c.method not in ("columns", "create_schema", "query_columns")]


def test_scd_type_2_is_created_with_its_validity_columns_and_rewritten_whole(ctx) -> None:
    engine = ctx.engine
    snapshots = ctx.plans.plan(execution_time="2024-01-02").snapshots
    ev = SnapshotEvaluator(ctx.project, engine, snapshots)
    scd = snapshots["s.scd"]
    ev.evaluate(scd, DAY1, DAY2, to_ms("2024-01-02 11:00:00"))
    methods = [c.args.get("sql", c.method).split()[0] for c in _writes(engine)]
    assert methods == ["SET", "create_table", "rewrite_table", "ANALYZE"]
    created, rewrite = _writes(engine)[1], _writes(engine)[2]
    # Created from the query's analysis, with NULL validity columns after its own.
    assert created.args["columns"] is None
    assert "CAST(NULL AS TIMESTAMP) AS `valid_from`, CAST(NULL AS TIMESTAMP) AS `valid_to`" in created.args["query"]
    # The new history reads the table's current one, and deletes are stamped with the execution time.
    assert rewrite.name == scd.table_name
    assert f"FROM `{scd.table_name.replace('.', '`.`')}`" in rewrite.args["query"]
    assert "CAST('2024-01-02 11:00:00.000000' AS TIMESTAMP)" in rewrite.args["query"]
    assert "models/scd.sql:1 (s.scd)" in rewrite.args["query"]  # named in the duplicate-key error


def test_declared_columns_are_created_with_the_validity_columns(ctx) -> None:
    snapshots = ctx.plans.plan(execution_time="2024-01-02").snapshots
    ev = SnapshotEvaluator(ctx.project, ctx.engine, snapshots)
    ev.create(snapshots["s.scd_declared"])
    created = next(c for c in ctx.engine.calls if c.method == "create_table")
    assert created.args["columns"] == {"id": "INT", "ds": "DATE", "valid_from": "TIMESTAMP", "valid_to": "TIMESTAMP"}


def test_a_self_referencing_write_is_written_as_one_reading_its_own_table(ctx) -> None:
    engine = ctx.engine
    snapshots = ctx.plans.plan(execution_time="2024-01-02").snapshots
    totals = snapshots["s.totals"]
    SnapshotEvaluator(ctx.project, engine, snapshots).evaluate(totals, DAY1, DAY2, DAY2)
    calls = _writes(engine)
    assert [c.method for c in calls] == ["create_table", "insert_overwrite_interval"]
    created, write = calls
    assert created.args["columns"] == {"ds": "DATE", "value": "DOUBLE", "id": "INT"}  # known before any query ran
    # Its own name is its own table (its previous state), never the environment's view.
    assert write.name == totals.table_name and f"FROM {totals.table_name} AS t" in write.args["query"]
    assert write.args["reads_self"] is True


class FailingDay(FakeEngine):
    """Fails the write of one day."""

    def __init__(self, day: str):
        super().__init__()
        self.day = day

    def insert_overwrite_interval(self, table, query_sql, time_column, low_sql, high_sql, **options) -> None:
        super().insert_overwrite_interval(table, query_sql, time_column, low_sql, high_sql, **options)
        if self.day in low_sql:
            raise EngineError(f"boom on {self.day}")


def test_a_failing_day_stops_the_days_after_it_even_with_concurrent_tasks(tmp_path) -> None:
    engine = FailingDay("2024-01-02")
    context = Context(write_project(tmp_path / "p", FILES, CONFIG), engine=engine)
    assert context.project.concurrent_tasks > 1
    plan = context.plans.plan(execution_time="2024-01-04")
    with pytest.raises(EngineError, match="boom"):
        context.reviews.apply(plan)
    totals = plan.snapshots["s.totals"]
    days = [c.args["low"] for c in engine.calls if c.method == "insert_overwrite_interval" and c.name == totals.table_name]
    assert len(days) == 2 and "2024-01-01" in days[0] and "2024-01-02" in days[1]  # day 3 never started
    assert context.state.intervals.get_intervals([totals.interval_key])[totals.interval_key] == [(DAY1, DAY2)]
    context.close()


def test_materializing_an_interval_whose_predecessor_is_missing_is_refused(ctx) -> None:
    [refused] = list(ctx.runs.materialize(["s.totals"], "2024-01-02", "2024-01-03", execution_time="2024-01-04"))
    assert refused.outcome == Outcome.FAILED and not refused.recorded
    assert str(refused.error) == ("Cannot materialize s.totals for 2024-01-02 - 2024-01-02: it builds on its previous "
                            "intervals, and 2024-01-01 - 2024-01-01 is not done yet. Materialize s.totals from its first "
                            "missing partition on (its partitions run in order).")
    assert not [c for c in ctx.engine.calls if c.method in ("stage", "insert_overwrite_interval")]
    # In order, it goes: the first day, then the next.
    for start, end in (("2024-01-01", "2024-01-02"), ("2024-01-02", "2024-01-03")):
        [done] = list(ctx.runs.materialize(["s.totals"], start, end, execution_time="2024-01-04"))
        assert done.recorded == [(to_ms(start), to_ms(end))]


def test_a_full_model_reading_itself_replaces_its_table_as_a_write_reading_it(ctx) -> None:
    engine = ctx.engine
    snapshots = ctx.plans.plan(execution_time="2024-01-02").snapshots
    runs = snapshots["s.runs"]
    SnapshotEvaluator(ctx.project, engine, snapshots).evaluate(runs, DAY1, DAY2, DAY2)
    calls = _writes(engine)
    assert [c.method for c in calls] == ["create_table", "replace_table"]
    assert calls[0].args["columns"] == {"n": "BIGINT"} and f"FROM {runs.table_name} AS runs" in calls[1].args["query"]
    assert calls[1].args["reads_self"] is True
