"""A Python model is an asset like the others (no Spark): its key, its dependency, its kinds."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
from project_copies import EXAMPLE

from mesh_dagster.dagster import definitions

PY_MODEL = '''\
from mesh_dagster import ExecutionContext, model


@model("sqlmesh_example.item_totals", columns={"item_id": "int", "num_orders": "bigint"})
def execute(context: ExecutionContext, start, end, execution_time):
    return context.spark.table(context.resolve_table("sqlmesh_example.full_model"))
'''


def test_python_model_asset(tmp_path: Path) -> None:
    example = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    (example / "models" / "item_totals.py").write_text(PY_MODEL)
    node = definitions(example).resolve_asset_graph().get(dg.AssetKey(["sqlmesh_example", "item_totals"]))
    assert node.parent_keys == {dg.AssetKey(["sqlmesh_example", "full_model"])}
    assert {"dagster/kind/python", "dagster/kind/spark", "dagster/kind/table"} <= set(node.tags)
    assert node.tags["mesh/kind"] == "FULL"
    assert node.metadata["mesh/file"] == "models/item_totals.py:4"
    assert "def execute(context: ExecutionContext" in node.metadata["mesh/python"].value
    assert "@model" not in node.metadata["mesh/python"].value
