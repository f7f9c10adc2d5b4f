"""What Dagster's plan and apply jobs show of a plan's review besides its changes (issue 34, points 3
and 10), through Dagster's own APIs on the test process's Spark: the `before_all` / `after_all` the
apply runs (`environment_statements`, a diff while the plan changes them) and what the linter did
(`linter`), in the step's metadata and in the summary the run page shows."""

from __future__ import annotations

import dagster as dg
import pytest
from failures import failure_text
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions

pytestmark = pytest.mark.spark

OFF = "Linter: off in the project's config.yaml (`linter.enabled` is false): the models were not linted."


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: v.value for k, v in output.event_specific_data.metadata.items()}


def test_the_plan_and_apply_jobs_show_the_statements_and_the_linter(tmp_path, engine, project_schema, monkeypatch):
    schema = project_schema
    audit = f"{schema}_audit"
    config = CONFIG + ("protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"
                       f"before_all:\n  - CREATE SCHEMA IF NOT EXISTS {audit}\n")
    root = write_project(tmp_path / "p", {"models/a.sql": f"MODEL (name {schema}.a, kind FULL);\nSELECT 1 AS id\n"},
                         config)
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(root, "prod", shared_spark=False)
    monkeypatch.setenv("MESH_USER", "alice@example.com")

    planned = defs.resolve_job_def("plan_prod").execute_in_process(instance=instance, raise_on_error=False)
    assert planned.success, failure_text(planned)
    shown = _metadata(planned)
    assert shown["linter"] == OFF and shown["summary"].endswith(f"\n\n{OFF}")
    assert f"+before_all.0: CREATE SCHEMA IF NOT EXISTS {audit}" in shown["environment_statements"]
    assert "(`before_all` / `after_all`: changed)" in shown["summary"]

    monkeypatch.setenv("MESH_USER", "bob@example.com")
    Context(root).decide(shown["plan_id"], "approve")
    applied = defs.resolve_job_def("apply_plan_prod").execute_in_process(
        run_config={"ops": {"apply_plan_prod_record": {"config": {"plan_id": shown["plan_id"]}}}}, instance=instance,
        raise_on_error=False)
    assert applied.success, failure_text(applied)
    done = _metadata(applied)
    assert (done["status"], done["linter"]) == ("completed", OFF)
    assert f"+before_all.0: CREATE SCHEMA IF NOT EXISTS {audit}" in done["environment_statements"]
    assert engine.session.fetchall(f"SHOW SCHEMAS LIKE '{audit}'")  # the reviewed before_all ran
