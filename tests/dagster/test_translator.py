"""MeshTranslator (dagster/mapping/translator.py): every model-to-Dagster decision is one method, and a
Python subclass or a component's `translation:` in YAML changes the specs, the dependencies, the
schedules' selections and the partitions consistently. No Spark: loading plans against the state
store only."""

from __future__ import annotations

from datetime import datetime

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import ProjectLoadError, definitions
from mesh_dagster.dagster.component import MeshProjectComponent
from mesh_dagster.dagster.mapping.translator import MeshTranslator

FILES = {
    "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n    ds: date\n",
    "models/a.sql": """
        MODEL (name s.a, kind FULL, owner 'ann@example.com', tags (finance), description 'The a table');

        SELECT id FROM raw.events
        """,
    "models/b.sql": """
        MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2024-01-01', owner 'bob');

        SELECT id, ds FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds
        """,
    "models/c.sql": """
        MODEL (name t.c, kind VIEW);

        SELECT a.id FROM s.a AS a JOIN s.b AS b ON a.id = b.id
        """,
}


@pytest.fixture
def project(tmp_path):
    return write_project(tmp_path / "p", FILES)


def _specs(defs: dg.Definitions) -> dict[str, dg.AssetSpec]:
    return {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}


class TeamTranslator(MeshTranslator):
    """Every decision overridden once."""

    def get_asset_key(self, asset):
        return super().get_asset_key(asset).with_prefix("lake")

    def get_group_name(self, asset):
        return "raw" if asset.is_external else f"team_{asset.model.schema_name}"

    def get_description(self, asset):
        return f"{asset.name} in {asset.environment}"

    def get_tags(self, asset):
        return {**super().get_tags(asset), "team": "analytics"}

    def get_kinds(self, asset):
        return {"parquet", *super().get_kinds(asset)}

    def get_owners(self, asset):
        return ["team:data"]

    def get_metadata(self, asset):
        return {**super().get_metadata(asset), "layer": "silver"}

    def get_automation_condition(self, asset):
        return None if asset.is_external else dg.AutomationCondition.eager()

    def get_partitions_def(self, unit, start_ms):
        later = max(start_ms, int(datetime(2025, 1, 1).timestamp() * 1000))
        return super().get_partitions_def(unit, later)


def test_the_default_translator_keeps_the_mapping(project):
    specs = _specs(definitions(project))
    a, b, ext = specs["s/a"], specs["s/b"], specs["raw/events"]
    assert (a.group_name, a.owners) == ("s", ["ann@example.com"])
    assert a.automation_condition.get_label().startswith("mesh run: due intervals on 0 0 * * * (UTC)")
    # nothing applied yet: the plan's word first (the catalog's line), then the model's description
    assert a.description.startswith("New in prod: to rebuild.") and a.description.endswith("\n\nThe a table")
    assert a.kinds == {"spark", "table"} and a.tags == {  # icons only: the kind is in mesh/kind
        "finance": "", "mesh/kind": "FULL", "dagster/kind/spark": "", "dagster/kind/table": ""}
    assert b.owners == [] and b.metadata["mesh/owner"] == "bob"  # not an e-mail: metadata only
    assert (ext.group_name, ext.kinds, ext.description) == ("external", {"spark"}, "External table `raw.events`")
    assert [d.asset_key.to_user_string() for d in specs["t/c"].deps] == ["s/a", "s/b"]


def test_a_python_translator_changes_every_decision(project):
    defs = definitions(project, translator=TeamTranslator())
    specs = _specs(defs)
    assert set(specs) == {"lake/s/a", "lake/s/b", "lake/t/c", "lake/raw/events"}
    c = specs["lake/t/c"]
    assert [d.asset_key.to_user_string() for d in c.deps] == ["lake/s/a", "lake/s/b"]  # deps follow the keys
    assert c.group_name == "team_t" and specs["lake/raw/events"].group_name == "raw"
    assert c.description == "t.c in prod"
    assert c.tags["team"] == "analytics" and c.kinds == {"parquet", "spark", "view"}
    assert c.owners == ["team:data"] and c.metadata["layer"] == "silver"
    assert isinstance(c.automation_condition, dg.AutomationCondition)
    assert specs["lake/raw/events"].automation_condition is None
    # the code version stays the fingerprint, whatever the translator
    assert c.code_version == c.metadata["mesh/fingerprint"]
    graph = defs.resolve_asset_graph()
    partitions = graph.get(dg.AssetKey(["lake", "s", "b"])).partitions_def
    assert partitions.get_first_partition_key() == "2025-01-01"
    # the cron schedule's job selects the translated keys
    job = defs.resolve_job_def("run_prod_daily")
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == {"lake/s/a", "lake/s/b", "lake/t/c"}


def test_a_translator_giving_two_models_one_key_is_refused(project):
    class OneKey(MeshTranslator):
        def get_asset_key(self, asset):
            return dg.AssetKey(["all", asset.name.split(".")[1][0] if asset.name != "t.c" else "a"])

    with pytest.raises(ProjectLoadError, match=r"Models s\.a and t\.c have the same asset key all/a: the translator "
                                               r"must give each model its own key"):
        definitions(project, translator=OneKey())


def test_partitions_must_keep_the_intervals_boundaries(project):
    class Hourly(MeshTranslator):
        def get_partitions_def(self, unit, start_ms):
            return dg.HourlyPartitionsDefinition(start_date="2024-01-01-00:00")

    with pytest.raises(ProjectLoadError, match=r"Hourly.get_partitions_def\('day'\) must return a "
                                               r"TimeWindowPartitionsDefinition with cron_schedule '0 0 \* \* \*', "
                                               r"fmt '%Y-%m-%d' and timezone 'UTC'"):
        definitions(project, translator=Hourly())


