"""The warm server as a user gets it (issue 36): no `mesh spark start`, no environment variable.
The first command that needs Spark starts the project's server, the next ones find it warm, a
change of the Spark settings restarts it, it stops itself when idle, two projects (and a project
copied to another folder with its `.mesh/`) keep two servers, and the opt-out runs Spark in the
command's own process.

Real `mesh` processes and real JVMs (master local[1]); every server is stopped on teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from mesh_dagster.engine.connect_server import stop_server
from mesh_dagster.engine.server_process import MARKER, SERVER_CLASS
from mesh_dagster.engine.server_record import INFO_FILE, SERVER_ENV
from mesh_dagster.engine.statements import SQL_TRACE_ENV
from tests.project_builder import write_project

CONFIG = """\
gateways:
  local:
    connection:
      master: local[1]
      config:
        spark.sql.shuffle.partitions: 2
{server}model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
"""
MODELS = {
    "models/a.sql": "MODEL (name w.a, kind FULL); SELECT 1 AS id",
    "models/b.sql": "MODEL (name w.b, kind FULL); SELECT id + 1 AS id FROM w.a",
}
# What only a classic session has: Spark Connect refuses it.
NEEDS_CONTEXT = """
from mesh_dagster import model


@model("w.ctx", columns={"n": "int"})
def execute(context, start, end, execution_time):
    n = context.spark.sparkContext.defaultParallelism
    return context.spark.range(1).selectExpr(f"{n} AS n")
"""


def _mesh(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A `mesh` command as a user runs it: the server is the default (no MESH_SPARK_SERVER)."""
    base = {k: v for k, v in os.environ.items() if k != SERVER_ENV}
    return subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                          capture_output=True, text=True, timeout=600, env={**base, "COLUMNS": "250", **(env or {})})


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _record(project: Path) -> dict | None:
    path = project / ".mesh" / INFO_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _servers_of(project: Path) -> list[int]:
    """The pids of the Connect servers whose `.mesh` is `project`'s, from the process table."""
    mark = f"{MARKER}={(project / '.mesh').resolve()}"
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if mark in (p.info["cmdline"] or []) and any(SERVER_CLASS in a for a in p.info["cmdline"])]


@pytest.fixture
def projects(tmp_path: Path) -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for project in made:
        stop_server(project / ".mesh")
        assert _servers_of(project) == []


def _project(root: Path, made: list[Path], server: str = "", files: dict[str, str] = MODELS) -> Path:
    project = write_project(root, files, CONFIG.format(server=server))
    made.append(project)
    return project


def test_the_first_command_starts_the_server_and_the_next_ones_find_it_warm(tmp_path: Path, projects) -> None:
    project = _project(tmp_path / "p", projects)
    _ok(_mesh(project, "plan", "--explain"))  # never needs Spark: no server is started for it
    assert _record(project) is None and _servers_of(project) == []
    _ok(_mesh(project, "plan", "--auto-apply", "--skip-tests"))  # starts it early, beside its planning
    first = _record(project)
    assert first is not None and first["ready"] and _servers_of(project) == [first["pid"]]
    assert first["idle_s"] == 30 * 60  # the default

    fetched = _ok(_mesh(project, "fetchdf", "SELECT id FROM w.b"))
    assert fetched.stdout.split()[-1] == "2"
    assert _record(project)["pid"] == first["pid"]  # the same JVM: no start
    status = _ok(_mesh(project, "spark", "status"))
    assert f"pid {first['pid']}, master local[1]" in status.stdout
    assert "idle: stops by itself in 0h29m" in status.stdout and "(after 0h30m00s without a client)" in status.stdout

    # A Spark setting changed in config.yaml: the next command restarts the server, and says why.
    (project / "config.yaml").write_text(CONFIG.format(server="").replace("partitions: 2", "partitions: 3"))
    changed = _ok(_mesh(project, "fetchdf", "SELECT current_database() AS db"))
    assert "Restarting the project's Spark server: the Spark settings of config.yaml changed since it started." \
        in changed.stderr
    second = _record(project)
    assert second["pid"] != first["pid"] and _servers_of(project) == [second["pid"]]
    assert _ok(_mesh(project, "fetchdf", "SELECT id FROM w.b")).stdout.split()[-1] == "2"  # same warehouse

    # The opt-out: Spark in the command's own process; the idle server is stopped for it (Derby admits one).
    embedded = _ok(_mesh(project, "fetchdf", "SELECT id FROM w.a", env={SERVER_ENV: "0"}))
    assert embedded.stdout.split()[-1] == "1"
    assert _servers_of(project) == [] and _record(project) is None


