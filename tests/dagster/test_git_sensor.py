"""The git push sensor through Dagster's own APIs, on a real bare repository: its cursor is the last
seen commit per branch, a tick asks for one git_plan run per branch that moved or disappeared, and a
missing repository is a skipped tick with the reason. The git_plan job itself (no Spark: a push to
the protected branch only records a pending plan) runs in process."""

from __future__ import annotations

import json

import dagster as dg
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.state.test_git_plans import MODELS, WATCHER_CONFIG, Repo


def _tick(sensor: dg.SensorDefinition, cursor: str | None, instance: dg.DagsterInstance):
    with dg.build_sensor_context(cursor=cursor, instance=instance) as context:
        result = sensor.evaluate_tick(context)
    return result, result.cursor


def test_the_sensor_follows_branch_heads_and_the_job_records_the_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    repo = Repo(tmp_path)
    main = repo.commit(MODELS, "models")
    repo.push("main")
    repo.push("feature/a")
    location = write_project(tmp_path / "location", {}, WATCHER_CONFIG)
    defs = definitions(location, "prod", shared_spark=False)
    sensor = defs.resolve_sensor_def("git_push_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))

    result, cursor = _tick(sensor, None, instance)
    assert sorted(r.run_key for r in result.run_requests) == [f"feature/a@{main}", f"main@{main}"]
    assert json.loads(cursor) == {"feature/a": main, "main": main}
    result, cursor = _tick(sensor, cursor, instance)
    assert not result.run_requests and "No watched branch moved" in result.skip_message

    newer = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, 1 AS z FROM s.a\n"}, "z")
    repo.push("main")
    subprocess_delete(repo, "feature/a")
    result, cursor = _tick(sensor, cursor, instance)
    requests = {r.run_key: r.run_config["ops"]["git_plan_commit"]["config"] for r in result.run_requests}
    assert requests == {f"main@{newer}": {"branch": "main", "sha": newer},
                        f"feature/a@{main}:deleted": {"branch": "feature/a", "sha": ""}}

    # the job for a push to the protected branch records a pending plan for prod
    run = defs.resolve_job_def("git_plan").execute_in_process(
        run_config={"ops": {"git_plan_commit": {"config": {"branch": "main", "sha": newer}}}}, instance=instance)
    assert run.success
    (record,) = Context(location).plan_records()
    assert (record.environment, record.status.value, record.git_commit) == ("prod", "pending", newer)

    repo.bare.rename(tmp_path / "gone.git")
    result, _ = _tick(sensor, cursor, instance)
    assert not result.run_requests and "warehouse.git does not exist" in result.skip_message


def subprocess_delete(repo: Repo, branch: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(repo.clone), "push", "-q", "origin", "--delete", branch], check=True)


def test_projects_without_git_have_no_sensor(tmp_path):
    location = write_project(tmp_path / "p", MODELS)
    defs = definitions(location, "prod", shared_spark=False)
    assert "git_push_sensor" not in {s.name for s in defs.sensors}


def test_the_sensor_looks_as_often_as_configured(tmp_path):
    """`git.poll_interval_s` (default 30) is the sensor's minimum interval: the daemon's ticks."""
    location = write_project(tmp_path / "default", {}, WATCHER_CONFIG)
    assert definitions(location, "prod", shared_spark=False).resolve_sensor_def(
        "git_push_sensor").minimum_interval_seconds == 30
    location = write_project(tmp_path / "often", {}, WATCHER_CONFIG + "  poll_interval_s: 5\n")
    assert definitions(location, "prod", shared_spark=False).resolve_sensor_def(
        "git_push_sensor").minimum_interval_seconds == 5
