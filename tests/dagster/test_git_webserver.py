"""End to end through a real `mesh ui` (webserver + daemon), driven through GraphQL, with a real bare
git repository: a push to a feature branch gives its environment the change (the daemon runs the
git sensor, the git_plan run applies the commit on the project's Spark); a push to main records a
pending prod plan; a second person approves it with review_plan_prod, picking it from the list its
launchpad offers (seen in Chromium), and apply_plan_prod updates prod; a plan approved and
then outdated by a newer push is refused as superseded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import page_text, rendered_dom, screenshot
from project_copies import edit, recent_example
from test_dagster_webserver import LAUNCH_RUN, LOCATIONS, Dagster, _free_port

from mesh_dagster.context import Context

pytestmark = pytest.mark.slow

DAYS = 3
LOCATION = "project_prod"
START_SENSOR = """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
  ... on PythonError { message } } }"""
RUNS = """query($branch: String!) { runsOrError(filter: {tags: [{key: "mesh/git_branch", value: $branch}]}) {
  ... on Runs { results { runId status tags { key value } } } } }"""
KINDS = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { kinds description } }"""
CONFIG_TYPES = """query($s: PipelineSelector!) { runConfigSchemaOrError(selector: $s) { ... on RunConfigSchema {
  allConfigTypes { ... on EnumConfigType { givenName values { value } } } } } }"""
WATCH = """
protected_environments:
  prod:
    approvers: [bob@example.com]
git:
  repo: ../warehouse.git
  protected: [main]
  poll_interval_s: 5
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=alice@example.com", "-c", "user.name=Alice", "-C", str(cwd),
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def mesh(project: Path, *args: str, user: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "MESH_USER": user})


def launch(dagster: Dagster, job: str, config: dict) -> str:
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": job}
    result = dagster.query(LAUNCH_RUN, p={"selector": selector, "runConfigData": config})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def sensor_run(dagster: Dagster, branch: str, sha: str, timeout: float = 600) -> str:
    """The finished git_plan run the daemon's sensor launched for `branch` at `sha`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in dagster.query(RUNS, branch=branch)["runsOrError"]["results"]:
            tags = {t["key"]: t["value"] for t in run["tags"]}
            if tags.get("mesh/git_sha") == sha and run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                assert run["status"] == "SUCCESS", dagster.failure(run["runId"])
                return run["runId"]
        time.sleep(3)
    raise AssertionError(f"no finished git_plan run for {branch}@{sha}:\n{dagster.log.read_text()[-3000:]}")


