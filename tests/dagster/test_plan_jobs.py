"""The plan_<env> and apply_plan_<env> jobs, through Dagster's own APIs (no Spark: a plan never
starts it, and a refused apply stops before it would): the plan job records the plan and shows its
summary on the run and its pending categories on the assets; the apply job is gated like
`mesh plans apply`."""

from __future__ import annotations

import dagster as dg
import pytest
from failures import failure_text
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.state.test_plan_reviews import MODELS

FILES = MODELS  # two chained models, as the plan review tests use
CONFIG = """model_defaults:
  dialect: spark
  start: 2020-01-01
protected_environments:
  prod:
    approvers: [bob@example.com]
"""


def _failure(result) -> str:
    return failure_text(result)


def test_plan_job_records_and_shows_the_plan_and_apply_job_is_gated(tmp_path, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = write_project(tmp_path / "p", FILES, CONFIG)
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(root, "prod", shared_spark=False)

    result = defs.resolve_job_def("plan_prod").execute_in_process(
        run_config={"ops": {"plan_prod_changes": {"config": {"execution_time": "2020-01-03"}}}}, instance=instance)
    assert result.success
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata
    plan_id = metadata["plan_id"].value
    assert "| `s.a` | added |" in metadata["summary"].value and "[2020-01-01 - 2020-01-02]" in metadata["summary"].value
    assert metadata["next"].value.startswith(f"approve with review_plan_prod (or `mesh plans approve {plan_id[:8]}`)")
    observed = {tuple(e.asset_key.path): e.asset_observation_data.asset_observation.metadata
                for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"}
    assert set(observed) == {("s", "a"), ("s", "b")}
    assert observed[("s", "a")]["mesh/pending_change"].value == "added"
    assert observed[("s", "b")]["mesh/plan_id"].value == plan_id

    ctx = Context(root)
    # its author is who launched it (a run names none here: the run), never the Dagster process's user
    assert (ctx.reviews.records.find(plan_id).status.value, ctx.reviews.records.find(plan_id).author) == (
        "pending", f"dagster run {result.run_id[:8]}")
    apply = defs.resolve_job_def("apply_plan_prod")
    refused = apply.execute_in_process(run_config={"ops": {"apply_plan_prod_record": {"config": {"plan_id": plan_id}}}},
                                       instance=instance, raise_on_error=False)
    assert not refused.success and "needs an approval first" in _failure(refused)
    assert ctx.state.environments.get_environment("prod") is None
    unknown = apply.execute_in_process(run_config={"ops": {"apply_plan_prod_record": {"config": {"plan_id": "feedface"}}}},
                                       instance=instance, raise_on_error=False)
    assert "No plan 'feedface'" in _failure(unknown)


def _review(defs, instance, **config):
    return defs.resolve_job_def("review_plan_prod").execute_in_process(
        run_config={"ops": {"review_plan_prod_decision": {"config": config}}}, instance=instance, raise_on_error=False)


def test_a_pending_plan_is_picked_from_a_list_and_reviewed_in_dagster(tmp_path, monkeypatch):
    """Issue 38, point 5: the plans waiting in a protected environment are a list in the review and
    apply jobs' config (no id to type), and review_plan_<env> decides as the approver it names, under
    the environment's rules; an unprotected environment has no review job."""
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = write_project(tmp_path / "p", FILES, CONFIG)
    instance = dg.DagsterInstance.ephemeral()
    planned = definitions(root, ["prod", "dev"], shared_spark=False).resolve_job_def("plan_prod").execute_in_process(
        run_config={"ops": {"plan_prod_changes": {"config": {"execution_time": "2020-01-03"}}}}, instance=instance)
    (output,) = [e for e in planned.all_events if e.event_type_value == "STEP_OUTPUT"]
    plan_id = output.event_specific_data.metadata["plan_id"].value

    defs = definitions(root, ["prod", "dev"], shared_spark=False)  # as mesh ui reloads it once the plan is recorded
    assert "review_plan_dev" not in {j.name for j in defs.resolve_all_job_defs()}
    apply = defs.resolve_job_def("apply_plan_prod")
    picked = {"ops": {"apply_plan_prod_record": {"config": {"plan": plan_id}}}}
    assert dg.validate_run_config(apply, picked)  # one of the list
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(apply, {"ops": {"apply_plan_prod_record": {"config": {"plan": "feedface"}}}})

    by_stranger = _review(defs, instance, plan=plan_id, decision="approve", approver="carol@example.com")
    assert "carol@example.com may not approve plans for 'prod'" in _failure(by_stranger)
    approved = _review(defs, instance, plan=plan_id, decision="approve", approver="bob@example.com", note="looks right")
    assert approved.success
    record = Context(root).reviews.records.find(plan_id)
    assert (record.status.value, record.events[-1].actor, record.events[-1].note) == ("approved", "bob@example.com",
                                                                                      "looks right")
    assert record.author == f"dagster run {planned.run_id[:8]}"  # not the e-mail of the process (MESH_USER here)
    named = definitions(root, "prod", shared_spark=False).resolve_job_def("plan_prod").execute_in_process(
        run_config={"ops": {"plan_prod_changes": {"config": {"author": "dana@example.com"}}}}, instance=instance,
        tags={"user": "erin@example.com"})
    (out,) = [e for e in named.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert out.event_specific_data.metadata["author"].value == "dana@example.com"  # the config wins over the tag
    nothing = _review(defs, instance, decision="reject", approver="bob@example.com")
    assert "No plan given: pick one in `plan`" in _failure(nothing)


def test_plan_status_changes_show_on_the_assets(tmp_path, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = write_project(tmp_path / "p", FILES, CONFIG)
    defs = definitions(root, "prod", shared_spark=False)
    sensor = defs.resolve_sensor_def("plan_status_prod_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor):
        with dg.build_sensor_context(cursor=cursor, instance=instance) as context:
            return sensor.evaluate_tick(context)

    assert "No plan changed status" in tick(None).skip_message
    ctx = Context(root)
    plan_id = ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-03")).plan_id
    first = tick(None)
    assert {(tuple(e.asset_key.path), e.metadata["mesh/plan_status"].value) for e in first.asset_events} == {
        (("s", "a"), "pending"), (("s", "b"), "pending")}
    assert "No plan changed status" in tick(first.cursor).skip_message
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(plan_id, "approve", "fine")
    later = tick(first.cursor)
    assert {e.metadata["mesh/plan_status"].value for e in later.asset_events} == {"approved"}
    assert {e.metadata["mesh/decided_by"].value for e in later.asset_events} == {"bob@example.com"}


def test_plan_job_honours_the_plan_flags_in_its_config_and_refuses_the_clis_own(tmp_path):
    """The plan job's config is `mesh plan`'s flags that a recorded plan can hold (core/plan/flags.py):
    each given field reaches the recorded plan; a flag only the CLI has is refused by Dagster, by name,
    and a bad value fails the run naming it, with nothing recorded."""
    root = write_project(tmp_path / "p", FILES, CONFIG.split("protected_environments")[0])
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    job = definitions(root, "dev", shared_spark=False).resolve_job_def("plan_dev")

    def run(config: dict, **kwargs):
        return job.execute_in_process(run_config={"ops": {"plan_dev_changes": {"config": config}}},
                                      instance=instance, **kwargs)

    result = run({"execution_time": "2020-01-03", "select_model": ["s.a"], "skip_backfill": True, "min_intervals": 1})
    assert result.success
    (record,) = Context(root).plan_records()
    options = record.plan_options
    assert options.select_models == ("s.a",) and options.skip_backfill and options.min_intervals == 1
    assert record.summary.options["execution_time"] == "2020-01-03"
    categorized = run({"categorize": ["s.a=non-breaking"]}, raise_on_error=False)  # s.a is added, not modified
    assert not categorized.success and "--categorize names s.a, which this plan does not directly modify" in \
        _failure(categorized)

    with pytest.raises(dg.DagsterInvalidConfigError, match="auto_apply"):
        run({"auto_apply": True})
    bad = run({"start": "someday"}, raise_on_error=False)
    assert not bad.success and "start (--start): 'someday' is not a date or time" in _failure(bad)
    assert len(Context(root).plan_records()) == 1
