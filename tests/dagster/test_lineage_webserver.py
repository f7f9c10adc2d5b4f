"""End to end through `mesh ui` (webserver, daemon, code servers) and GraphQL: the column lineage
every SQL model's asset carries reaches the webserver, in prod's and dev's code locations, each
pointing at its own environment's assets, whose column schemas name the upstream columns (what
the UI's column lineage view draws). Nothing is applied: loading the definitions needs no Spark."""

from __future__ import annotations

import pytest
from project_copies import recent_example
from test_dagster_webserver import Dagster, _free_port

pytestmark = pytest.mark.slow

LINEAGE = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  metadataEntries { label __typename
    ... on TableColumnLineageMetadataEntry { lineage { columnName columnDeps { assetKey { path } columnName } } }
    ... on TableSchemaMetadataEntry { schema { columns { name type } } } } } }"""


def _entries(server: Dagster, schema: str, table: str) -> dict[str, dict]:
    (node,) = server.query(LINEAGE, keys=[{"path": [schema, table]}])["assetNodes"]
    return {e["label"]: e for e in node["metadataEntries"]}


def test_column_lineage_metadata_over_graphql_in_each_environment(tmp_path):
    project = recent_example(tmp_path / "project", 3)
    server = Dagster(project, _free_port(), tmp_path / "dagster.log", ["prod", "dev"])
    try:
        server.wait_loaded()
        for schema in ("sqlmesh_example", "sqlmesh_example__dev"):
            entries = _entries(server, schema, "full_model")
            lineage = entries["dagster/column_lineage"]
            assert lineage["__typename"] == "TableColumnLineageMetadataEntry"
            assert {e["columnName"]: [(d["assetKey"]["path"], d["columnName"]) for d in e["columnDeps"]]
                    for e in lineage["lineage"]} == {
                "item_id": [([schema, "incremental_model"], "item_id")],
                "num_orders": [([schema, "incremental_model"], "id")]}
            upstream = _entries(server, schema, "incremental_model")
            columns = [c["name"] for c in upstream["dagster/column_schema"]["schema"]["columns"]]
            assert {"id", "item_id"} <= set(columns)
            assert [(d["assetKey"]["path"], d["columnName"]) for e in upstream["dagster/column_lineage"]["lineage"]
                    if e["columnName"] == "id" for d in e["columnDeps"]] == [([schema, "seed_model"], "id")]
    finally:
        server.stop()
