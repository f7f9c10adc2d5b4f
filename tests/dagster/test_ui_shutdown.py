"""`mesh ui` stops everything within 10 s of Ctrl-C and SIGTERM, while a run is busy in Spark.

A real `mesh ui` (dagster dev: webserver, daemon, code servers) on a small project; one run of a
model whose query sleeps in the Spark Connect server for five minutes. Ctrl-C, then SIGTERM a
second later, as a user at a terminal might: every process `dagster dev` started must be gone
within 10 s, the run must be CANCELED in Dagster's storage, and the project's Spark Connect server
(shared with the `mesh` CLI, started before `mesh ui`) must still answer.
"""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from project_copies import TODAY, recent_example
from test_dagster_webserver import RUN, Dagster, _free_port

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.dagster.ui.supervisor import CANCEL_MESSAGE
from mesh_dagster.engine.connect_server import server_status, start_server, stop_server
from tests.listening_sockets import session_members

pytestmark = pytest.mark.slow

STOP_WITHIN_S = 10
SLOW_MODEL = """MODEL (
  name sqlmesh_example.slow,
  kind FULL,
);

SELECT 1 AS id, reflect('java.lang.Thread', 'sleep', CAST(300000 AS BIGINT)) AS slept
"""


def _dagster_dev(ui: int) -> int:
    """`dagster dev`'s pid: `mesh ui` itself once it exec'd into it, else its child."""
    for pid in [ui, *(int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit())]:
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (pid == ui or parent == ui) and command[1:4] == [b"-m", b"dagster", b"dev"]:
            return pid
    raise AssertionError("no `dagster dev` for `mesh ui`")


def _wait_writing(dagster: Dagster, run_id: str, schema_dir: Path, timeout: float = 300) -> None:
    """Until the run's INSERT is under way in the server (and will sleep there for 5 minutes):
    Spark creates the table's `_temporary` folder when a write job starts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(schema_dir.glob("sqlmesh_example__slow__*/_temporary")):
            return
        status = dagster.query(RUN, id=run_id)["runOrError"]["status"]
        assert status in ("QUEUED", "NOT_STARTED", "STARTING", "STARTED"), (status, dagster.failure(run_id))
        time.sleep(0.5)
    raise AssertionError("the run never started writing")


def test_ctrl_c_then_sigterm_stops_everything_and_cancels_the_run(tmp_path):
    project = recent_example(tmp_path / "project", days=3)  # models start the day before yesterday
    (project / "models" / "slow.sql").write_text(SLOW_MODEL)
    mesh_dir = project / ".mesh"
    server = start_server(load_config(project).gateway().connection, mesh_dir)
    dagster = Dagster(project, _free_port(), tmp_path / "dagster.log")
    try:
        dagster.wait_loaded()
        run_id = dagster.launch("__ASSET_JOB", {"dagster/partition": str(TODAY - timedelta(days=1))},
                                [["sqlmesh_example", "slow"]])
        _wait_writing(dagster, run_id, mesh_dir / "warehouse" / "mesh__sqlmesh_example.db")
        assert dagster.query(RUN, id=run_id)["runOrError"]["status"] == "STARTED"
        tree = session_members(_dagster_dev(dagster.proc.pid))
        assert len(tree) >= 6, tree  # dagster dev, webserver, daemon, code servers, the run worker...

        dagster.proc.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        time.sleep(1)
        dagster.proc.send_signal(signal.SIGTERM)
        dagster.proc.wait(timeout=STOP_WITHIN_S + 5)
        while [pid for pid in tree if Path(f"/proc/{pid}").exists()] and time.monotonic() - stopped < 30:
            time.sleep(0.2)
        leftovers = [pid for pid in tree if Path(f"/proc/{pid}").exists()]
        assert leftovers == [] and time.monotonic() - stopped < STOP_WITHIN_S, (leftovers, dagster.log.read_text()[-3000:])
        assert dagster.proc.returncode == 128 + signal.SIGINT

        run = DagsterInstance.from_config(str(mesh_dir / "dagster")).get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.CANCELED
        assert server_status(mesh_dir) is not None and server_status(mesh_dir).pid == server.pid
    finally:
        dagster.stop()
        stop_server(mesh_dir)


def test_cancel_message_names_mesh_ui():
    assert "`mesh ui`" in CANCEL_MESSAGE
