"""Blueprints, session_properties and CUSTOM kinds applied on Spark: the data they produce.

One module on the shared session: each test is a small project applied once.
"""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import MeshError
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark


@pytest.fixture
def schema(engine):
    name = f"b_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (f"{name}_a", f"{name}_b", name, f"mesh__{name}_a", f"mesh__{name}_b", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in engine.session.fetchall(sql)), key=repr)


def test_blueprints_build_one_model_per_blueprint(tmp_path, engine, schema) -> None:
    root = write_project(tmp_path / "p", {
        "models/orders.sql": f"""
            MODEL (
              name {schema}_@{{customer}}.orders,
              kind FULL,
              blueprints ((customer := 'a', factor := 1), (customer := 'b', factor := 10))
            );

            SELECT id, id * @factor AS amount, @BLUEPRINT_VAR('customer', 'none') AS customer
            FROM VALUES (1), (2) AS t(id)
            """,
        "models/per_customer.py": f'''
import pandas as pd

from mesh_dagster import model


@model("{schema}_@{{customer}}.per_customer", kind="FULL", columns={{"customer": "string", "n": "int"}},
       blueprints=[{{"customer": "a", "n": 1}}, {{"customer": "b", "n": 2}}])
def execute(context, start, end, execution_time, n):
    return pd.DataFrame({{"customer": [context.blueprint_var("customer")], "n": [n]}})
''',
        "models/total.sql": f"""
            MODEL (name {schema}.total, kind FULL);

            SELECT customer, SUM(amount) AS total FROM {schema}_a.orders GROUP BY customer
            UNION ALL SELECT customer, SUM(amount) AS total FROM {schema}_b.orders GROUP BY customer
            """,
    })
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))
    assert _rows(engine, f"SELECT * FROM {schema}_a.orders") == [(1, 1, "a"), (2, 2, "a")]
    assert _rows(engine, f"SELECT * FROM {schema}_b.orders") == [(1, 10, "b"), (2, 20, "b")]
    assert _rows(engine, f"SELECT * FROM {schema}.total") == [("a", 3), ("b", 30)]
    assert _rows(engine, f"SELECT * FROM {schema}_a.per_customer UNION ALL SELECT * FROM {schema}_b.per_customer") == [
        ("a", 1), ("b", 2)]


def test_session_properties_hold_inside_the_model_only(tmp_path, engine, schema) -> None:
    before = engine.session.fetchall("SELECT current_timezone()")[0][0]
    root = write_project(tmp_path / "p", {
        "models/tz.sql": f"""
            MODEL (
              name {schema}.tz,
              kind FULL,
              session_properties ('spark.sql.session.timeZone' = 'America/New_York', spark.sql.ansi.enabled = false)
            );

            SELECT current_timezone() AS zone, CAST('x' AS INT) AS lenient
            """,
        "models/plain.sql": f"""
            MODEL (name {schema}.plain, kind FULL);

            SELECT current_timezone() AS zone
            """,
    })
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))
    assert _rows(engine, f"SELECT * FROM {schema}.tz") == [("America/New_York", None)]
    assert _rows(engine, f"SELECT * FROM {schema}.plain") == [(before,)]
    assert engine.session.fetchall("SELECT current_timezone()")[0][0] == before  # restored


def test_a_setting_spark_refuses_fails_the_model_before_it_writes(tmp_path, engine, schema) -> None:
    root = write_project(tmp_path / "p", {
        "models/bad.sql": f"""
            MODEL (name {schema}.bad, kind FULL, session_properties (spark.sql.streaming.ui.enabled = false));

            SELECT 1 AS x
            """,
    })
    ctx = Context(root, engine=engine)
    with pytest.raises(MeshError) as e:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))
    assert "models/bad.sql:1:" in str(e.value) and "spark.sql.streaming.ui.enabled" in str(e.value), str(e.value)
    assert not engine.catalog.table_exists(f"{schema}.bad")


MATERIALIZATION = '''
from mesh_dagster import Materialization


class StampedAppend(Materialization):
    """Appends each batch, stamping its rows with a label and the batch's start."""

    NAME = "stamped_append"

    def create(self, table, query, context):
        context.create_table(table, query)

    def insert(self, table, query, context):
        label = context.properties["label"]
        day = context.start.date().isoformat()
        context.append(table, f"SELECT id, '{label}' AS label, DATE'{day}' AS ds FROM ({query}) AS q")
'''


def test_a_custom_materialization_writes_the_model(tmp_path, engine, schema) -> None:
    root = write_project(tmp_path / "p", {
        "materializations/stamped.py": MATERIALIZATION,
        "models/log.sql": f"""
            MODEL (
              name {schema}.log,
              kind CUSTOM (materialization 'stamped_append', materialization_properties (label = 'run'),
                           batch_size 1),
              start '2020-01-01'
            );

            SELECT id, 'x' AS label, CAST(NULL AS DATE) AS ds FROM VALUES (1), (2) AS t(id)
            """,
    })
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    assert _rows(engine, f"SELECT id, label, CAST(ds AS STRING) FROM {schema}.log") == [
        (1, "run", "2020-01-01"), (1, "run", "2020-01-02"), (2, "run", "2020-01-01"), (2, "run", "2020-01-02")]
