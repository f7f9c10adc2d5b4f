"""Column lineage in Dagster (no Spark): every SQL model's asset carries `dagster/column_lineage`,
whose upstream asset keys are the environment's own assets (dev's point at dev's), looked through
EMBEDDED models, external tables at their one key; a translator's keys are followed; a second load
takes the lineage from the cache instead of rendering queries again."""

from __future__ import annotations

import shutil

import dagster as dg
import pytest
from project_copies import EXAMPLE

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from mesh_dagster.dagster.mapping.translator import MeshTranslator

SCHEMA = "sqlmesh_example"
EXTRA = {
    "models/orders_by_item.sql": """MODEL (name sqlmesh_example.orders_by_item, kind EMBEDDED);
SELECT item_id AS item, num_orders FROM sqlmesh_example.full_model
""",
    "models/report.sql": """MODEL (name sqlmesh_example.report, kind FULL);
WITH o AS (SELECT * FROM sqlmesh_example.orders_by_item)
SELECT o.item, o.num_orders * p.price AS revenue, p.price
FROM o JOIN raw.prices AS p ON o.item = p.item_id
""",
    "external_models.yaml": """- name: raw.prices
  columns:
    item_id: int
    price: double
""",
}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    for rel, text in EXTRA.items():
        (root / rel).write_text(text)
    return root


def _lineage(graph, key: dg.AssetKey) -> dict[str, set[tuple[tuple[str, ...], str]]]:
    value = graph.get(key).metadata["dagster/column_lineage"]
    lineage = value.value if isinstance(value, dg.TableColumnLineageMetadataValue) else value
    assert isinstance(lineage, dg.TableColumnLineage)
    return {column: {(tuple(dep.asset_key.path), dep.column_name) for dep in deps}
            for column, deps in lineage.deps_by_column.items()}


def _key(schema: str, table: str) -> tuple[str, ...]:
    return (schema, table)


@pytest.mark.parametrize("environment, schema", [("prod", SCHEMA), ("dev", f"{SCHEMA}__dev")])
def test_every_sql_model_carries_its_column_lineage_in_its_environment(project, environment, schema):
    graph = definitions(project, ["prod", "dev"]).resolve_asset_graph()
    key = lambda table: dg.AssetKey([schema, table])  # noqa: E731
    assert _lineage(graph, key("incremental_model")) == {
        c: {(_key(schema, "seed_model"), c)} for c in ("id", "item_id", "event_date")}
    assert _lineage(graph, key("full_model")) == {
        "item_id": {(_key(schema, "incremental_model"), "item_id")},
        "num_orders": {(_key(schema, "incremental_model"), "id")}}
    # through the CTE and the EMBEDDED model (no asset) to full_model; raw.prices: one key everywhere
    assert _lineage(graph, key("report")) == {
        "item": {(_key(schema, "full_model"), "item_id")},
        "revenue": {(_key(schema, "full_model"), "num_orders"), (("raw", "prices"), "price")},
        "price": {(("raw", "prices"), "price")}}
    # every upstream key is an asset of the code location; seeds and external tables read nothing
    for dep_key, _ in set().union(*_lineage(graph, key("report")).values()):
        assert dg.AssetKey(list(dep_key)) in graph.get_all_asset_keys()
    assert "dagster/column_lineage" not in graph.get(key("seed_model")).metadata
    assert "dagster/column_lineage" not in graph.get(dg.AssetKey(["raw", "prices"])).metadata
    # the same lineage as a table the open-source UI shows (it hides the canonical entry)
    shown = graph.get(key("report")).metadata["mesh/column_lineage"]
    assert [r.data for r in shown.records] == [
        {"column": "item", "reads": f"{schema}/full_model.item_id"},
        {"column": "revenue", "reads": f"raw/prices.price, {schema}/full_model.num_orders"},
        {"column": "price", "reads": "raw/prices.price"}]


def test_lineage_follows_the_translators_keys_and_is_cached(project, monkeypatch):
    class Prefixed(MeshTranslator):
        def get_asset_key(self, asset):
            return super().get_asset_key(asset).with_prefix("warehouse")

    graph = definitions(project, translator=Prefixed()).resolve_asset_graph()
    assert _lineage(graph, dg.AssetKey(["warehouse", SCHEMA, "full_model"]))["num_orders"] == {
        (("warehouse", SCHEMA, "incremental_model"), "id")}

    def no_rendering(self, model):
        raise AssertionError(f"lineage of {model} computed again")

    monkeypatch.setattr(Context, "column_lineage", no_rendering)
    again = definitions(project).resolve_asset_graph()
    assert _lineage(again, dg.AssetKey([SCHEMA, "report"]))["price"] == {(("raw", "prices"), "price")}
