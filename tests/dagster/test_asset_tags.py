"""Model tags and kinds on Dagster assets (dagster/assets.py), without Spark: a model's tags become
asset tags (labels) Dagster accepts, whatever the user wrote, and the kinds name Spark and the kind."""

from __future__ import annotations

import dagster as dg
import pytest
from project_builder import write_project

from mesh_dagster.dagster import definitions
from mesh_dagster.dagster.mapping.translator import tag_key

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


def test_kinds_are_spark_and_the_plan_or_the_model_kind(graph):
    """Nothing is built yet: every model is new to prod, with its intervals to compute; the plan
    takes the kind's place on the node (one row of tags), the kind stays in `mesh/kind`."""
    kinds = {k: graph.get(dg.AssetKey(["s", k])).kinds for k in ("a", "b", "c")}
    assert {k: v - {n for n in v if n.startswith("recompute-")} for k, v in kinds.items()} == {
        "a": {"spark", "added"}, "b": {"spark", "added"}, "c": {"spark", "added"}}
    assert kinds["c"] >= {"recompute-1"}  # a view: built once
    assert graph.get(dg.AssetKey(["s", "b"])).tags["mesh/kind"] == "INCREMENTAL_BY_TIME_RANGE"


def test_assets_can_be_selected_by_a_model_tag(tmp_path):
    defs = definitions(write_project(tmp_path / "p", FILES))
    selection = dg.AssetSelection.tag("finance", "")
    assert selection.resolve(defs.resolve_asset_graph()) == {dg.AssetKey(["s", "a"]), dg.AssetKey(["s", "c"])}


@pytest.mark.parametrize("tag, key", [
    ("finance", "finance"),
    ("Fin-Ops.v2", "Fin-Ops.v2"),
    ("team/data eng", "team_data_eng"),  # no `prefix/`: a tag never lands in dagster/ or mesh/
    ("dagster/kind/spark", "dagster_kind_spark"),
    ("  padded  ", "padded"),
    ("é", "_"),
    ("x" * 70, "x" * 63),
])
def test_tag_keys(tag, key):
    assert tag_key(tag) == key
