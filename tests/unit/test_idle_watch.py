"""The idle stop of the warm Spark server, on a stand-in server: a real process whose command line
is this project's server's and which accepts connections on a real port (no JVM needed), real
files and a real lock."""

from __future__ import annotations

import fcntl
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.engine import class_archive, idle_watch
from mesh_dagster.engine.server_process import MARKER, SERVER_CLASS, clients
from mesh_dagster.engine.server_record import (
    INFO_FILE,
    LOCK_FILE,
    LOG_FILE,
    ServerInfo,
    idle_left_s,
    mark_used,
    write_info,
)

# Accepts connections and keeps them open, as Spark Connect's gRPC server does.
SERVE = """
import socket, sys, time
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
print(server.getsockname()[1], flush=True)
held = []
while True:
    held.append(server.accept()[0])
"""


class StandIn:
    def __init__(self, mesh_dir: Path):
        mesh_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, SERVER_CLASS, f"{MARKER}={mesh_dir}"],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )
        self.port = int(self.process.stdout.readline())
        self.mesh_dir = mesh_dir

    def record(self, idle_s: float | None, started_s_ago: float = 0) -> ServerInfo:
        info = ServerInfo(
            pid=self.process.pid, port=self.port, url=f"sc://localhost:{self.port}", token="t", ready=True,
            started_ts=now_ms() - int(started_s_ago * 1000), log_path=str(self.mesh_dir / LOG_FILE),
            mesh_dir=str(self.mesh_dir), master="local[1]", spark_version="4.3.0", idle_s=idle_s,
        )
        write_info(self.mesh_dir, info)
        return info


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StandIn]:
    stand_in = StandIn((tmp_path / ".mesh").resolve())
    yield stand_in
    if stand_in.process.poll() is None:
        stand_in.process.kill()
    stand_in.process.wait()
    stand_in.process.stdout.close()


def test_an_idle_server_is_stopped_and_its_record_removed(server: StandIn) -> None:
    server.record(idle_s=1.0)
    started = time.monotonic()
    assert idle_watch.watch(server.mesh_dir, server.process.pid) == "idle"
    assert time.monotonic() - started < 10
    assert server.process.wait(timeout=10) == -signal.SIGTERM
    assert not (server.mesh_dir / INFO_FILE).exists()
    assert "stopping the Spark Connect server after 1 s without a client" in (server.mesh_dir / LOG_FILE).read_text()


def test_a_connected_client_keeps_it_and_the_idle_time_counts_from_its_leaving(server: StandIn) -> None:
    info = server.record(idle_s=60.0, started_s_ago=600)
    later = time.time() + 3600
    with socket.create_connection(("127.0.0.1", server.port)):
        deadline = time.monotonic() + 10
        while clients(server.process.pid, server.port) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert clients(server.process.pid, server.port) == 1
        assert idle_left_s(info, in_use=True) is None
        assert not idle_watch.stop_if_idle(server.mesh_dir, server.process.pid, clock=lambda: later)
    assert idle_watch.stop_if_idle(server.mesh_dir, server.process.pid, clock=lambda: later)
    assert server.process.wait(timeout=10) == -signal.SIGTERM


def test_a_client_that_just_chose_the_server_resets_the_idle_time(server: StandIn) -> None:
    info = server.record(idle_s=60.0, started_s_ago=600)
    assert idle_left_s(info, in_use=False) == 0
    mark_used(server.mesh_dir)  # what start_server does, under the lock, for every client
    assert 55 < idle_left_s(info, in_use=False) <= 60
    assert not idle_watch.stop_if_idle(server.mesh_dir, server.process.pid)
    assert server.process.poll() is None


def test_nothing_is_stopped_while_a_command_holds_the_lock(server: StandIn) -> None:
    server.record(idle_s=1.0, started_s_ago=600)
    with open(server.mesh_dir / LOCK_FILE, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert not idle_watch.stop_if_idle(server.mesh_dir, server.process.pid)
    assert server.process.poll() is None
    assert (server.mesh_dir / INFO_FILE).exists()


def test_a_server_without_an_idle_time_is_never_stopped(server: StandIn) -> None:
    info = server.record(idle_s=None, started_s_ago=10**6)
    assert idle_left_s(info, in_use=False) is None
    assert not idle_watch.stop_if_idle(server.mesh_dir, server.process.pid)


def test_the_watcher_ends_with_a_server_stopped_otherwise(server: StandIn) -> None:
    server.record(idle_s=3600.0)
    server.process.kill()
    server.process.wait()
    assert idle_watch.watch(server.mesh_dir, server.process.pid) == "gone"


def test_a_server_whose_record_was_deleted_is_stopped(server: StandIn) -> None:
    # The project's `.mesh/` deleted under a running server: no client can reach it any more.
    server.record(idle_s=3600.0)
    (server.mesh_dir / INFO_FILE).unlink()
    assert idle_watch.watch(server.mesh_dir, server.process.pid) == "unreachable"
    assert server.process.wait(timeout=30) is not None


def test_the_class_archive_is_built_once_the_server_idles_and_only_then(server: StandIn,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The watcher asks for the archive when nobody waits: after a minute without a client, once.
    server.record(idle_s=3600.0, started_s_ago=0)
    asked: list[float] = []
    monkeypatch.setattr(class_archive, "build_if_needed", lambda *a, **k: asked.append(now[0]))
    now = [time.time()]

    def sleep(_: float) -> None:
        now[0] += 25
        if now[0] > start + 150:
            server.process.kill()
            server.process.wait()

    start = now[0]
    assert idle_watch.watch(server.mesh_dir, server.process.pid, clock=lambda: now[0], sleep=sleep) == "gone"
    assert len(asked) == 1 and asked[0] - start >= idle_watch.ARCHIVE_AFTER_IDLE_S
