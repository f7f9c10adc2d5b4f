"""`mesh spark start` refusals: one line, before any JVM starts, nothing written.

`.mesh/connect.lock` exists beforehand in every case, as after any earlier `mesh spark` command:
it is the empty file starters lock, not state.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.bad_input.harness import assert_refused, copy_example, mesh, nothing_written

# Holds the POSIX lock a booted Derby holds on its database, as an embedded session would.
HOLD_DERBY = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    print("HOLDING", flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = copy_example(tmp_path / "project")
    (project / ".mesh").mkdir()
    (project / ".mesh" / "connect.lock").touch()
    return project


def test_start_while_an_embedded_session_holds_the_metastore(project: Path):
    database = project / ".mesh" / "metastore_db"
    database.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_DERBY, str(database / "dbex.lck")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        with nothing_written(project):
            outcome = mesh(project, "spark", "start")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert_refused(outcome, f"The Spark Connect server cannot open the metastore in {project.resolve() / '.mesh'}: "
                            f"another process (pid {holder.pid}: python -c import fcntl",
                   "holds its Derby lock", "run `mesh spark start` again")


def test_start_on_a_port_in_use(project: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with nothing_written(project):
            outcome = mesh(project, "spark", "start", "--port", str(port))
    assert_refused(outcome, f"Cannot start the Spark Connect server: port {port} is already in use")


def test_start_with_a_cluster_master(project: Path):
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("master: local[*]", "master: spark://spark.example:7077", 1))
    with nothing_written(project):
        outcome = mesh(project, "spark", "start")
    assert_refused(outcome, "The project's Spark server is only for local masters; this connection uses "
                            "spark://spark.example:7077")


@pytest.mark.parametrize(("args", "fragment"), [
    (("--port", "70000"), "Invalid value for '--port': 70000 is not in the range 1<=x<=65535."),
    (("--port", "0"), "Invalid value for '--port': 0 is not in the range 1<=x<=65535."),
    (("--timeout", "0"), "Invalid value for '--timeout': 0.0 is not in the range x>0."),
    (("--timeout", "soon"), "Invalid value for '--timeout': 'soon' is not a valid float range."),
])
def test_start_with_an_invalid_option(project: Path, args: tuple[str, ...], fragment: str):
    with nothing_written(project):
        outcome = mesh(project, "spark", "start", *args)
    assert_refused(outcome, fragment)


def test_a_second_mesh_ui_is_refused_before_it_announces_itself(project: Path):
    from mesh_dagster.dagster.ui.lock import only_ui
    from mesh_dagster.dagster.ui.workspace import ui_home

    with only_ui(ui_home(project)):
        with nothing_written(project):
            outcome = mesh(project, "ui")
    assert "Dagster UI on" not in outcome.stdout
    assert_refused(outcome, "`mesh ui` already runs for this project", "stop it (Ctrl-C) before starting another")
