"""The data diff of a development plan on the Dagster run pages, through Dagster's own APIs: the
`plan_dev` run says it is pending (no data of the new version exists yet: the plan job never
starts Spark), and the `apply_plan_dev` run that built the new table shows it as a table and as
Markdown with the sample rows; the record holds the same, and the plan status sensor then adds it
to the `plan_dev` run's log (once), so the page the reviewer opened shows it too."""

from __future__ import annotations

import dagster as dg
import pytest

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.spark.test_plan_data_diff_spark import NEW_QUERY, _project

pytestmark = pytest.mark.spark


def _output_metadata(result) -> dict:
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return output.event_specific_data.metadata


def test_plan_and_apply_runs_show_the_data_diff(tmp_path, engine, unique_schema, monkeypatch):
    schema = unique_schema
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = _project(tmp_path, schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    (root / "models" / "m.sql").write_text(f"MODEL (name {schema}.m, kind FULL, grain (id));\n"
                                           + NEW_QUERY.format(s=schema) + "\n")
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(root, ["prod", "dev"], shared_spark=False)

    planned = defs.resolve_job_def("plan_dev").execute_in_process(
        run_config={"ops": {"plan_dev_changes": {"config": {"execution_time": "2020-01-03"}}}}, instance=instance)
    metadata = _output_metadata(planned)
    plan_id = metadata["plan_id"].value
    assert metadata["data_diff"].value.startswith(f"pending for {schema}.m: computed once apply_plan_dev")
    assert "Pending for `" + f"{schema}.m`" in metadata["summary"].value

    applied = defs.resolve_job_def("apply_plan_dev").execute_in_process(
        run_config={"ops": {"apply_plan_dev_record": {"config": {"plan_id": plan_id}}}}, instance=instance)
    metadata = _output_metadata(applied)
    (row,) = metadata["data_diff"].value.records
    assert row.data == {"model": f"{schema}.m", "grain": "id", "old_rows": 10, "new_rows": 10, "only_new": 1,
                        "only_old": 1, "changed": 3, "unchanged": 6, "note": ""}
    assert [c.name for c in metadata["data_diff"].value.schema.columns][:3] == ["model", "grain", "old_rows"]
    details = metadata["data_diff_details"].value
    assert "`v` changed in 3 rows" in details and "| `id` | `new v` | `old v` |" in details
    assert "| `1` | `11` | `10` |" in details
    record = Context(root).reviews.records.find(plan_id)
    assert record.status.value == "completed" and record.summary.data_diffs[f"{schema}.m"].changed == 3

    assert instance.get_run_by_id(planned.run_id).tags["mesh/plan_id"] == plan_id
    assert _diff_events(instance, planned.run_id) == []
    sensor = defs.resolve_sensor_def("plan_status_dev_sensor")
    # A tick that already saw the apply's status change (the diff is attached after it, with no
    # status change of its own) still posts it; a later evaluation does not post it again.
    for cursor in (str(record.updated_ts), None):
        sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
        assert len(_diff_events(instance, planned.run_id)) == 1, f"after a tick with cursor {cursor}"
    (posted,) = _diff_events(instance, planned.run_id)
    assert posted.message.startswith(f"Data diff of plan {plan_id[:8]}")
    shown = posted.dagster_event.engine_event_data.metadata
    assert shown["data_diff"] == metadata["data_diff"] and shown["data_diff_details"] == metadata["data_diff_details"]
    assert instance.get_run_by_id(planned.run_id).tags["mesh/data_diff_posted"] == "true"
    assert _diff_events(instance, applied.run_id) == []  # only the run that recorded the plan


def _diff_events(instance: dg.DagsterInstance, run_id: str) -> list:
    return [e for e in instance.all_logs(run_id) if e.dagster_event is not None
            and e.dagster_event.event_type_value == "ENGINE_EVENT" and e.message.startswith("Data diff of plan")]
