"""The shared Spark Connect server's bookkeeping, without starting Spark.

Real files, real processes (a finished child gives a dead pid, this test process a live pid
that is not a server), real sockets and a real file lock.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.connect_server import (
    project_session,
    server_requested,
    server_status,
    start_server,
    stop_server,
)
from mesh_dagster.engine.server_process import SERVER_CLASS
from mesh_dagster.engine.server_record import INFO_FILE, LOCK_FILE, SERVER_ENV, ServerInfo

REPO = Path(__file__).resolve().parents[2]


def _record(mesh_dir: Path, pid: int, port: int = 1, ready: bool = True) -> Path:
    mesh_dir.mkdir(parents=True, exist_ok=True)
    info = ServerInfo(
        pid=pid, port=port, url=f"sc://localhost:{port}", token="t0k", started_ts=0,
        log_path=str(mesh_dir / "connect.log"), mesh_dir=str(mesh_dir), master="local[1]",
        spark_version="4.3.0", ready=ready,
    )
    path = mesh_dir / INFO_FILE
    path.write_text(info.model_dump_json())
    return path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_client_url_carries_the_token():
    info = ServerInfo(pid=1, port=4242, url="sc://localhost:4242", token="abc", started_ts=0, log_path="x",
                      mesh_dir="/m", master="local[*]", spark_version="4.3.0")
    assert info.client_url == "sc://localhost:4242/;token=abc"


@pytest.mark.parametrize(("value", "enabled", "expected"), [
    ("1", False, True), ("true", False, True), ("YES", False, True), ("on", False, True),
    ("0", True, False), ("off", True, False), ("No", True, False),
    ("", True, True), ("", False, False),  # unset: the connection's `server.enabled` decides
])
def test_the_server_is_the_default_and_the_environment_overrides_the_config(monkeypatch, value, enabled, expected):
    monkeypatch.setenv(SERVER_ENV, value)
    conn = SparkConnectionConfig(master="local[1]", server={"enabled": enabled})
    assert server_requested(conn) is expected


def test_a_server_setting_that_is_neither_on_nor_off_is_refused(monkeypatch):
    monkeypatch.setenv(SERVER_ENV, "maybe")
    with pytest.raises(EngineError) as exc:
        server_requested(SparkConnectionConfig())
    assert str(exc.value) == ("MESH_SPARK_SERVER='maybe' is neither on (1, true, yes, on) nor off "
                              "(0, false, no, off).")


def test_a_cluster_master_never_starts_a_server_whatever_is_asked(tmp_path):
    # project_session goes straight to the master (here: unreachable, refused before any JVM starts),
    # in a process of its own: this one may hold a session already, which build_session would return.
    code = ("import sys; from pathlib import Path; from mesh_dagster.core.errors import EngineError\n"
            "from mesh_dagster.core.config.connections import SparkConnectionConfig\n"
            "from mesh_dagster.engine.connect_server import project_session\n"
            "conn = SparkConnectionConfig(master='spark://127.0.0.1:1', connect_timeout=0.5)\n"
            "try:\n    project_session(conn, Path(sys.argv[1]))\nexcept EngineError as e:\n    print('REFUSED', e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / ".mesh")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, SERVER_ENV: "1", "PYTHONPATH": str(REPO)})
    assert done.stdout.startswith("REFUSED") and "spark://127.0.0.1:1" in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / ".mesh" / INFO_FILE).exists()


def test_status_without_a_record_is_none(tmp_path):
    assert server_status(tmp_path / ".mesh") is None


def test_status_removes_a_record_of_a_dead_process(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    path = _record(mesh_dir, _dead_pid())
    assert server_status(mesh_dir) is None
    assert not path.exists()


def test_status_removes_a_record_whose_pid_is_not_a_connect_server(tmp_path):
    # A reused pid: alive, but some other program (here: this test process).
    mesh_dir = tmp_path / ".mesh"
    path = _record(mesh_dir, os.getpid())
    assert server_status(mesh_dir) is None
    assert not path.exists()


def test_status_removes_a_malformed_record(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    mesh_dir.mkdir()
    path = mesh_dir / INFO_FILE
    path.write_text("{not json")
    assert server_status(mesh_dir) is None
    assert not path.exists()


def test_status_keeps_a_stale_record_while_someone_holds_the_lock(tmp_path):
    # The lock holder is replacing the record; deleting it under them would lose their server.
    mesh_dir = tmp_path / ".mesh"
    path = _record(mesh_dir, _dead_pid())
    with open(mesh_dir / LOCK_FILE, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert server_status(mesh_dir) is None
        assert path.exists()
    assert server_status(mesh_dir) is None
    assert not path.exists()


def _fake_server(mesh_dir: Path) -> subprocess.Popen:
    """A process whose command line looks like this project's server while it starts."""
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)", SERVER_CLASS,
         f"spark.mesh_dagster.mesh_dir={mesh_dir.resolve()}"],
        start_new_session=True, stdout=subprocess.PIPE, text=True,
    )
    assert server.stdout.readline().strip() == "up"  # its command line is in place
    return server


