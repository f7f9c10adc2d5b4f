"""`before_all` / `after_all` in Dagster runs (issue 34, point 3), on the test process's Spark: a run
of six assets runs them once, not once per step (before its first write, after its last step
succeeded), and runs what the environment's plan captured, not config.yaml as it is now; a run in
which a model fails runs `before_all` but never `after_all`. A statement inserts a row into a counter
table each time it runs: the rows are the count."""

from __future__ import annotations

import dagster as dg
import pytest
from failures import failure_text
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions

pytestmark = pytest.mark.spark


def _config(raw: str, tag: str) -> str:
    count = f"INSERT INTO {raw}.counter SELECT @runtime_stage, @this_env, '{tag}'"
    return CONFIG + (f"before_all:\n  - CREATE SCHEMA IF NOT EXISTS {raw}\n"
                     f"  - CREATE TABLE IF NOT EXISTS {raw}.counter (stage STRING, env STRING, tag STRING) USING parquet\n"
                     f"  - \"{count}\"\nafter_all:\n  - \"{count}\"\n")


def _project(tmp_path, schema: str):
    raw = f"{schema}_raw"
    models = {f"models/{n}.sql": f"MODEL (name {schema}.{n}, kind FULL);\nSELECT 1 AS id\n" for n in ("a", "d", "e")}
    models["models/b.sql"] = f"MODEL (name {schema}.b, kind FULL);\nSELECT id FROM {schema}.a\n"
    models["models/c.sql"] = f"MODEL (name {schema}.c, kind FULL);\nSELECT id FROM {schema}.b\n"
    models["models/f.sql"] = f"MODEL (name {schema}.f, kind FULL);\nSELECT id FROM {raw}.src\n"  # the test's table
    return write_project(tmp_path / "p", models, _config(raw, "planned")), raw


def _counts(engine, raw: str) -> dict[tuple, int]:
    rows = engine.session.fetchall(f"SELECT stage, env, tag, COUNT(*) FROM {raw}.counter GROUP BY stage, env, tag")
    return {(stage, env, tag): n for stage, env, tag, n in rows}


def test_a_six_asset_run_runs_the_planned_statements_once_and_a_failed_run_no_after_all(tmp_path, engine, project_schema):
    schema = project_schema
    root, raw = _project(tmp_path, schema)
    engine.session.execute(f"CREATE SCHEMA IF NOT EXISTS {raw}")
    engine.session.execute(f"CREATE TABLE {raw}.src USING parquet AS SELECT 1 AS id")
    ctx = Context(root, engine=engine, on_warning=lambda _: None)
    ctx.reviews.apply(ctx.plans.plan("prod"))
    assert _counts(engine, raw) == {("before_all", "prod", "planned"): 1, ("after_all", "prod", "planned"): 1}
    (root / "config.yaml").write_text(_config(raw, "unreviewed"))  # an edit nobody planned

    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(root, "prod", shared_spark=False)
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success, failure_text(result)
    assert len(result.get_asset_materialization_events()) == 6  # six steps, each evaluated its model
    assert _counts(engine, raw) == {("before_all", "prod", "planned"): 2, ("after_all", "prod", "planned"): 2}

    engine.session.execute(f"DROP TABLE {raw}.src")  # f fails in the next run
    failed = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not failed.success and f"{schema}.f" in failure_text(failed)
    assert len(failed.get_asset_materialization_events()) == 5
    assert _counts(engine, raw) == {("before_all", "prod", "planned"): 3, ("after_all", "prod", "planned"): 2}
