"""`column_descriptions` reach Dagster: the asset's column schema carries them (no Spark)."""

from __future__ import annotations

import shutil

import dagster as dg
from project_copies import EXAMPLE

from mesh_dagster.dagster import definitions


def test_column_descriptions_are_dagster_column_descriptions(tmp_path):
    root = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    full = root / "models" / "full_model.sql"
    full.write_text(full.read_text().replace(
        "grain item_id,", "grain item_id,\n  column_descriptions (num_orders = 'Distinct orders of the item'),"))
    graph = definitions(root).resolve_asset_graph()
    schema = graph.get(dg.AssetKey(["sqlmesh_example", "full_model"])).metadata["dagster/column_schema"]
    assert [(c.name, c.description) for c in schema.columns] == [
        ("item_id", None), ("num_orders", "Distinct orders of the item")]
