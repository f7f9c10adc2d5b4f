"""The Context API on the shared SparkSession: apply, audits, run, table_diff, janitor."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import AuditError, MeshError, PlanError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator


def _project(tmp_path, schema: str, extra: dict[str, str] | None = None):
    files = {
        "models/seed.sql": f"""
            MODEL (
              name {schema}.seed,
              kind SEED (path '../seeds/seed.csv'),
              columns (id INT, item_id INT, event_date DATE),
              grain (id)
            );
            """,
        "models/inc.sql": f"""
            MODEL (
              name {schema}.inc,
              kind INCREMENTAL_BY_TIME_RANGE (time_column event_date),
              start '2020-01-01',
              grain (id)
            );

            SELECT id, item_id, event_date FROM {schema}.seed WHERE event_date BETWEEN @start_date AND @end_date
            """,
        "models/full.sql": f"""
            MODEL (name {schema}.full, kind FULL, grain item_id, audits (positive));

            SELECT item_id, COUNT(DISTINCT id) AS num_orders FROM {schema}.inc GROUP BY item_id
            """,
        "audits/positive.sql": "AUDIT (name positive);\nSELECT * FROM @this_model WHERE item_id < 0\n",
        "seeds/seed.csv": "id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-01\n3,3,2020-01-03\n4,1,2020-01-04\n",
        **(extra or {}),
    }
    return write_project(tmp_path / "p", files)


@pytest.fixture
def schema(engine):
    name = f"s_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _rows(ctx: Context, sql: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(sql)]


def test_apply_then_failing_audit_keeps_prod_views(tmp_path, engine, schema):
    root = _project(tmp_path, schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-06"))
    assert _rows(ctx, f"SELECT item_id, num_orders FROM {schema}.full ORDER BY item_id") == [(1, 2), (2, 1), (3, 1)]
    before = ctx.state.environments.get_environment("prod")

    full = root / "models" / "full.sql"
    full.write_text(full.read_text().replace("SELECT item_id,", "SELECT -item_id AS item_id,"))
    ctx.reload()
    plan = ctx.plans.plan(execution_time="2020-01-06")
    with pytest.raises(AuditError) as e:
        ctx.reviews.apply(plan)
    assert "Audit 'positive' failed" in e.value.message and e.value.count == 3
    assert e.value.path == "models/full.sql"
    # Prod still reads the old table; the environment record did not move.
    assert _rows(ctx, f"SELECT item_id FROM {schema}.full ORDER BY item_id") == [(1,), (2,), (3,)]
    assert ctx.state.environments.get_environment("prod").plan_id == before.plan_id
    # The failed batch recorded no interval: the next plan still wants to backfill it.
    assert plan.snapshots[f"{schema}.full"].name in ctx.plans.plan(execution_time="2020-01-06").backfills


def test_run_processes_newly_due_intervals(tmp_path, engine, schema):
    ctx = Context(_project(tmp_path, schema), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))
    assert _rows(ctx, f"SELECT COUNT(*) FROM {schema}.inc") == [(2,)]  # only 2020-01-01 was due
    assert ctx.runs.run(execution_time="2020-01-05") >= 2
    assert _rows(ctx, f"SELECT COUNT(*) FROM {schema}.inc") == [(4,)]
    assert _rows(ctx, f"SELECT SUM(num_orders) FROM {schema}.full") == [(4,)]
    assert ctx.runs.run(execution_time="2020-01-05") == 0  # nothing left


def test_dev_table_diff_render_evaluate_and_janitor(tmp_path, engine, schema):
    root = _project(tmp_path, schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-06"))
    inc = root / "models" / "inc.sql"
    inc.write_text(inc.read_text().replace("SELECT id, item_id,", "SELECT id, item_id, 'z' AS new_column,"))
    ctx.reload()
    dev = ctx.plans.plan("dev", execution_time="2020-01-06")
    ctx.reviews.apply(dev)
    assert _rows(ctx, f"SELECT DISTINCT new_column FROM {schema}__dev.inc") == [("z",)]
    assert "new_column" not in engine.catalog.columns(f"{schema}.inc")
    # The unchanged seed has no dev view; the indirectly modified full_model does.
    assert not engine.catalog.table_exists(f"{schema}__dev.seed") and engine.catalog.table_exists(f"{schema}__dev.full")

    d = ctx.inspection.table_diff("prod", "dev", f"{schema}.inc")
    assert (d.source_count, d.target_count, d.source_only, d.target_only, d.joined) == (4, 4, 0, 0, 4)
    assert d.schema_added == ["new_column"] and d.column_mismatches == {"item_id": 0, "event_date": 0}
    with pytest.raises(MeshError, match=r"^Cannot diff .*\.inc on id, nope: --on names nope, not a column of both"):
        ctx.inspection.table_diff("prod", "dev", f"{schema}.inc", on=["id", "nope"])  # refused before any query

    sql = ctx.inspection.render(f"{schema}.inc", start="2020-01-03", end="2020-01-03")
    assert f"mesh__{schema}.{schema}__seed__" in sql and "2020-01-03" in sql
    assert len(ctx.inspection.evaluate(f"{schema}.inc", start="2020-01-01", end="2020-01-04")) == 4

    ctx.upkeep.invalidate("dev", sync=True)
    assert ctx.state.environments.get_environment("dev") is None
    assert not engine.catalog.table_exists(f"{schema}__dev.inc")
    new_table = dev.snapshots[f"{schema}.inc"].table_name
    assert engine.catalog.table_exists(new_table)
    result = ctx.upkeep.janitor(ignore_ttl=True)
    assert new_table in result["tables"] and not engine.catalog.table_exists(new_table)
    assert engine.catalog.table_exists(f"{schema}.inc")  # prod untouched
    with pytest.raises(PlanError, match="cannot be invalidated"):
        ctx.upkeep.invalidate("prod")


def test_reprocessing_an_interval_empties_partitions_the_query_no_longer_produces(tmp_path, engine, schema):
    raw = f"{schema}_raw"
    engine.catalog.create_schema(raw)
    engine.session.execute(f"CREATE TABLE {raw}.events USING parquet AS SELECT * FROM VALUES "
                           "(1, DATE'2020-01-01'), (2, DATE'2020-01-02'), (3, DATE'2020-01-03') AS t(id, ds)")
    root = write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}.events\n  columns:\n    id: int\n    ds: date\n",
        "models/daily.sql": f"""
            MODEL (name {schema}.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');

            SELECT id, ds FROM {raw}.events WHERE ds BETWEEN @start_ds AND @end_ds
            """,
    })
    try:
        ctx = Context(root, engine=engine)
        plan = ctx.plans.plan(execution_time="2020-01-04")
        ctx.reviews.apply(plan)
        assert _rows(ctx, f"SELECT id FROM {schema}.daily ORDER BY id") == [(1,), (2,), (3,)]
        engine.session.execute(f"INSERT OVERWRITE TABLE {raw}.events SELECT * FROM VALUES (1, DATE'2020-01-01'), "
                               "(3, DATE'2020-01-03') AS t(id, ds)")
        snap = plan.snapshots[f"{schema}.daily"]
        SnapshotEvaluator(ctx.project, engine, plan.snapshots).evaluate(
            snap, to_ms("2020-01-01"), to_ms("2020-01-04"), to_ms("2020-01-04"))
        assert _rows(ctx, f"SELECT id FROM {schema}.daily ORDER BY id") == [(1,), (3,)]
    finally:
        engine.catalog.drop_schema(raw, cascade=True)
