"""Text from the project that the Dagster UI shows goes through the CLI's escaping of control and
bidirectional characters (core/config/display.py): a right-to-left override (U+202E) in a model's
description reached the asset page and reversed it (issue 34, point 11). Read back through the
webserver's GraphQL API (a code server process loading the definitions), as the UI reads it."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from plan_checks import audit_checks
from project_builder import write_project

from mesh_dagster.dagster import definitions
from mesh_dagster.dagster.component import TranslatedMeshTranslator
from mesh_dagster.dagster.mapping.translator import MeshTranslator

RLO = "\u202e"
MODEL = f"""MODEL (
  name s.orders,
  kind FULL,
  description 'Orders, {RLO}desrever{RLO} and\x1b[2K hidden',
  owner 'ops{RLO}@example.com',
  column_descriptions (id = 'The id {RLO}esrever'),
  audits (described(threshold := '{RLO}0'))
);

SELECT 1 AS id, 'a text {RLO} in the query, and ```` a fence' AS note
"""
AUDIT = f"""AUDIT (name described, description 'Never {RLO}evitagen');

SELECT * FROM @this_model WHERE id < @threshold
"""
QUERY = """
query ($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      description
      owners { ... on UserAssetOwner { email } ... on TeamAssetOwner { team } }
      metadataEntries {
        label
        ... on TextMetadataEntry { text }
        ... on MarkdownMetadataEntry { mdStr }
        ... on TableSchemaMetadataEntry { schema { columns { name description } } }
      }
      assetChecksOrError { ... on AssetChecks { checks { name description } } }
    }
  }
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "p", {"models/orders.sql": MODEL, "audits/described.sql": AUDIT})


def _asset_node(tmp_path: Path, project: Path) -> dict:
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    code = tmp_path / "defs.py"
    code.write_text(f"from mesh_dagster.dagster import definitions\n\ndefs = definitions({str(project)!r})\n")
    with dg.instance_for_test() as instance, define_out_of_process_context(str(code), "defs", instance) as context:
        result = execute_dagster_graphql(context, QUERY, {"key": {"path": ["s", "orders"]}})
    assert not result.errors, result.errors
    return result.data["assetNodeOrError"]


def test_the_asset_page_shows_hidden_characters_as_escapes(tmp_path: Path, project: Path) -> None:
    node = _asset_node(tmp_path, project)
    shown = json.dumps(node, ensure_ascii=False)
    assert RLO not in shown and "\x1b" not in shown
    assert node["description"].endswith("Orders, \\u202edesrever\\u202e and\\x1b[2K hidden")
    entries = {entry["label"]: entry for entry in node["metadataEntries"]}
    assert entries["mesh/owner"]["text"] == "ops\\u202e@example.com"
    assert node["owners"] == []  # escaped, it is no e-mail address: the metadata shows it
    assert entries["dagster/column_schema"]["schema"]["columns"] == [
        {"name": "id", "description": "The id \\u202eesrever"}, {"name": "note", "description": None}]
    query = entries["mesh/query"]["mdStr"]
    assert query.startswith("`````sql\n") and query.endswith("\n`````")  # longer than the query's own ````
    assert "a text \\u202e in the query" in query
    (check,) = audit_checks(node["assetChecksOrError"]["checks"])
    assert check["description"].startswith("Never \\u202eevitagen\n\nAudit `described` (threshold := '\\u202e0')")


def test_a_translators_own_text_is_escaped_too(project: Path) -> None:
    """A subclass's description, and a component `translation:` (`{{ model.description }}` as written)."""

    class Subclass(MeshTranslator):
        def get_description(self, asset):
            return f"{RLO}own text"

    def translation(spec: dg.AssetSpec, asset) -> dg.AssetSpec:
        return spec.replace_attributes(description=f"translated {asset.model.description}",
                                       metadata={**spec.metadata, "team": f"{RLO}x"})

    for translator, expected in ((Subclass(), "\\u202eown text"),
                                 (TranslatedMeshTranslator(Subclass(), translation, sets_key=False),
                                  "translated Orders, \\u202edesrever")):
        spec = definitions(project, translator=translator).resolve_asset_graph().get(dg.AssetKey(["s", "orders"]))
        assert spec.description.startswith(expected)
        assert RLO not in json.dumps({"d": spec.description, **{k: str(v) for k, v in spec.metadata.items()}},
                                     ensure_ascii=False)