def test_two_projects_and_a_copied_project_keep_their_own_servers(tmp_path: Path, projects) -> None:
    one = _project(tmp_path / "one", projects)
    _ok(_mesh(one, "plan", "--auto-apply", "--skip-tests"))
    served = _record(one)
    copy = tmp_path / "copy"
    shutil.copytree(one, copy)  # `.mesh/connect.json` and the token come along
    projects.append(copy)
    assert _record(copy)["pid"] == served["pid"]

    # The copy has its own metastore and warehouse: its server is its own; the first one is untouched.
    assert _ok(_mesh(copy, "fetchdf", "SELECT id FROM w.b")).stdout.split()[-1] == "2"
    copied = _record(copy)
    assert copied["pid"] != served["pid"] and copied["mesh_dir"] == str((copy / ".mesh").resolve())
    assert _servers_of(one) == [served["pid"]] and _servers_of(copy) == [copied["pid"]]
    assert _record(one) == served


def test_an_idle_server_stops_by_itself(tmp_path: Path, projects) -> None:
    project = _project(tmp_path / "p", projects, server="      server:\n        idle_minutes: 0.05\n")
    _ok(_mesh(project, "fetchdf", "SELECT 1 AS one"))
    pid = _record(project)["pid"]
    assert _servers_of(project) == [pid]
    deadline = time.monotonic() + 60
    while (_servers_of(project) or _record(project) is not None) and time.monotonic() < deadline:
        time.sleep(0.5)  # the watcher removes the record once the JVM's last thread is gone
    assert _servers_of(project) == [], "the idle server (3 s) still runs after a minute"
    assert _record(project) is None
    assert "stopping the Spark Connect server after 3 s without a client" in \
        (project / ".mesh" / "connect.log").read_text()
    status = _mesh(project, "spark", "status")
    assert status.returncode == 1 and "No Spark Connect server is running" in status.stdout
    _ok(_mesh(project, "fetchdf", "SELECT 1 AS one"))  # and the next command starts it again
    assert _record(project)["pid"] != pid


def test_a_python_model_needing_a_classic_session_is_told_the_opt_out(tmp_path: Path, projects) -> None:
    project = _project(tmp_path / "p", projects, files={"models/ctx.py": NEEDS_CONTEXT})
    refused = _mesh(project, "plan", "--auto-apply", "--skip-tests")
    assert refused.returncode == 1
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "models/ctx.py:6:" in lines[0]  # the line asking for sparkContext
    assert ("Python model w.ctx uses `sparkContext`, which Spark Connect (the project's warm Spark server) does "
            "not offer: run it with Spark in the command's own process (MESH_SPARK_SERVER=0, or "
            "`server: {enabled: false}` in the gateway's connection).") in lines[0]
    assert _ok(_mesh(project, "fetchdf", "SHOW SCHEMAS LIKE 'w'")).stdout.startswith("Empty result")  # nothing served
    with closing(sqlite3.connect(project / ".mesh" / "state.db")) as db:  # and nothing recorded
        assert db.execute("SELECT count(*) FROM mesh_intervals").fetchone() == (0,)

    # The opt-out it names works: the model runs with Spark in the command's own process.
    _ok(_mesh(project, "plan", "--auto-apply", "--skip-tests", env={SERVER_ENV: "0"}))
    assert _ok(_mesh(project, "fetchdf", "SELECT n FROM w.ctx", env={SERVER_ENV: "0"})).stdout.split()[-1] == "1"


def test_a_client_of_the_warm_server_deletes_old_generations_itself(tmp_path: Path, projects) -> None:
    """The server runs on this machine, so its client deletes a retired generation's directory
    itself: no database borrowed (created at the directory, dropped with CASCADE) per delete."""
    project = _project(tmp_path / "p", projects)
    _ok(_mesh(project, "plan", "--auto-apply", "--skip-tests"))
    trace = tmp_path / "trace.txt"
    for _ in range(2):  # the second restatement retires the table's first directory
        _ok(_mesh(project, "plan", "--auto-apply", "--skip-tests", "--restate-model", "w.a",
                  env={SQL_TRACE_ENV: str(trace)}))
    statements = trace.read_text()
    assert "SET LOCATION" in statements  # the rewrites switched generations
    assert "CREATE DATABASE" not in statements and "DROP DATABASE" not in statements
    for table in ("a", "b"):  # b reads a: restated with it
        kept = sorted(p.name for p in (project / ".mesh" / "warehouse").glob(f"*.db/w__{table}__*"))
        assert len(kept) == 2 and all("__mesh_g" in name for name in kept), kept  # the current and previous
    assert _ok(_mesh(project, "fetchdf", "SELECT id FROM w.b")).stdout.split()[-1] == "2"
