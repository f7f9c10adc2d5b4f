"""An environment's assets show the column lineage of the version it serves (no Spark): dev serving
version A of a model while the working tree holds B shows A's lineage (the snapshot stored with A),
B's once B is applied; a snapshot stored before lineage was shows none, never the working tree's;
the lineage cache never holds A's lineage under B's fingerprint."""

from __future__ import annotations

import json
import shutil
import sqlite3

import dagster as dg
import pytest
from project_builder import record_plan
from project_copies import EXAMPLE

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from mesh_dagster.dagster.mapping.graph import ServedVersion, build_graph

FULL, INC = "sqlmesh_example.full_model", "sqlmesh_example.incremental_model"
# Version B: a column read from another parent (the seed), through a join.
VERSION_B = """MODEL (
  name sqlmesh_example.full_model,
  kind FULL,
  cron '@daily',
  grain item_id,
  audits (assert_positive_order_ids),
);

SELECT
  i.item_id,
  COUNT(DISTINCT i.id) AS num_orders,
  MAX(s.event_date) AS last_seen
FROM
  sqlmesh_example.incremental_model AS i
  JOIN sqlmesh_example.seed_model AS s ON i.id = s.id
GROUP BY i.item_id
"""


@pytest.fixture
def example(tmp_path):
    root = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    return root


def _applied(root, environment: str) -> None:
    """The working tree's plan of `environment`, recorded as applied (state only)."""
    ctx = Context(root)
    try:
        record_plan(ctx.plans.plan(environment), ctx.state)
    finally:
        ctx.close()


def _lineage(root, environment: str) -> dict[str, set[tuple[str, str]]] | None:
    """full_model's column lineage in `environment`'s code location, by upstream table name."""
    schema = "sqlmesh_example" if environment == "prod" else f"sqlmesh_example__{environment}"
    asset = definitions(root, environment).resolve_asset_graph().get(dg.AssetKey([schema, "full_model"]))
    if "dagster/column_lineage" not in asset.metadata:
        assert "mesh/column_lineage" not in asset.metadata
        return None
    value = asset.metadata["dagster/column_lineage"]
    lineage = value.value if isinstance(value, dg.TableColumnLineageMetadataValue) else value
    assert all(dep.asset_key.path[0] == schema for deps in lineage.deps_by_column.values() for dep in deps)
    return {column: {(dep.asset_key.path[-1], dep.column_name) for dep in deps}
            for column, deps in lineage.deps_by_column.items()}


A = {"item_id": {("incremental_model", "item_id")}, "num_orders": {("incremental_model", "id")}}
B = {**A, "last_seen": {("seed_model", "event_date")}}


def test_dev_shows_the_lineage_of_the_version_it_serves_until_the_next_is_applied(example):
    _applied(example, "dev")  # dev serves version A
    (example / "models" / "full_model.sql").write_text(VERSION_B)

    assert _lineage(example, "dev") == A  # not the working tree's B
    # the working tree's lineage is B's, cached under B's fingerprint only: prod, which serves
    # nothing yet, shows B's (read after dev's load, from the same cache)
    assert _lineage(example, "prod") == B
    assert _lineage(example, "dev") == A

    _applied(example, "dev")  # B applied to dev
    assert _lineage(example, "dev") == B


def test_both_environments_in_one_location_each_show_their_own(example):
    _applied(example, "prod")  # prod serves A
    (example / "models" / "full_model.sql").write_text(VERSION_B)
    _applied(example, "dev")  # dev serves B, the working tree's
    graph = definitions(example, ["prod", "dev"]).resolve_asset_graph()

    def reads(schema: str) -> set[str]:
        lineage = graph.get(dg.AssetKey([schema, "full_model"])).metadata["dagster/column_lineage"]
        return set((lineage.value if isinstance(lineage, dg.TableColumnLineageMetadataValue) else lineage)
                   .deps_by_column)

    assert reads("sqlmesh_example") == set(A)
    assert reads("sqlmesh_example__dev") == set(B)


def test_a_served_snapshot_stored_without_lineage_shows_none_not_the_working_trees(example):
    _applied(example, "dev")
    _forget_stored_lineage(example)  # as a store written before snapshots kept their lineage
    assert _lineage(example, "dev") == A  # the version dev serves is the working tree's: its lineage
    (example / "models" / "full_model.sql").write_text(VERSION_B)
    assert _lineage(example, "dev") is None  # dev serves A, whose lineage is not known: none, not B's
    # its columns are still the served version's, the working tree's pending
    asset = definitions(example, "dev").resolve_asset_graph().get(
        dg.AssetKey(["sqlmesh_example__dev", "full_model"]))
    assert [c.name for c in asset.metadata["dagster/column_schema"].columns] == ["item_id", "num_orders"]
    assert [c.name for c in asset.metadata["mesh/pending_columns"].columns] == ["item_id", "num_orders",
                                                                                "last_seen"]


def _forget_stored_lineage(root) -> None:
    """Drop `lineage` from every stored snapshot's capture, as mesh wrote them before it existed."""
    conn = sqlite3.connect(root / ".mesh" / "state.db")
    try:
        rows = conn.execute("SELECT name, identifier, payload FROM mesh_snapshots").fetchall()
        assert any(json.loads(p)["capture"].get("lineage") for _, _, p in rows)
        for name, identifier, payload in rows:
            data = json.loads(payload)
            del data["capture"]["lineage"]
            conn.execute("UPDATE mesh_snapshots SET payload = ? WHERE name = ? AND identifier = ?",
                         (json.dumps(data), name, identifier))
        conn.commit()
    finally:
        conn.close()


def test_a_graph_built_without_lineage_shows_none_for_served_versions_either(example):
    ctx = Context(example)
    try:
        plan = ctx.plans.plan("prod", allow_empty=True, render_added=False)
        served = {FULL: ServedVersion(columns={"item_id": "int"}, lineage={"item_id": [(INC, "x")]})}
        assert build_graph(ctx.project, plan, served=served).assets[FULL].column_deps is None
        build = build_graph(ctx.project, plan, served=served, lineage=ctx.column_lineage)
        shown = build.assets[FULL]
        assert shown.column_deps == {"item_id": [(build.assets[INC].asset_key, "x")]}  # the served one, by key
        assert shown.columns == {"item_id": "int"}
    finally:
        ctx.close()
