"""A failed run's last line (RUN_FAILURE) reads as the failed model's one line, without Dagster's
stack trace: runs use mesh's executor (outcomes.RUN_EXECUTOR, compat.one_line_failures), run the
way a launched run is (`execute_job` on a reconstructable job, events read back from the instance
as the webserver reads them). No Spark: the steps raise mesh's errors themselves."""

from __future__ import annotations

import dagster as dg
import pytest

from mesh_dagster.dagster.mapping.outcomes import RUN_EXECUTOR, ModelFailed

LINE = "sqlmesh_example.incremental_model failed: boom"


@dg.asset
def incremental_model() -> None:
    raise ModelFailed(LINE) from None


@dg.asset(deps=[incremental_model])
def full_model() -> None:
    return None


@dg.asset
def python_error() -> None:
    raise RuntimeError("not one of mesh's errors")


def _job(assets: list) -> dg.JobDefinition:
    """A job of `assets` as mesh's code locations build one: with mesh's executor."""
    return dg.Definitions(assets=assets, jobs=[dg.define_asset_job("models")], executor=RUN_EXECUTOR
                          ).resolve_job_def("models")


def mesh_job() -> dg.JobDefinition:
    return _job([incremental_model, full_model])


def other_job() -> dg.JobDefinition:
    return _job([python_error])


def _events(instance: dg.DagsterInstance, run_id: str, kind: str) -> list[dg.DagsterEvent]:
    return [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event and e.dagster_event.event_type.name == kind]


@pytest.fixture
def instance(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        yield instance


def test_the_run_failure_is_the_models_one_line(instance):
    with dg.execute_job(dg.reconstructable(mesh_job), instance, raise_on_error=False) as result:
        assert not result.success
        run_id = result.run_id
    (run_failure,) = _events(instance, run_id, "RUN_FAILURE")
    assert run_failure.message.endswith("Steps failed: ['incremental_model'].")
    error = run_failure.job_failure_data.error
    assert error.message.strip() == f"mesh.ModelFailed: {LINE}"  # what the UI shows under it: one line
    assert error.stack == [] and error.cause is None and error.context is None

    # the step's own row is Dagster's, stored as it happened: its line naming the op, then ours
    (step_failure,) = _events(instance, run_id, "STEP_FAILURE")
    data = step_failure.step_failure_data
    assert data.error_source.value == "USER_CODE_ERROR"  # the UI hides this stack on the step's row
    assert "Error occurred while executing op" in data.error.message
    assert data.error.cause.message.strip() == f"mesh.ModelFailed: {LINE}" and data.error.cause.stack == []
    # the reader is not run, as with the stock executor
    assert {e.step_key for e in _events(instance, run_id, "STEP_START")} == {"incremental_model"}


def test_any_other_error_keeps_dagsters_failure(instance):
    """Only mesh's one-line errors are shortened: a bug keeps its stack trace, where it helps."""
    with dg.execute_job(dg.reconstructable(other_job), instance, raise_on_error=False) as result:
        assert not result.success
        run_id = result.run_id
    (run_failure,) = _events(instance, run_id, "RUN_FAILURE")
    error = run_failure.job_failure_data.error
    assert "Error occurred while executing op" in error.message and error.stack
    assert error.cause is not None and "RuntimeError: not one of mesh's errors" in error.cause.message


def test_the_executor_takes_the_in_process_executors_config(instance):
    assert RUN_EXECUTOR.name == dg.in_process_executor.name
    config = {"execution": {"config": {"retries": {"disabled": {}}}}}
    with dg.execute_job(dg.reconstructable(mesh_job), instance, run_config=config, raise_on_error=False) as result:
        assert not result.success
        assert [e.event_type_value for e in result.all_events if e.is_step_failure] == ["STEP_FAILURE"]
