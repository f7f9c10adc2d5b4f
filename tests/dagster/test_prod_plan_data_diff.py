"""The reviewer of a protected prod plan sees the data diff a dev plan computed, on real Spark and
through Dagster's own APIs: a change applied to dev computes its diff against prod's table; the
`plan_prod` run that records the same change for prod (no Spark: recording never starts it) shows
that diff, with where and when it was computed, and its record holds it; the approved
`apply_plan_prod` run keeps it. A second change made in dev is diffed against dev's own table,
not prod's: a prod plan of that version gets no diff, and its summary says how to get one."""

from __future__ import annotations

import dagster as dg
import pytest

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.dagster.test_plan_data_diff_metadata import _diff_events, _output_metadata
from tests.spark.test_plan_data_diff_spark import NEW_QUERY, _project

pytestmark = pytest.mark.spark

PROTECTED = "protected_environments:\n  prod:\n    approvers: [bob@example.com]\n"
WHEN = "2020-01-03"


def _plan_prod(defs: dg.Definitions, instance: dg.DagsterInstance) -> tuple[dict, str]:
    result = defs.resolve_job_def("plan_prod").execute_in_process(
        run_config={"ops": {"plan_prod_changes": {"config": {"execution_time": WHEN}}}}, instance=instance)
    return _output_metadata(result), result.run_id


def test_a_prod_plan_shows_the_diff_its_change_got_in_dev(tmp_path, engine, unique_schema, monkeypatch):
    schema, m = unique_schema, f"{unique_schema}.m"
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = _project(tmp_path, schema)
    base = Context(root, engine=engine)
    base.reviews.apply(base.plans.plan(execution_time=WHEN))
    base.close()
    (root / "config.yaml").write_text((root / "config.yaml").read_text() + PROTECTED)  # prod exists: protect it
    first = f"MODEL (name {m}, kind FULL, grain (id));\n" + NEW_QUERY.format(s=schema) + "\n"
    (root / "models" / "m.sql").write_text(first)
    ctx = Context(root, engine=engine)
    dev = ctx.plans.plan("dev", execution_time=WHEN)
    ctx.reviews.apply(dev)  # builds the new table and computes its diff against prod's
    computed = ctx.reviews.records.find(dev.plan_id).summary.data_diffs[m]
    assert (computed.old_environment, computed.changed, computed.only_new) == ("prod", 3, 1)

    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(root, ["prod", "dev"], shared_spark=False)
    metadata, planned_run = _plan_prod(defs, instance)
    plan_id = metadata["plan_id"].value
    (row,) = metadata["data_diff"].value.records
    note = f"reused: computed by plan {dev.plan_id[:8]} in dev at "
    assert row.data["model"] == m and (row.data["changed"], row.data["only_new"], row.data["only_old"]) == (3, 1, 1)
    assert row.data["note"].startswith(note) and "against the same prod table" in row.data["note"]
    assert "| `1` | `11` | `10` |" in metadata["data_diff_details"].value  # dev's sample rows
    assert note in metadata["summary"].value and "no data diff" not in metadata["summary"].value
    record = ctx.reviews.records.find(plan_id)
    reused = record.summary.data_diffs[m]
    assert (record.environment, record.status.value, reused.source_plan_id) == ("prod", "pending", dev.plan_id)
    origin = {"source_plan_id", "source_environment"}
    assert reused.model_dump(exclude=origin) == computed.model_dump(exclude=origin)  # dev's diff, as computed

    # A second change in dev is compared with dev's table (the first change), not prod's: a prod
    # plan of that version finds no diff of its comparison.
    (root / "models" / "m.sql").write_text(first.replace("v + 1", "v + 2"))
    ctx.reload()
    again = ctx.plans.plan("dev", execution_time=WHEN)
    ctx.reviews.apply(again)
    second = ctx.reviews.records.find(again.plan_id).summary.data_diffs[m]
    assert second.old_table == dev.snapshots[m].table_name and second.changed == 3
    other, _ = _plan_prod(defs, instance)
    assert "data_diff" not in other  # nothing to show as a table
    summary = other["summary"].value
    assert f"- `{m}`: no data diff: apply this change to a development environment first (`mesh plan dev`)" in summary
    assert ctx.reviews.records.find(other["plan_id"].value).summary.data_diffs == {}
    ctx.decide(other["plan_id"].value, "cancel")

    # The first prod plan, approved and applied (the project back at its change), keeps its diff.
    (root / "models" / "m.sql").write_text(first)
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    approver = Context(root)
    approver.decide(plan_id, "approve")
    approver.close()
    applied = defs.resolve_job_def("apply_plan_prod").execute_in_process(
        run_config={"ops": {"apply_plan_prod_record": {"config": {"plan_id": plan_id}}}}, instance=instance)
    shown = _output_metadata(applied)
    assert shown["status"].value == "completed" and shown["data_diff"] == metadata["data_diff"]
    assert ctx.reviews.records.find(plan_id).summary.data_diffs == record.summary.data_diffs
    # plan_prod's page showed the reused diff from the start: the status sensor does not post it again
    defs.resolve_sensor_def("plan_status_prod_sensor")(dg.build_sensor_context(instance=instance, definitions=defs))
    assert _diff_events(instance, planned_run) == []
    ctx.close()
