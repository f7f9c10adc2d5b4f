"""`ON_VIRTUAL_UPDATE_BEGIN; ... ON_VIRTUAL_UPDATE_END;` (issue 22) as in SQLMesh: the statements run
when the model's view is created or updated in an environment, with `@this_model` the view and model
names resolving to the environment's views; never on the physical table, never with each batch.
Reading the blocks (and their errors) without Spark: tests/unit/test_virtual_update_reader.py."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import MeshError

pytestmark = pytest.mark.spark

CONFIG = "model_defaults:\n  dialect: spark\n  cron: '@daily'\n"


@pytest.fixture
def schema(engine):
    name = f"ovu_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _model(schema: str, statements: str) -> dict[str, str]:
    return {"models/m.sql": f"MODEL (name {schema}.m, kind FULL);\nSELECT 1 AS a;\n"
                            f"ON_VIRTUAL_UPDATE_BEGIN;\n{statements};\nON_VIRTUAL_UPDATE_END;\n"}


def _properties(engine, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in engine.session.fetchall(f"SHOW TBLPROPERTIES {table}")}


def test_statements_run_on_the_environments_view(tmp_path, engine, schema) -> None:
    files = _model(schema, "ALTER VIEW @this_model SET TBLPROPERTIES ('mesh.granted' = @runtime_stage);\n"
                           f"CREATE TABLE IF NOT EXISTS {schema}__dev.seen USING parquet AS SELECT a FROM {schema}.m")
    ctx = Context(write_project(tmp_path / "p", files, CONFIG), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan("dev", execution_time="2024-01-02 00:00:00"))
        assert _properties(engine, f"{schema}__dev.m").get("mesh.granted") == "promoting"
        physical = engine.session.fetchall(f"SHOW TABLES IN mesh__{schema}")[0][1]
        assert "mesh.granted" not in _properties(engine, f"mesh__{schema}.{physical}")
        assert [tuple(r) for r in engine.session.fetchall(f"SELECT a FROM {schema}__dev.seen")] == [(1,)]  # read through the dev view
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02 00:00:00"))  # prod: a new view, the statements again
        assert _properties(engine, f"{schema}.m").get("mesh.granted") == "promoting"
    finally:
        ctx.close()


def test_a_failing_statement_stops_the_apply_naming_the_model(tmp_path, engine, schema) -> None:
    ctx = Context(write_project(tmp_path / "p", _model(schema, "ALTER VIEW no_such.view_x SET TBLPROPERTIES ('a' = 'b')"),
                                CONFIG), engine=engine)
    try:
        with pytest.raises(MeshError, match=rf"ON_VIRTUAL_UPDATE statement of {schema}.m \(models/m.sql\) failed"):
            ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02 00:00:00"))
    finally:
        ctx.close()
