"""The warm server killed mid-write (issue 36): not the client, the JVM that writes. The command fails
in one line; the next command starts a new server and the table ends as an uninterrupted run leaves it.

A `mesh run` (the product's default: a client of the project's server) is paused at a step of a
write (`MESH_TEST_PAUSE_AT`, engine/kill_points.py), the server's JVM is SIGKILLed, and the run is
let go: the write's next step meets a dead server. (A kill in the middle of a statement is timing:
tests/bad_input/test_lost_server.py kills the server while a model's job runs.) The reference schema
holds the same models, run without interruption.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from mesh_dagster.engine.connect_server import stop_server
from mesh_dagster.engine.kill_points import PAUSE_AT_ENV
from mesh_dagster.engine.server_record import INFO_FILE, SERVER_ENV
from tests.cli.test_kill_points import COMPARE, MODELS, SERVER_CONFIG
from tests.project_builder import write_project

pytestmark = pytest.mark.slow

KILLED = ("m1_full", "m2_range", "m4_scd_time")
SETUP_TIME, RUN_TIME = "2020-01-02", "2020-01-03"
CONFIG = SERVER_CONFIG + "      concurrent_tasks: 1\nmodel_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron: '@daily'\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (SERVER_ENV, PAUSE_AT_ENV)}  # the default: the server
    return {**env, "COLUMNS": "250", **extra}


def _mesh(project: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                          capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, f"mesh {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    files = {f"models/{schema}/{name}.sql": MODELS[name].format(s=schema) for schema in ("ref", "k") for name in KILLED}
    root = write_project(tmp_path_factory.mktemp("killed_server") / "p", files, CONFIG)
    try:
        _mesh(root, "plan", "--auto-apply", "--skip-tests", "--execution-time", SETUP_TIME)
        _mesh(root, "run", "--execution-time", RUN_TIME, "--select-model", "ref.*")
        yield root
    finally:
        stop_server(root / ".mesh")


def _paused(process: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while psutil.Process(process.pid).status() != psutil.STATUS_STOPPED:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never reached its pause"
        time.sleep(0.05)


@pytest.mark.parametrize(("model", "step"), [
    ("m1_full", "journaled"),  # the journal says how to finish; the switch to the new generation is next
    ("m2_range", "write"),  # the table's lock is held; the partition overwrite is next
    ("m4_scd_time", "staged"),  # the new history is staged; the journal and the swap are next
])
def test_a_server_killed_mid_write_leaves_what_the_next_run_finishes_exactly(
        project: Path, model: str, step: str) -> None:
    run = ("run", "--execution-time", RUN_TIME, "--select-model", f"k.{model}")
    client = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *run],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(**{PAUSE_AT_ENV: f"{step}@k__{model}__"}), start_new_session=True)
    try:
        _paused(client)
        server = json.loads((project / ".mesh" / INFO_FILE).read_text())["pid"]
        os.killpg(server, signal.SIGKILL)  # the JVM, with the launcher of its group
        os.kill(client.pid, signal.SIGCONT)  # its next step meets a dead server
        _, stderr = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    assert client.returncode == 1, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr

    _mesh(project, *run)  # a new server, started by this command, finishes the write
    # What a kill left before its journal entry (a staging table) is the janitor's, as after a killed client.
    _mesh(project, "janitor")
    with closing(sqlite3.connect(project / ".mesh" / "state.db")) as db:
        assert db.execute("SELECT COUNT(*) FROM mesh_pending_writes WHERE operation != 'retired'").fetchone() == (0,)
    compared = _compare(project, model)
    rows, reference, differing = compared["tables"][model]
    assert (rows, differing) == (reference, 0) and rows > 0, compared
    assert compared["leftovers"] == []


def _compare(project: Path, model: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(COMPARE),
                           json.dumps({"project": str(project), "schema": "k", "models": [model]})],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