def test_status_keeps_the_record_of_a_server_still_starting(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    server = _fake_server(mesh_dir)
    try:
        path = _record(mesh_dir, server.pid, ready=False)
        assert server_status(mesh_dir) is None
        assert path.exists()
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def test_stop_terminates_the_recorded_server(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    server = _fake_server(mesh_dir)
    try:
        path = _record(mesh_dir, server.pid, ready=False)
        assert stop_server(mesh_dir) is True
        assert server.wait(timeout=30) == -signal.SIGTERM
        assert not path.exists()
    finally:
        if server.poll() is None:
            server.kill()
        server.stdout.close()


def test_stop_without_a_server_returns_false(tmp_path):
    assert stop_server(tmp_path / ".mesh") is False


def test_stop_with_a_stale_record_removes_it_and_signals_nothing(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    path = _record(mesh_dir, os.getpid())  # must not be killed: it is not a Connect server
    assert stop_server(mesh_dir) is False
    assert not path.exists()


def test_stop_times_out_while_another_process_holds_the_lock(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    _record(mesh_dir, _dead_pid())
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f.fileno(), fcntl.LOCK_EX); "
         "print('locked', flush=True); sys.stdin.read()", str(mesh_dir / LOCK_FILE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(EngineError) as exc:
            stop_server(mesh_dir, timeout_s=0.5)
    finally:
        holder.stdin.close()
        holder.wait()
        holder.stdout.close()
    assert "Timed out after 0.5 s waiting for another process to finish starting or stopping" in str(exc.value)
    assert str(mesh_dir / LOCK_FILE) in str(exc.value)


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    # A starter killed while it held the lock (SIGKILL: nothing cleans up) does not block the next one.
    mesh_dir = tmp_path / ".mesh"
    path = _record(mesh_dir, _dead_pid())
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f.fileno(), fcntl.LOCK_EX); "
         "print('locked', flush=True); time.sleep(600)", str(mesh_dir / LOCK_FILE)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert (mesh_dir / LOCK_FILE).exists()
    assert stop_server(mesh_dir, timeout_s=5) is False
    assert not path.exists()


def test_status_removes_the_record_of_a_server_that_died_unreaped(tmp_path):
    # A zombie keeps its pid (and the server's command line is gone with it): not a server any more.
    mesh_dir = tmp_path / ".mesh"
    server = _fake_server(mesh_dir)
    try:
        path = _record(mesh_dir, server.pid)
        server.kill()
        os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
        assert server_status(mesh_dir) is None
        assert not path.exists()
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def test_start_refuses_a_remote_connection(tmp_path):
    conn = SparkConnectionConfig(remote="sc://spark.example.com:15002")
    with pytest.raises(EngineError) as exc:
        start_server(conn, tmp_path / ".mesh")
    assert "only for local masters" in str(exc.value)
    assert "sc://spark.example.com:15002" in str(exc.value)


def test_start_refuses_a_cluster_master(tmp_path):
    with pytest.raises(EngineError) as exc:
        start_server(SparkConnectionConfig(master="yarn"), tmp_path / ".mesh")
    assert "only for local masters; this connection uses yarn" in str(exc.value)


def test_start_refuses_a_port_in_use(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineError) as exc:
            start_server(SparkConnectionConfig(master="local[1]"), tmp_path / ".mesh", port=port)
    assert f"port {port} is already in use" in str(exc.value)
    assert not (tmp_path / ".mesh" / INFO_FILE).exists()


def test_a_connect_process_without_a_running_server_is_told_to_start_it(tmp_path, monkeypatch):
    # Once a process has a Spark Connect session PySpark cannot give it an embedded one.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    with pytest.raises(EngineError) as exc:
        project_session(SparkConnectionConfig(master="local[1]"), tmp_path / ".mesh", shared=False)
    assert "already uses Spark Connect" in str(exc.value)
    assert "`mesh spark start`" in str(exc.value)


def _mesh(project: Path, *args: str) -> subprocess.CompletedProcess:
    code = (
        "import sys; from mesh_dagster.cli.main import cli; from mesh_dagster.cli.spark_commands import spark; "
        "cli.add_command(spark); cli(sys.argv[1:], obj={})"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-c", code, "-p", str(project), *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cli_status_and_stop_without_a_server(tmp_path):
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    status = _mesh(tmp_path, "spark", "status")
    assert status.returncode == 1
    assert "No Spark Connect server is running for this project." in status.stdout
    stop = _mesh(tmp_path, "spark", "stop")
    assert stop.returncode == 0, stop.stderr
    assert "No Spark Connect server is running for this project." in stop.stdout


def test_cli_status_cleans_up_a_stale_record(tmp_path):
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    path = _record(tmp_path / ".mesh", _dead_pid())
    status = _mesh(tmp_path, "spark", "status")
    assert status.returncode == 1
    assert not path.exists()


def test_cli_start_with_a_remote_gateway_fails_with_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text(
        "gateways:\n  cluster:\n    connection:\n      remote: sc://spark.example.com:15002\n"
    )
    result = _mesh(tmp_path, "spark", "start")
    assert result.returncode == 1
    assert "Error: The project's Spark server is only for local masters" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_start_without_a_project_says_so(tmp_path):
    result = _mesh(tmp_path, "spark", "start")
    assert result.returncode == 1
    assert "No config.yaml found" in result.stderr