def test_several_environments_make_one_code_location(project):
    ctx = Context(project)
    from project_builder import record_plan

    record_plan(ctx.plans.plan("prod"), ctx.state)
    ctx.close()
    (project / "models" / "a.sql").write_text((project / "models" / "a.sql").read_text() + "\nWHERE id > 0\n")
    defs = definitions(project, ["prod", "dev"])
    specs = _specs(defs)
    assert {"s/a", "s__dev/a", "t__dev/c", "raw/events"} <= set(specs)  # external tables once
    assert specs["s__dev/a"].metadata["mesh/change"] == specs["s/a"].metadata["mesh/change"] == "Breaking"
    assert specs["s__dev/b"].metadata["mesh/change"] == "Unchanged"
    names = {job.name for job in defs.resolve_all_job_defs()}
    assert {"promote_prod", "promote_dev", "plan_dev", "run_prod_daily"} <= names
    assert {"restamp_prod_sensor", "restamp_dev_sensor"} <= {sensor.name for sensor in defs.sensors or []}


def test_the_load_plan_skips_renderings_but_computes_the_same_plan(project):
    ctx = Context(project)
    from project_builder import record_plan

    record_plan(ctx.plans.plan("prod"), ctx.state)
    (project / "models" / "a.sql").write_text((project / "models" / "a.sql").read_text() + "\nWHERE id > 1\n")
    (project / "models" / "d.sql").write_text("MODEL (name s.d, kind FULL);\nSELECT id FROM s.a\n")
    ctx = Context(project)
    full, light = ctx.plans.plan("dev", allow_empty=True), ctx.plans.plan("dev", allow_empty=True, render_added=False)
    ctx.close()
    assert {n: (s.identifier, s.version, s.change_category) for n, s in full.snapshots.items()} == \
        {n: (s.identifier, s.version, s.change_category) for n, s in light.snapshots.items()}
    assert full.categories == light.categories and full.indirectly_modified == light.indirectly_modified
    assert light.snapshots["s.d"].rendered_query is None  # added: nothing to compare it with
    assert light.snapshots["s.a"].rendered_query == full.snapshots["s.a"].rendered_query  # compared: rendered


def _component_defs(project, attributes: dict) -> dict[str, dg.AssetSpec]:
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.defs_folder_path / "mesh"
        path.mkdir()
        (path / "defs.yaml").write_text(yaml.safe_dump(
            {"type": "mesh_dagster.MeshProjectComponent", "attributes": {"project": str(project), **attributes}}))
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, MeshProjectComponent)
            return _specs(defs)


def test_yaml_translation_changes_the_specs(project):
    specs = _component_defs(project, {"translation": {
        "group_name": "mesh_{{ model.schema }}",
        "key_prefix": "warehouse",
        "tags": {"team": "{{ model.schema }}"},
        "kinds": ["parquet"],
        "owners": ["team:data"],
        "description": "{{ model.name }} ({{ model.kind }})",
        "metadata": {"layer": "{{ model.environment }}"},
        "automation_condition": "{{ dg.AutomationCondition.on_cron('0 6 * * *') }}",
    }})
    assert set(specs) == {"warehouse/s/a", "warehouse/s/b", "warehouse/t/c", "warehouse/raw/events"}
    c = specs["warehouse/t/c"]
    assert [d.asset_key.to_user_string() for d in c.deps] == ["warehouse/s/a", "warehouse/s/b"]
    assert (c.group_name, c.description, c.owners, c.kinds) == ("mesh_t", "t.c (VIEW)", ["team:data"], {"parquet"})
    assert c.tags["team"] == "t" and c.tags["mesh/kind"] == "VIEW"  # tags and metadata merge with the translator's
    assert c.metadata["layer"] == "prod" and "mesh/fingerprint" in c.metadata
    assert c.automation_condition.get_label() == "on_cron(0 6 * * *, UTC)"  # the user's, not mesh's


def test_yaml_translation_on_top_of_a_python_translator(project, monkeypatch):
    monkeypatch.setattr(MeshProjectComponent, "get_translator", lambda self: TeamTranslator())
    specs = _component_defs(project, {"environments": ["prod"], "translation": {"group_name": "yaml_group"}})
    assert specs["lake/s/a"].group_name == "yaml_group" and specs["lake/s/a"].owners == ["team:data"]


@pytest.mark.parametrize("attribute, value", [
    ("code_version", "1"),
    ("deps", ["x/y"]),
    ("partitions_def", {"type": "daily", "start_date": "2024-01-01"}),
])
def test_yaml_translation_refuses_what_the_graph_depends_on(project, attribute, value):
    with pytest.raises(Exception) as raised:
        _component_defs(project, {"translation": {attribute: value}})
    assert f"translation: `{attribute}` cannot be set for mesh models" in _messages(raised.value)


def test_a_key_must_not_depend_on_the_spec(project):
    with pytest.raises(Exception) as raised:
        _component_defs(project, {"translation": {"key": "{{ spec.group_name or 'x' }}/{{ model.table }}"}})
    assert "translation: the key of raw.events must not depend on `spec` (external/events at spec time, x/events at " \
           "key time)" in _messages(raised.value)


def _messages(error: BaseException | None) -> str:
    """The messages of an error and of the errors it was raised from (Dagster wraps a component's)."""
    out = []
    while error is not None:
        out.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(out)
