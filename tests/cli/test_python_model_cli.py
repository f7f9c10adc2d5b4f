"""A project with a Python model through the real `mesh` CLI: planned, applied, rendered."""

import pytest
from bad_input.harness import copy_example

pytestmark = pytest.mark.slow

PY_MODEL = '''\
from pyspark.sql import functions as F

from mesh_dagster import ExecutionContext, model


@model("sqlmesh_example.item_totals", columns={"item_id": "int", "orders": "bigint"}, grain=["item_id"])
def execute(context: ExecutionContext, start, end, execution_time):
    full = context.spark.table(context.resolve_table("sqlmesh_example.full_model"))
    return full.select("item_id", F.col("num_orders").cast("bigint").alias("orders"))
'''


def test_plan_auto_apply_builds_a_python_model(tmp_path, mesh):
    project = copy_example(tmp_path / "p")
    (project / "models" / "item_totals.py").write_text(PY_MODEL)

    out = mesh(project, "plan", "--auto-apply").stdout
    assert "sqlmesh_example.item_totals" in out
    assert "sqlmesh_example.item_totals: [full refresh]" in out
    assert "✔ Virtual layer updated" in out

    rendered = mesh(project, "render", "sqlmesh_example.item_totals").stdout
    assert rendered.startswith("-- sqlmesh_example.item_totals is a Python model (models/item_totals.py:6): "
                               "it has no SQL to render.")

    rows = mesh(project, "fetchdf", "SELECT t.item_id, t.orders = f.num_orders AS same FROM "
                "sqlmesh_example.item_totals t JOIN sqlmesh_example.full_model f USING (item_id)").stdout
    assert "False" not in rows and rows.count("True") == 3  # one row per item of full_model
