"""A model reading its own table, on real Spark: a running total over three days, each day
computed from the total the day before left in the model's table. Its batches run in order, and
a failing day stops the days after it (its interval is not recorded), so a later run resumes
exactly there and gets the same totals.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark

DAY1, DAY2, DAY3, DAY4 = (to_ms(d) for d in ("2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"))


@pytest.fixture
def schema(engine):
    name = f"self_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _events(engine: SparkEngine, schema: str, rows: str) -> None:
    engine.catalog.create_schema(f"{schema}_raw")
    engine.session.execute(f"CREATE TABLE IF NOT EXISTS {schema}_raw.events (ds DATE, amount STRING) USING parquet")
    engine.session.execute(f"INSERT OVERWRITE TABLE {schema}_raw.events SELECT CAST(ds AS DATE), amount "
                           f"FROM VALUES {rows} AS t(ds, amount)")


def _project(tmp_path: Path, schema: str) -> Context:
    # No `columns`: every output column is cast, so its types are known before the first run. The
    # amounts are text: a day whose amount is no number fails its batch (ANSI casts).
    return Context(write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {schema}_raw.events\n  columns:\n    ds: date\n    amount: string\n",
        "models/totals.sql": f"""
            MODEL (
              name {schema}.totals,
              kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
              start '2020-01-01'
            );

            SELECT
              CAST(e.ds AS DATE) AS ds,
              CAST(SUM(CAST(e.amount AS INT))
                   + COALESCE((SELECT MAX(t.total) FROM {schema}.totals AS t WHERE t.ds < @start_ds), 0)
                   AS BIGINT) AS total
            FROM {schema}_raw.events AS e
            WHERE e.ds BETWEEN @start_ds AND @end_ds
            GROUP BY e.ds
            """,
    }))


def _totals(engine: SparkEngine, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in engine.session.fetchall(f"SELECT CAST(ds AS STRING), total FROM {table}"))


def test_a_running_total_is_computed_day_after_day_from_its_own_table(tmp_path, engine, schema) -> None:
    _events(engine, schema, "('2020-01-01', '10'), ('2020-01-02', '20'), ('2020-01-02', '5'), ('2020-01-03', '30')")
    ctx = _project(tmp_path, schema)
    model = ctx.project.models[f"{schema}.totals"]
    assert model.self_referencing and model.depends_on_past and model.batch_concurrency == 1
    assert ctx.project.parents(f"{schema}.totals") == [f"{schema}_raw.events"]  # itself is no parent
    plan = ctx.plans.plan(execution_time="2020-01-04")
    ctx.reviews.apply(plan)
    table = f"{schema}.totals"  # the view
    assert _totals(engine, table) == [("2020-01-01", 10), ("2020-01-02", 35), ("2020-01-03", 65)]
    # Another day arrives: the run reads the total the apply left.
    _events(engine, schema, "('2020-01-01', '10'), ('2020-01-02', '20'), ('2020-01-02', '5'), ('2020-01-03', '30'), "
                            "('2020-01-04', '1')")
    assert ctx.runs.run(execution_time="2020-01-05") == 1
    assert _totals(engine, table)[-1] == ("2020-01-04", 66)
    key = plan.snapshots[f"{schema}.totals"].interval_key
    assert ctx.state.intervals.get_intervals([key])[key] == [(DAY1, to_ms("2020-01-05"))]


def test_a_failing_day_stops_the_days_after_it_and_a_later_run_resumes_there(tmp_path, engine, schema) -> None:
    _events(engine, schema, "('2020-01-01', '10'), ('2020-01-02', 'twenty'), ('2020-01-03', '30')")
    ctx = _project(tmp_path, schema)
    plan = ctx.plans.plan(execution_time="2020-01-04")
    key = plan.snapshots[f"{schema}.totals"].interval_key
    table = plan.snapshots[f"{schema}.totals"].table_name  # no view before an apply succeeds
    with pytest.raises(EngineError):
        ctx.reviews.apply(plan)
    assert ctx.state.intervals.get_intervals([key])[key] == [(DAY1, DAY2)]  # the failed day and the one after it: not recorded
    assert _totals(engine, table) == [("2020-01-01", 10)]  # day 3 never ran on a table missing day 2
    _events(engine, schema, "('2020-01-01', '10'), ('2020-01-02', '20'), ('2020-01-03', '30')")
    again = ctx.plans.plan(execution_time="2020-01-04")
    assert again.backfills[f"{schema}.totals"].intervals == [(DAY2, DAY4)]
    ctx.reviews.apply(again)
    assert _totals(engine, table) == [("2020-01-01", 10), ("2020-01-02", 30), ("2020-01-03", 60)]
    assert ctx.state.intervals.get_intervals([key])[key] == [(DAY1, DAY4)]
