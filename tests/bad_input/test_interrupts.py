"""Ctrl-C during `mesh plan --auto-apply` ends the process within seconds, in one line naming the
model that was running, with nothing recorded for its interval.

A Python model that never returns used to keep the process alive after Ctrl-C (still running 60 s
later): the main thread waited for the worker thread running the model, and Python waits for every
worker thread before a process ends. Real processes, real Spark, a real SIGINT.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from project_builder import write_project

STUCK = """
import pathlib
import time

from mesh_dagster import model


@model("s.stuck", columns={"id": "int"})
def execute(context, start, end, execution_time):
    pathlib.Path("{started}").touch()
    while True:
        time.sleep(0.1)
"""
STARTS_WITHIN_S = 240  # a cold JVM on a busy machine
ENDS_WITHIN_S = 10


def _intervals(root: Path) -> list[tuple]:
    with closing(sqlite3.connect(root / ".mesh" / "state.db")) as db:
        return db.execute("SELECT * FROM mesh_intervals").fetchall()


@pytest.mark.parametrize("concurrent_tasks", [4, 1], ids=["worker thread", "main thread"])
def test_ctrl_c_stops_a_python_model_that_never_returns(tmp_path: Path, concurrent_tasks: int) -> None:
    config = ("gateways:\n  local:\n    connection:\n      type: spark\n      master: local[1]\n"
              f"      concurrent_tasks: {concurrent_tasks}\n"
              "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n")
    root = write_project(tmp_path / "p", {"models/stuck.py": STUCK.replace("{started}", str(tmp_path / "started"))},
                         config)
    process = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(root), "plan",
                                "--auto-apply"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + STARTS_WITHIN_S
        while not (tmp_path / "started").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the model never started"
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGINT)
        sent = time.monotonic()
        stdout, stderr = process.communicate(timeout=ENDS_WITHIN_S)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert took < ENDS_WITHIN_S
    assert process.returncode == 130, (stdout, stderr)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1] == "Interrupted: s.stuck was running; nothing was recorded for its interval", stderr
    assert "Traceback" not in stderr
    assert _intervals(root) == []
