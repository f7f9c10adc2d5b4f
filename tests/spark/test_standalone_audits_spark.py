"""Standalone audits and external model audits on Spark, as SQLMesh runs them.

A standalone audit runs after the models it reads, in the apply of the plan that adds it and in
`mesh run` for its new intervals; a failure is a warning (standalone audits never block) and the
apply promotes. A blocking audit of an external model fails the apply before the models reading
the table are computed: nothing is promoted.
"""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import AuditError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.events import LogLines

pytestmark = pytest.mark.spark


@pytest.fixture
def schema(engine):
    name = f"sa_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _audit(name: str, schema: str, condition: str) -> str:
    return f"""
        AUDIT (name {name}, standalone true);
        SELECT * FROM {schema}.items WHERE {condition} AND ds BETWEEN @start_ds AND @end_ds
        """


def test_standalone_audits_run_after_their_models_and_only_warn(tmp_path, engine, schema) -> None:
    files = {
        "models/items.sql": f"""
            MODEL (name {schema}.items, kind VIEW);
            SELECT 1 AS id, 2.0 AS price, DATE'2020-01-02' AS ds
            """,
        "audits/price.sql": _audit("price_positive", schema, "price <= 0"),
    }
    root = write_project(tmp_path / "p", files)
    ctx = Context(root, engine=engine)
    log = LogLines()
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"), listener=log)
    assert not [line for line in log.lines if "failed" in line]
    assert engine.session.fetchall(f"SELECT id FROM {schema}.items") == [(1,)]

    (root / "audits/ids.sql").write_text(_audit("id_above_five", schema, "id <= 5"))
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan("prod", execution_time="2020-01-03")
    assert plan.added == ["id_above_five"]
    log = LogLines()
    ctx.reviews.apply(plan, listener=log)  # a failing standalone audit warns: the apply goes on
    assert any("Standalone audit 'id_above_five' failed: 1 row(s)" in line for line in log.lines)
    assert ctx.state.environments.get_environment("prod").plan_id == plan.plan_id

    # `mesh run` audits the new day only: the failing row's day is not in it.
    log = LogLines()
    assert ctx.runs.run("prod", execution_time="2020-01-04", listener=log) > 0
    assert not [line for line in log.lines if "failed" in line]
    node = ctx.plans.plan("prod", execution_time="2020-01-04").snapshots["id_above_five"]
    assert ctx.state.intervals.get_intervals([node.interval_key])[node.interval_key] == [(to_ms("2020-01-01"), to_ms("2020-01-04"))]

    # A promotion (Dagster's, after materializing assets) runs the audits nothing materializes.
    (root / "audits/more.sql").write_text(_audit("price_below_one", schema, "price >= 1"))
    ctx = Context(root, engine=engine)
    log = LogLines()
    ctx.reviews.promote("prod", listener=log)
    assert any("Standalone audit 'price_below_one' failed: 1 row(s)" in line for line in log.lines)


def test_a_failing_blocking_external_model_audit_fails_the_apply(tmp_path, engine, schema) -> None:
    raw = f"{schema}_raw"
    engine.catalog.create_schema(raw)
    engine.session.execute(f"CREATE TABLE {raw}.demographics (customer_id INT) USING parquet")
    engine.session.execute(f"INSERT INTO {raw}.demographics VALUES (1), (NULL)")
    root = write_project(tmp_path / "p", {
        "external_models.yaml": f"""
            - name: {raw}.demographics
              start: '2020-01-01'
              audits:
                - name: not_null
                  columns: "[customer_id]"
              columns:
                customer_id: int
            """,
        "models/customers.sql": f"""
            MODEL (name {schema}.customers, kind FULL);
            SELECT customer_id FROM {raw}.demographics
            """,
    })
    ctx = Context(root, engine=engine)
    with pytest.raises(AuditError, match=f"Audit 'not_null' failed for {raw}.demographics: 1 row"):
        ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    assert ctx.state.environments.get_environment("prod") is None  # nothing promoted
    assert not engine.catalog.table_exists(f"{schema}.customers")
