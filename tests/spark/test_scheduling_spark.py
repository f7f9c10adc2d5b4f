"""Scheduling properties applied on real Spark, in one project of three chained models:

- `allow_partials`: the events model is due at 06:00 every day over daily intervals, so by 10:00 it
  holds the day so far (up to 06:00); the next run recomputes that day whole, with no duplicates,
  and its child only ever reads complete days;
- `cron_tz`: a model due at 06:00 in Tokyo (21:00 UTC) has nothing due at 20:00 UTC, and its day
  at 21:00 UTC; its intervals stay UTC days;
- `interval_unit hour` on a daily cron: the data arrives hour by hour, each hour an interval.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark


@pytest.fixture
def schema(engine):
    name = f"sched_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(tmp_path: Path, schema: str) -> Context:
    raw = f"{schema}_raw.events"
    return Context(write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}\n  columns:\n    ts: timestamp\n    n: int\n",
        "models/events.sql": f"""
            MODEL (name {schema}.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), start '2020-01-01',
                   cron '0 6 * * *', allow_partials true);
            SELECT ts, n FROM {raw} WHERE ts >= @start_ts AND ts < @end_ts
            """,
        "models/daily.sql": f"""
            MODEL (name {schema}.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
            SELECT CAST(ts AS DATE) AS ds, CAST(SUM(n) AS BIGINT) AS total FROM {schema}.events
            WHERE ts >= @start_ts AND ts < @end_ts GROUP BY CAST(ts AS DATE)
            """,
        "models/tokyo.sql": f"""
            MODEL (name {schema}.tokyo, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01',
                   cron '0 6 * * *', cron_tz 'Asia/Tokyo');
            SELECT ds, total FROM {schema}.daily WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/hourly.sql": f"""
            MODEL (name {schema}.hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column hour), start '2020-01-01',
                   interval_unit hour);
            SELECT date_trunc('HOUR', ts) AS hour, CAST(SUM(n) AS BIGINT) AS total FROM {raw}
            WHERE ts >= @start_ts AND ts < @end_ts GROUP BY date_trunc('HOUR', ts)
            """,
    }))


def _events(engine: SparkEngine, schema: str, rows: str) -> None:
    engine.catalog.create_schema(f"{schema}_raw")
    engine.session.execute(f"CREATE TABLE IF NOT EXISTS {schema}_raw.events (ts TIMESTAMP, n INT) USING parquet")
    engine.session.execute(f"INSERT OVERWRITE TABLE {schema}_raw.events SELECT CAST(ts AS TIMESTAMP), n "
                           f"FROM VALUES {rows} AS t(ts, n)")


def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in engine.session.fetchall(sql))


def test_partials_time_zones_and_units_on_spark(tmp_path, engine, schema) -> None:
    _events(engine, schema, "('2020-01-01 12:00:00', 1), ('2020-01-02 03:00:00', 2), ('2020-01-02 05:00:00', 3), "
                            "('2020-01-02 08:00:00', 4)")
    ctx = _project(tmp_path, schema)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02 10:00:00"))
    # the day so far, up to the cron's 06:00: not the 08:00 row
    assert _rows(engine, f"SELECT CAST(ts AS STRING), n FROM {schema}.events") == [
        ("2020-01-01 12:00:00", 1), ("2020-01-02 03:00:00", 2), ("2020-01-02 05:00:00", 3)]
    assert _rows(engine, f"SELECT CAST(ds AS STRING), total FROM {schema}.daily") == [("2020-01-01", 1)]
    # Tokyo's 06:00 on the 2nd was 21:00 UTC on the 1st: nothing of the 1st was due then (it ended at midnight UTC)
    assert _rows(engine, f"SELECT * FROM {schema}.tokyo") == []
    # hours: the daily cron fired at midnight, so the hours of the 1st
    assert _rows(engine, f"SELECT CAST(hour AS STRING), total FROM {schema}.hourly") == [("2020-01-01 12:00:00", 1)]
    hourly = ctx.state.intervals.get_intervals([ctx.plans.local_snapshots()[f"{schema}.hourly"].interval_key])
    assert list(hourly.values()) == [[(to_ms("2020-01-01"), to_ms("2020-01-02"))]]

    # 20:00 UTC: still before Tokyo's 06:00; the events model's partial day is recomputed up to today's 06:00
    ctx.runs.run(execution_time="2020-01-02 20:00:00")
    assert _rows(engine, f"SELECT * FROM {schema}.tokyo") == []
    # 21:00 UTC is 06:00 in Tokyo on the 3rd: the 1st (a UTC day) is due
    ctx.runs.run(execution_time="2020-01-02 21:00:00")
    assert _rows(engine, f"SELECT CAST(ds AS STRING), total FROM {schema}.tokyo") == [("2020-01-01", 1)]

    # next morning: the 2nd is complete, recomputed whole (no duplicate of the 03:00 and 05:00 rows)
    ctx.runs.run(execution_time="2020-01-03 07:00:00")
    assert _rows(engine, f"SELECT CAST(ts AS STRING), n FROM {schema}.events") == [
        ("2020-01-01 12:00:00", 1), ("2020-01-02 03:00:00", 2), ("2020-01-02 05:00:00", 3),
        ("2020-01-02 08:00:00", 4)]
    assert _rows(engine, f"SELECT CAST(ds AS STRING), total FROM {schema}.daily") == [
        ("2020-01-01", 1), ("2020-01-02", 9)]
    assert _rows(engine, f"SELECT CAST(hour AS STRING), total FROM {schema}.hourly") == [
        ("2020-01-01 12:00:00", 1), ("2020-01-02 03:00:00", 2), ("2020-01-02 05:00:00", 3),
        ("2020-01-02 08:00:00", 4)]
