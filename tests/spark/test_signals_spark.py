"""Signals on Spark: a signal that asks Spark which days of a raw table have landed holds back the
rest, in the plan that creates prod (which is created with what is ready) and in the runs after it; the child waits with its parent, and
a later run fills both once the rows arrive."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.time.dates import to_ds
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.execution.events import LogLines

pytestmark = pytest.mark.spark

SIGNALS = '''
from mesh_dagster import signal


@signal()
def rows_landed(batch, table: str, spark):
    """Ready: the days the raw table has rows for."""
    days = {row[0] for row in spark.sql(f"SELECT DISTINCT ds FROM {table}").collect()}
    return [(start, end) for start, end in batch if start.date() in days]
'''


@pytest.fixture
def schema(engine):
    name = f"sig_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)



def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in engine.session.fetchall(sql))


def _land(engine: SparkEngine, raw: str, *rows: tuple[int, str]) -> None:
    values = ", ".join(f"({i}, DATE'{day}')" for i, day in rows)
    engine.session.execute(f"INSERT INTO {raw}.events VALUES {values}")


def _recorded(ctx: Context) -> dict[str, list[tuple[str, str]]]:
    env = ctx.state.environments.get_environment("prod")
    assert env is not None
    keys = [(s.name, s.version) for s in env.snapshots if s.table_name]
    found = ctx.state.intervals.get_intervals(keys)
    return {name.split(".")[1]: [(to_ds(s), to_ds(e)) for s, e in found.get((name, v), [])] for name, v in keys}


def test_a_spark_signal_holds_back_unlanded_days_until_a_later_run(tmp_path, engine, schema) -> None:
    raw = f"{schema}_raw"
    engine.catalog.create_schema(raw)
    engine.session.execute(f"CREATE TABLE {raw}.events (id INT, ds DATE) USING parquet")
    _land(engine, raw, (1, "2020-01-01"), (2, "2020-01-02"))
    root = write_project(tmp_path / "p", {
        "signals/__init__.py": SIGNALS,
        "external_models.yaml": f"- name: {raw}.events\n  columns:\n    id: int\n    ds: date\n",
        "models/events.sql": f"""
            MODEL (
              name {schema}.events,
              kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
              start '2020-01-01',
              signals (rows_landed(table := '{raw}.events'))
            );

            SELECT id, ds FROM {raw}.events WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/daily.sql": f"""
            MODEL (name {schema}.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');

            SELECT ds, COUNT(*) AS events FROM {schema}.events WHERE ds BETWEEN @start_ds AND @end_ds GROUP BY ds
            """,
    })
    ctx = Context(root, engine=engine)

    # The plan that creates prod computes the landed days; the 3rd waits, like a day not due yet.
    log = LogLines()
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"), listener=log)
    assert f"{schema}.events: waiting for signal rows_landed(table := '{raw}.events') (2020-01-03 - 2020-01-03)" \
        in log.lines
    assert _recorded(ctx) == {"events": [("2020-01-01", "2020-01-03")], "daily": [("2020-01-01", "2020-01-03")]}
    assert _rows(engine, f"SELECT CAST(ds AS STRING), events FROM {schema}.daily") == [
        ("2020-01-01", 1), ("2020-01-02", 1)]

    _land(engine, raw, (3, "2020-01-03"), (4, "2020-01-03"))
    log = LogLines()
    assert ctx.runs.run("prod", execution_time="2020-01-05", listener=log) > 0
    assert f"{schema}.daily: waiting for upstream {schema}.events (2020-01-04 - 2020-01-04)" in log.lines
    assert _recorded(ctx) == {"events": [("2020-01-01", "2020-01-04")], "daily": [("2020-01-01", "2020-01-04")]}
    assert _rows(engine, f"SELECT CAST(ds AS STRING), events FROM {schema}.daily") == [
        ("2020-01-01", 1), ("2020-01-02", 1), ("2020-01-03", 2)]

    _land(engine, raw, (5, "2020-01-04"))
    assert ctx.runs.run("prod", execution_time="2020-01-05") > 0
    assert _recorded(ctx) == {"events": [("2020-01-01", "2020-01-05")], "daily": [("2020-01-01", "2020-01-05")]}
    assert _rows(engine, f"SELECT CAST(ds AS STRING), events FROM {schema}.daily") == [
        ("2020-01-01", 1), ("2020-01-02", 1), ("2020-01-03", 2), ("2020-01-04", 1)]
