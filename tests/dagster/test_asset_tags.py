"""Model tags and kinds on Dagster assets (dagster/assets.py), without Spark: a model's tags become
asset tags (labels) Dagster accepts, whatever the user wrote, and the kinds name Spark and the storage."""

from __future__ import annotations

import dagster as dg
import pytest
from project_builder import write_project

from mesh_dagster.dagster import definitions

FILES = {
    "models/a.sql": """
        MODEL (name s.a, kind FULL, tags (finance, 'team/data eng', 'pii:high', dagster));

        SELECT 1 AS x
        """,
    "models/b.sql": """
        MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column d), start '2024-01-01');

        SELECT x, CAST('2024-01-01' AS DATE) AS d FROM s.a WHERE CAST('2024-01-01' AS DATE) BETWEEN @start_date AND @end_date
        """,
    "models/c.sql": f"""
        MODEL (name s.c, kind VIEW, tags ({"t" * 80}, finance));

        SELECT x FROM s.a
        """,
}


@pytest.fixture
def graph(tmp_path):
    return definitions(write_project(tmp_path / "p", FILES)).resolve_asset_graph()


def test_model_tags_are_asset_labels_and_the_kind_a_mesh_tag(graph):
    tags = graph.get(dg.AssetKey(["s", "a"])).tags
    assert {k: v for k, v in tags.items() if not k.startswith("dagster/kind/")} == {
        "finance": "", "team_data_eng": "", "pii_high": "", "dagster": "", "mesh/kind": "FULL"}
    untagged = graph.get(dg.AssetKey(["s", "b"])).tags
    assert {k: v for k, v in untagged.items() if not k.startswith("dagster/kind/")} == {
        "mesh/kind": "INCREMENTAL_BY_TIME_RANGE"}


def test_long_tags_are_cut_to_what_dagster_accepts(graph):
    tags = graph.get(dg.AssetKey(["s", "c"])).tags
    assert "t" * 63 in tags and "finance" in tags


def test_kinds_are_icons_the_engine_and_the_storage_and_the_plan_is_a_check(graph):
    """Kinds the UI draws as icons only (words crowd the catalog's name column): the engine and what
    the view points at. Nothing is built yet: every model is new to prod, which its plan check says
    (checked on its verdict in test_plan_check.py); the kind stays in `mesh/kind`."""
    kinds = {k: graph.get(dg.AssetKey(["s", k])).kinds for k in ("a", "b", "c")}
    assert kinds == {"a": {"spark", "table"}, "b": {"spark", "table"}, "c": {"spark", "view"}}
    assert graph.get(dg.AssetKey(["s", "b"])).tags["mesh/kind"] == "INCREMENTAL_BY_TIME_RANGE"
    checks = {k.asset_key.path[-1]: k.name for k in graph.asset_check_keys}
    assert checks == {"a": "serves_current_code", "b": "serves_current_code", "c": "serves_current_code"}
