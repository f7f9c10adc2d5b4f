"""`mesh ui`'s location of pushed environments loads pushed code, and runs it, with a git worker's
environment (dagster/ui/pushed_python.py), never `mesh ui`'s own.

Through a real `mesh ui` (webserver, daemon, code servers, a run on the project's shared Spark
Connect server), a bare git repository and real git workers: a feature branch and a branch named
like the environment `dev` (which has a location of its own) are deployed, both from a commit whose
`macros/evil.py` records at import its process and its environment. Every process that imported it
— the pushed location's code server, the run materializing the feature environment's asset there —
saw no notification credential (the variable holding the URL reads as a stand-in) and no unrelated
variable of `mesh ui`; the dev location, which has `mesh ui`'s whole environment, never imported
it. The pushed location still shows the feature environment's asset, and the run still succeeds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from project_builder import write_project
from test_dagster_webserver import LAUNCH_RUN, Dagster, _free_port

from mesh_dagster.context import Context
from tests.dagster.test_git_worker import HOOK_ENV, MODEL, NOTIFIED, SECRET, STAND_IN_URL, UNRELATED
from tests.state.test_git_plans import PROJECT_CONFIG, WATCHER_CONFIG, Repo
from tests.state.test_plan_reviews import Hook

pytestmark = pytest.mark.slow

EVIL = """
import json
import os
import sys

from mesh_dagster import macro

with open({out!r}, "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "argv": sys.argv, "env": dict(os.environ)}}) + "\\n")


@macro()
def answer(evaluator):
    return 42
"""
ASSET = ["s__feature_evil", "e"]
PUSHED = "pushed_environments"  # the attribute of locations.py that is the pushed location
RUN_MESSAGES = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
  ... on MessageEvent { message } } } } }"""
NODES = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { repository { location { name } } } }"""


def records(out: Path) -> list[dict]:
    """What the pushed macro's top level saw, once per process that imported it."""
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def clean(record: dict) -> bool:
    """No notification credential, no unrelated variable; the notification URL's variable a stand-in."""
    env = record["env"]
    return SECRET not in json.dumps(record) and UNRELATED[0] not in env and env.get(HOOK_ENV) == STAND_IN_URL


def test_the_pushed_location_and_its_runs_hold_no_secret_of_mesh_ui(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    hook = Hook()
    monkeypatch.setenv(HOOK_ENV, hook.url.replace("://", f"://hook:{SECRET}@"))
    monkeypatch.setenv(*UNRELATED)
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    monkeypatch.setenv("MESH_SPARK_SERVER", "1")  # the workers and the run share one Spark server
    out = tmp_path / "evil.jsonl"
    repo = Repo(tmp_path)
    repo.commit({"config.yaml": PROJECT_CONFIG + NOTIFIED, "macros/evil.py": EVIL.format(out=str(out)),
                 "models/e.sql": MODEL}, "evil")
    repo.push("feature/evil")
    repo.push("dev")  # deploys the environment `dev`, which `mesh ui` shows in a location of its own
    project = write_project(tmp_path / "location", {}, WATCHER_CONFIG + NOTIFIED)
    server = None
    try:
        ctx = Context(project)
        try:
            sha = ctx.reviews.git_heads()["feature/evil"]
            for branch in ("feature/evil", "dev"):  # as the git_plan run does: in a git worker
                assert ctx.reviews.plan_git_commit(branch, sha).status.value == "completed"
        finally:
            ctx.close()
        assert records(out) and all(clean(r) for r in records(out))  # the workers'
        out.unlink()

        server = Dagster(project, _free_port(), tmp_path / "dagster.log", environments=("prod", "dev"))
        loaded = server.wait_loaded()
        assert set(loaded) == {"location_prod", "location_dev", "location_pushed"}, loaded
        (node,) = server.query(NODES, keys=[{"path": ASSET}])["assetNodes"]
        assert node["repository"]["location"]["name"] == "location_pushed"
        loading = records(out)
        assert any(PUSHED in r["argv"] for r in loading), loading  # the pushed location's code server
        assert all(clean(r) for r in loading), loading

        selector = {"repositoryLocationName": "location_pushed", "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB", "assetSelection": [{"path": ASSET}]}
        launched = server.query(LAUNCH_RUN, p={"selector": selector})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        assert server.wait_run(run_id) == "SUCCESS", server.failure(run_id)
        messages = [e["message"] for e in server.query(RUN_MESSAGES, id=run_id)["logsForRun"]["events"]]
        (pid,) = [int(m) for text in messages for m in re.findall(r"Started process for run \(pid: (\d+)\)", text)]
        running = [r for r in records(out) if r["pid"] == pid]
        assert running and all(clean(r) for r in running), running  # the run's process
        assert not [r for r in records(out) if "env_dev" in r["argv"]]  # the dev location never imported it
    finally:
        if server is not None:
            server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")
        hook.close()
