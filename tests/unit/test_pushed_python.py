"""The Python `mesh ui` starts its location of pushed environments with (dagster/ui/pushed_python.py):
the workspace names it as that location's `executable_path` only, it holds names and never a value,
and, run, it starts this Python with a git worker's environment — the same one
`worker_environment` gives a git worker — plus what a code location needs (its Dagster instance,
a Postgres instance's password variable). No Spark, no Dagster process: the script itself runs.
(tests/dagster/test_pushed_location_env.py shows it through a real `mesh ui`.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from project_builder import write_project

from mesh_dagster.core.config.config import DagsterStorageConfig
from mesh_dagster.dagster.ui.pushed_python import LOCATION_ENV
from mesh_dagster.dagster.ui.workspace import write_workspace
from mesh_dagster.execution.plans.git_worker import STAND_IN_URL, worker_environment

HOOK = "https://hook:s3cret-hook-password@hooks.example.com/services/T000"
WATCHED = """protected_environments:
  prod: {approvers: [bob@example.com]}
git:
  repo: ../warehouse.git
  worker_env: [SPARK_TOKEN]
notification_targets:
  - url: "{{ env_var('MESH_TEST_HOOK') }}"
"""
VALUES = {"MESH_TEST_HOOK": HOOK, "SPARK_TOKEN": "needed-by-spark-9f8e", "AWS_SECRET_ACCESS_KEY": "not-for-pushed-code",
          "LC_ALL": "C.UTF-8", "MESH_USER": "alice@example.com", "INSTANCE_PASSWORD": "instance-pw-1a2b"}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in VALUES.items():
        monkeypatch.setenv(name, value)
    return VALUES


def entries(workspace: Path) -> dict[str, dict]:
    return {e["python_file"]["attribute"]: e["python_file"] for e in yaml.safe_load(workspace.read_text())["load_from"]}


def started(python: str, env: dict[str, str]) -> dict:
    """What a process the script starts sees: its interpreter and its environment."""
    shown = subprocess.run([python, "-c", "import json, os, sys; print(json.dumps([sys.executable, dict(os.environ)]))"],
                           env=env, capture_output=True, text=True, check=True, timeout=60)
    executable, seen = json.loads(shown.stdout)
    return {"executable": executable, "env": seen}


def test_the_pushed_location_starts_with_a_git_workers_environment(tmp_path: Path, environment: dict) -> None:
    project = write_project(tmp_path / "p", {}, WATCHED)
    storage = DagsterStorageConfig(type="postgres", database="dagster", password_env="INSTANCE_PASSWORD")
    workspace = write_workspace(project, ["prod", "dev"], storage)
    found = entries(workspace)
    assert "executable_path" not in found["env_prod"] and "executable_path" not in found["env_dev"]
    python = found["pushed_environments"]["executable_path"]
    script = Path(python).read_text()
    assert not [value for value in environment.values() if value in script]  # names only, never a value

    dagster_dev = {**os.environ, "DAGSTER_HOME": str(workspace.parent), "DAGSTER_IS_DEV_CLI": "1"}  # as it starts it
    seen = started(python, dagster_dev)
    assert seen["executable"] == sys.executable
    location = {*LOCATION_ENV, "INSTANCE_PASSWORD"}
    assert {n: v for n, v in seen["env"].items() if n not in location} == \
        worker_environment(["SPARK_TOKEN"], [HOOK])  # what a git worker of this process gets
    assert seen["env"]["MESH_TEST_HOOK"] == STAND_IN_URL and "AWS_SECRET_ACCESS_KEY" not in seen["env"]
    assert (seen["env"]["SPARK_TOKEN"], seen["env"]["LC_ALL"]) == ("needed-by-spark-9f8e", "C.UTF-8")
    assert (seen["env"]["DAGSTER_HOME"], seen["env"]["DAGSTER_IS_DEV_CLI"], seen["env"]["INSTANCE_PASSWORD"]) == \
        (str(workspace.parent), "1", "instance-pw-1a2b")  # the location's Dagster instance
    assert "DAGSTER_EVENT_BATCH_SIZE" not in seen["env"]  # a variable not set is not set empty


def test_no_git_section_no_pushed_location_and_no_script(tmp_path: Path, environment: dict) -> None:
    project = write_project(tmp_path / "p", {}, "")
    workspace = write_workspace(project, ["prod"])
    assert list(entries(workspace)) == ["env_prod"]
    assert not (workspace.parent / "pushed-python").exists()
