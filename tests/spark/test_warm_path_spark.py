"""The warm path on Spark (issue 36), counted on the engine's trace: a daily run where nothing a
model reads changed analyses no query; an external table whose column type changed brings the
analyses back, and the tables reading it, directly or through a parent, are migrated."""

from __future__ import annotations

from pathlib import Path

from mesh_dagster.context import Context
from mesh_dagster.engine.adapter import SQL_TRACE_ENV, SparkEngine
from tests.project_builder import write_project

CONFIG = "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n"


def files(schema: str) -> dict[str, str]:
    raw = f"{schema}_raw.events"
    incremental = "INCREMENTAL_BY_TIME_RANGE (time_column ds, on_additive_change allow)"
    return {
        "external_models.yaml": f"- name: {raw}\n  columns:\n    id: INT\n    ds: DATE\n    value: INT\n",
        "models/up.sql": f"MODEL (name {schema}.up, kind FULL);\nSELECT id, ds, value FROM {raw}\n",
        "models/inc.sql": f"MODEL (name {schema}.inc, kind {incremental});\n"
                          f"SELECT id, ds, value FROM {schema}.up WHERE ds BETWEEN @start_ds AND @end_ds\n",
        "models/direct.sql": f"MODEL (name {schema}.direct, kind {incremental});\n"
                             f"SELECT id, ds, value FROM {raw} WHERE ds BETWEEN @start_ds AND @end_ds\n",
    }


def _events(engine: SparkEngine, raw: str, value_type: str) -> None:
    engine.session.execute(f"DROP TABLE IF EXISTS {raw}")
    engine.session.execute(f"CREATE TABLE {raw} (id INT, ds DATE, value {value_type}) USING parquet")
    engine.session.execute(f"INSERT INTO {raw} SELECT CAST(id AS INT), DATE_ADD(DATE'2024-01-01', CAST(id AS INT)), "
                           f"CAST(id AS {value_type}) FROM RANGE(6) AS r(id)")


def _analyses(trace: Path) -> list[str]:
    """The traced analyses of the models' queries (each is its rendered SELECT, alone)."""
    calls = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()] if trace.exists() else []
    return [c for c in calls if c.startswith("SELECT id, ds, value FROM")]


def test_nothing_changed_no_analysis_an_external_change_migrates(spark, unique_schema, tmp_path,
                                                                 monkeypatch) -> None:
    project_schema = unique_schema
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    engine = SparkEngine(spark)
    raw = f"{project_schema}_raw.events"
    engine.catalog.create_schema(f"{project_schema}_raw")
    _events(engine, raw, "INT")
    ctx = Context(Path(write_project(tmp_path / "p", files(project_schema), CONFIG)), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-03"))
        snapshots = ctx.plans.plan(execution_time="2024-01-03").snapshots
        tables = {name: snapshots[f"{project_schema}.{name}"].table_name for name in ("up", "inc", "direct")}

        trace.unlink()
        assert ctx.runs.run(execution_time="2024-01-04") == 3
        assert _analyses(trace) == []  # the day after the apply: every check and rewrite remembered

        _events(engine, raw, "BIGINT")  # the external table's value column widened
        trace.unlink()
        assert ctx.runs.run(execution_time="2024-01-05") == 3
        assert len(_analyses(trace)) == 3  # up and direct read it, inc reads up
        for table in tables.values():
            assert engine.catalog.columns(table)["value"] == "bigint", table
        assert engine.session.fetchall(f"SELECT value FROM {tables['inc']} WHERE ds = DATE'2024-01-04'") == [(3,)]

        trace.unlink()
        assert ctx.runs.run(execution_time="2024-01-06") == 3
        assert _analyses(trace) == []  # learned again
    finally:
        ctx.close()
        for (schema,) in engine.session.fetchall(f"SHOW SCHEMAS LIKE '*{project_schema}*'"):
            engine.catalog.drop_schema(schema, cascade=True)
