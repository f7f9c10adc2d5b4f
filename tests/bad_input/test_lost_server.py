"""The project's shared Spark Connect server killed in the middle of a run: the run ends within
seconds, in one line naming the lost server and what to do, with nothing recorded for the batch.

It used to take ~2 minutes (PySpark retries an unavailable server for minutes, then every clean-up
step did the same) and to end with the error of a clean-up step instead of the lost server. Real
processes: `mesh spark start`, `mesh plan --auto-apply` as its client, and a SIGKILL of the server.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from project_builder import write_project

CONFIG = """gateways:
  local:
    connection:
      type: spark
      master: local[1]
      config:
        spark.sql.shuffle.partitions: 2
model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
"""
# Its Spark job sleeps a minute on the server: the server is killed while it runs.
SLOW = """
import pathlib

from mesh_dagster import model


@model("s.slow", columns={"x": "string"})
def execute(context, start, end, execution_time):
    pathlib.Path("{started}").touch()
    return context.spark.range(1).selectExpr(
        "CAST(reflect('java.lang.Thread', 'sleep', CAST(60000 AS BIGINT)) AS STRING) AS x")
"""
REPORTED_WITHIN_S = 15


def _mesh(root: Path, *args: str) -> list[str]:
    code = ("import sys; from mesh_dagster.cli.main import cli; from mesh_dagster.cli.spark_commands import spark; "
            "cli.add_command(spark); cli(sys.argv[1:], obj={})")
    return [sys.executable, "-c", code, "-p", str(root), *args]


def _env() -> dict[str, str]:
    # The product's default: every command goes through the project's server.
    env = {k: v for k, v in os.environ.items() if k != "MESH_SPARK_SERVER"}
    return {**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}


def test_a_killed_shared_server_is_reported_at_once_by_name(tmp_path: Path) -> None:
    started = tmp_path / "started"
    root = write_project(tmp_path / "p", {"models/slow.py": SLOW.replace("{started}", str(started))}, CONFIG)
    server_pid = None
    try:
        start = subprocess.run(_mesh(root, "spark", "start"), capture_output=True, text=True, env=_env(),
                               timeout=300)
        assert start.returncode == 0, start.stderr
        info = json.loads((root / ".mesh" / "connect.json").read_text())
        server_pid, port = info["pid"], info["port"]
        run = subprocess.Popen(_mesh(root, "plan", "--auto-apply"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=_env())
        try:
            deadline = time.monotonic() + 300
            while not started.exists():
                assert run.poll() is None, run.communicate()
                assert time.monotonic() < deadline, "the model never ran"
                time.sleep(0.2)
            time.sleep(3)  # its job is running on the server now
            os.kill(server_pid, signal.SIGKILL)
            killed = time.monotonic()
            _, stderr = run.communicate(timeout=REPORTED_WITHIN_S)
            took = time.monotonic() - killed
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    finally:
        if server_pid is not None:
            try:
                os.kill(server_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert took < REPORTED_WITHIN_S
    assert run.returncode == 1
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert f"Lost the project's shared Spark Connect server at 127.0.0.1:{port}" in lines[0]
    assert "Run the command again: it starts the server anew" in lines[0] and "Traceback" not in stderr
    with closing(sqlite3.connect(root / ".mesh" / "state.db")) as db:
        assert db.execute("SELECT count(*) FROM mesh_intervals").fetchone() == (0,)