def plan_choices(dagster: Dagster, job: str) -> list[str]:
    """The plans `job`'s launchpad lists in its config's `plan` (the values of its enum)."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "pipelineName": job}
    found = dagster.query(CONFIG_TYPES, s=selector)["runConfigSchemaOrError"]["allConfigTypes"]
    return [v["value"] for t in found if t.get("givenName") == f"{job}_plans" for v in t["values"]]


def pending_prod_plan(project: Path, sha: str) -> str:
    records = [r for r in Context(project).plan_records("prod") if r.git_commit == sha]
    assert [r.status.value for r in records] == ["pending"], records
    return records[0].plan_id


def test_git_pushes_through_the_webserver(tmp_path):
    work = tmp_path
    clone = recent_example(work / "clone", DAYS)
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "example")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(work / "warehouse.git")], check=True)
    git(clone, "remote", "add", "origin", str(work / "warehouse.git"))
    git(clone, "push", "-q", "origin", "main")
    first = git(clone, "rev-parse", "HEAD")

    project = recent_example(work / "project", DAYS)  # the code location
    with (project / "config.yaml").open("a") as f:
        f.write(WATCH)
    server = Dagster(project, _free_port(), work / "dagster.log")
    try:
        server.wait_loaded()
        selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__",
                    "sensorName": "git_push_sensor"}
        assert server.query(START_SENSOR, s=selector)["startSensor"]["__typename"] == "Sensor"

        # main as it is: a pending prod plan, nothing applied
        sensor_run(server, "main", first)
        approved = pending_prod_plan(project, first)
        assert Context(project).state.environments.get_environment("prod") is None

        # a feature branch: its environment gets the change
        git(clone, "checkout", "-q", "-b", "feature/new-col")
        edit(clone, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
        git(clone, "commit", "-qam", "new column")
        feature = git(clone, "rev-parse", "HEAD")
        git(clone, "push", "-q", "origin", "feature/new-col")
        sensor_run(server, "feature/new-col", feature)
        shown = mesh(project, "fetchdf", "SELECT DISTINCT new_column FROM sqlmesh_example__feature_new_col."
                     "incremental_model", user="alice@example.com")
        assert shown.returncode == 0 and " z" in shown.stdout, shown.stdout + shown.stderr

        # a second person approves the prod plan in Dagster and apply_plan_prod updates prod: both pick
        # it from the list their launchpad offers (issue 38, point 5), no id typed
        server.until(lambda: approved in plan_choices(server, "review_plan_prod"), "the plan in review_plan_prod", 120)
        assert approved in plan_choices(server, "apply_plan_prod")
        op_page = server.url.removesuffix("/graphql") + f"/locations/{LOCATION}/jobs/review_plan_prod"
        dom = rendered_dom(op_page + "/review_plan_prod_decision", "review_plan_prod_plans")
        screenshot(op_page + "/review_plan_prod_decision", work / "review_plan_list.png")
        # the op's config in the UI: `plan` is the list of plans (its values are what the launchpad's
        # editor offers, read from the run config schema above), beside the decision's own list
        assert "plan ? : review_plan_prod_plans" in page_text(dom), page_text(dom)[-600:]
        assert "decision : review_plan_prod_decisions" in page_text(dom)
        decide = {"plan": approved, "decision": "approve", "approver": "alice@example.com"}
        own = launch(server, "review_plan_prod", {"ops": {"review_plan_prod_decision": {"config": decide}}})
        assert server.wait_run(own) == "FAILURE" and "alice@example.com may not approve" in server.failure(own)
        run_id = launch(server, "review_plan_prod", {"ops": {"review_plan_prod_decision": {"config": {
            **decide, "approver": "bob@example.com", "note": "looks right"}}}})
        assert server.wait_run(run_id) == "SUCCESS", server.failure(run_id)
        decided = Context(project).reviews.records.find(approved)
        assert (decided.status.value, decided.events[-1].actor, decided.events[-1].note) == (
            "approved", "bob@example.com", "looks right")
        run_id = launch(server, "apply_plan_prod", {"ops": {"apply_plan_prod_record": {"config": {"plan": approved}}}})
        assert server.wait_run(run_id) == "SUCCESS", server.failure(run_id)
        assert Context(project).state.environments.get_environment("prod").plan_id == approved

        # the feature merged into main: a new pending plan, approved, then outdated by another push
        git(clone, "checkout", "-q", "main")
        git(clone, "merge", "-q", "feature/new-col")
        git(clone, "push", "-q", "origin", "main")
        merged = git(clone, "rev-parse", "HEAD")
        sensor_run(server, "main", merged)
        outdated = pending_prod_plan(project, merged)
        assert mesh(project, "plans", "approve", outdated[:8], user="bob@example.com").returncode == 0
        git(clone, "commit", "--allow-empty", "-qm", "later")
        git(clone, "push", "-q", "origin", "main")
        run_id = launch(server, "apply_plan_prod", {"ops": {"apply_plan_prod_record": {"config": {"plan_id": outdated}}}})
        assert server.wait_run(run_id) == "FAILURE"
        assert "superseded" in server.failure(run_id) and "branch main moved on" in server.failure(run_id)
        assert Context(project).reviews.records.find(outdated).status.value == "superseded"
        assert Context(project).state.environments.get_environment("prod").plan_id == approved  # prod untouched

        # the environment the feature branch created shows, in the location of pushed environments
        # (mesh ui reloads it), from its branch's commit: nothing pending
        assert "project_pushed" in {e["name"] for e in server.query(LOCATIONS)["workspaceOrError"]["locationEntries"]}
        feature = [{"path": ["sqlmesh_example__feature_new_col", "incremental_model"]}]
        server.until(lambda: server.query(KINDS, keys=feature)["assetNodes"], "the feature branch's assets", 180)
        (feature_node,) = server.query(KINDS, keys=feature)["assetNodes"]
        assert not feature_node["description"].startswith("Pending")

        # the latest push approved and deployed: prod's location shows that commit (new_column), not
        # this working tree (without it) — no pending revert of what was just deployed
        latest = git(clone, "rev-parse", "HEAD")
        sensor_run(server, "main", latest)
        deployed = pending_prod_plan(project, latest)
        assert mesh(project, "plans", "approve", deployed[:8], user="bob@example.com").returncode == 0
        run_id = launch(server, "apply_plan_prod", {"ops": {"apply_plan_prod_record": {"config": {"plan_id": deployed}}}})
        assert server.wait_run(run_id) == "SUCCESS", server.failure(run_id)
        assert "new_column" not in (project / "models" / "incremental_model.sql").read_text()

        def prod_shows_the_deployed_commit() -> bool:
            (node,) = server.query(KINDS, keys=[{"path": ["sqlmesh_example", "incremental_model"]}])["assetNodes"]
            return not node["description"].startswith("Pending")

        server.until(prod_shows_the_deployed_commit, "prod's location to load the deployed commit", 180)
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")
