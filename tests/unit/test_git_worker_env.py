"""What of the code location's environment a git worker gets (execution/plans/git_worker.py): its fixed
few, the locale and what `git.worker_env` names; a variable holding a whole notification URL reads
as a stand-in; nothing else. `git.worker_env` takes names only, and never echoes a value given
instead (tests/dagster/test_git_worker.py runs the worker itself)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.execution.plans.git_worker import STAND_IN_URL, WORKER_ENV, worker_environment

HOOK = "https://hooks.example.com/services/T000/B000/s3cretpart"


def test_the_worker_gets_its_few_variables_and_a_stand_in_for_a_notification_url(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("SPARK_TOKEN", "needed-by-the-spark-connection")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-pushed-code")
    monkeypatch.setenv("SLACK_HOOK", HOOK)
    monkeypatch.setenv("SLACK_TOKEN", "s3cretpart")  # a part of a URL: left out like any other
    env = worker_environment(["SPARK_TOKEN"], [f" {HOOK} "])
    assert (env["PATH"], env["LC_ALL"], env["SPARK_TOKEN"]) == ("/usr/bin", "C.UTF-8", "needed-by-the-spark-connection")
    assert env["SLACK_HOOK"] == STAND_IN_URL
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SLACK_TOKEN" not in env
    assert set(env) <= {*WORKER_ENV, "LC_ALL", "SPARK_TOKEN", "SLACK_HOOK"} | {n for n in env if n.startswith("LC_")}


def test_worker_env_takes_names_and_never_echoes_a_value(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {}, "git:\n  repo: r\n  worker_env: ['sk-live-9f8e7d secret']\n")
    with pytest.raises(ConfigError) as refused:
        load_config(root)
    message = str(refused.value)
    assert "git.worker_env" in message and "not an environment variable name" in message, message
    assert "sk-live-9f8e7d" not in message
