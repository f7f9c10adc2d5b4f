"""`before_all` / `after_all` on the shared SparkSession: before_all builds a table the models
read, after_all records a marker row, on an apply and on a run; a failing before_all stops the
apply with nothing of mesh's written."""

from __future__ import annotations

import uuid

import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.project.environment_statements import EnvironmentStatementError


@pytest.fixture
def schema(engine):
    name = f"h_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(tmp_path, schema: str, before: list[str], after: list[str]):
    config = CONFIG + "before_all:\n" + "".join(f'  - "{s}"\n' for s in before) + \
        "after_all:\n" + "".join(f'  - "{s}"\n' for s in after)
    return write_project(tmp_path / "p", {
        # raw.src is declared nowhere: an implicit external model, built by before_all
        "models/daily.sql": f"MODEL (name {schema}.daily, kind FULL);\nSELECT id, id * 10 AS value FROM {schema}_raw.src\n",
        "models/total.sql": f"MODEL (name {schema}.total, kind VIEW);\nSELECT SUM(value) AS total FROM {schema}.daily\n",
    }, config)


def _rows(ctx: Context, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in ctx.engine.session.fetchall(sql))


def test_before_all_builds_what_models_read_and_after_all_marks_apply_and_run(tmp_path, engine, schema):
    raw = f"{schema}_raw"
    root = _project(tmp_path, schema, before=[
        f"CREATE SCHEMA IF NOT EXISTS {raw}",
        f"CREATE TABLE IF NOT EXISTS {raw}.src (id INT) USING parquet",
        f"INSERT OVERWRITE {raw}.src VALUES (1), (2)",
        f"CREATE TABLE IF NOT EXISTS {raw}.marker (stage STRING, env STRING, views ARRAY<STRING>) USING parquet",
    ], after=[
        f"INSERT INTO {raw}.marker SELECT @runtime_stage, @this_env, @views",
    ])
    warnings: list[str] = []
    ctx = Context(root, engine=engine, on_warning=warnings.append)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert len(warnings) == 1 and f"reads {raw}.src" in warnings[0]
    assert _rows(ctx, f"SELECT id, value FROM {schema}.daily") == [(1, 10), (2, 20)]
    views = [f"{schema}.daily", f"{schema}.total"]
    assert _rows(ctx, f"SELECT stage, env, views FROM {raw}.marker") == [("after_all", "prod", views)]

    assert ctx.runs.run("prod", execution_time="2024-01-04") > 0
    assert _rows(ctx, f"SELECT total FROM {schema}.total") == [(30,)]
    assert _rows(ctx, f"SELECT stage, env, views FROM {raw}.marker") == [("after_all", "prod", views)] * 2

    # a dev environment: its own name and views
    model = root / "models" / "daily.sql"
    model.write_text(model.read_text().replace("id * 10", "id * 100"))
    ctx.reload()
    ctx.reviews.apply(ctx.plans.plan("dev", start="2024-01-01", end="2024-01-03", execution_time="2024-01-04"))
    dev = _rows(ctx, f"SELECT stage, env, views FROM {raw}.marker WHERE env = 'dev'")
    assert dev == [("after_all", "dev", [f"{schema}__dev.daily", f"{schema}__dev.total"])]


def test_failing_before_all_writes_nothing(tmp_path, engine, schema):
    raw = f"{schema}_raw"
    root = _project(tmp_path, schema, before=[
        f"CREATE SCHEMA IF NOT EXISTS {raw}",
        f"INSERT INTO {raw}.nowhere VALUES (1)",
    ], after=[f"CREATE TABLE {raw}.never (id INT) USING parquet"])
    ctx = Context(root, engine=engine, on_warning=lambda _: None)
    with pytest.raises(EnvironmentStatementError) as e:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    message = str(e.value)
    assert message.startswith("config.yaml:7: before_all.1: failed: ") and "nothing was written" in message
    assert "TABLE_OR_VIEW_NOT_FOUND" in message and "\n" not in message
    assert ctx.state.environments.get_environment("prod") is None and ctx.state.snapshots.all_snapshot_ids() == set()
    for written in (schema, f"mesh__{schema}"):
        assert engine.catalog.list_objects(written) == {}
    assert engine.catalog.list_objects(raw) == {}  # the first statement ran; nothing after the failing one did
