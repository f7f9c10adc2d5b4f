"""A `remote:` Spark Connect server that is wrong or not there: one line within seconds.

PySpark alone retries an unreachable server for ten minutes with nothing on the terminal. These
commands run in their own process: a Connect client would turn this test process's Spark
sessions into Connect ones.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bad_input.harness import assert_refused, closed_port, copy_example, mesh, mesh_process, nothing_written

# A hang would show up as a subprocess timeout, i.e. a failed test, well before PySpark's 10 minutes.
HANG_S = 90


def _with_remote(tmp_path: Path, url: str) -> Path:
    project = copy_example(tmp_path / "project")
    config = project / "config.yaml"
    text = config.read_text()
    assert "# remote: sc://" in text
    config.write_text(re.sub(r"# remote: sc://\S+", f"remote: {url}", text, count=1))
    return project


@pytest.fixture
def not_grpc() -> Iterator[int]:
    """A TCP server that answers every connection like a web server, not like Spark Connect."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_nothing_listening(tmp_path: Path):
    port = closed_port()
    project = _with_remote(tmp_path, f"sc://127.0.0.1:{port}/;token=s3cret")
    with nothing_written(project):
        outcome = mesh_process(project, "plan", "--auto-apply", timeout_s=HANG_S)
    assert_refused(outcome, f"Cannot connect to Spark Connect at sc://127.0.0.1:{port}/;token=***",
                   "connection refused", "Check `remote:` in config.yaml")
    logs = list((project / ".mesh" / "logs").glob("*.log"))
    assert logs, "no log file written"
    assert all("s3cret" not in log.read_text() for log in logs), "the token reached the log"
    assert "s3cret" not in outcome.stdout + outcome.stderr


def test_something_else_listening(tmp_path: Path, not_grpc: int):
    project = _with_remote(tmp_path, f"sc://127.0.0.1:{not_grpc}")
    with nothing_written(project):
        outcome = mesh_process(project, "fetchdf", "SELECT 1", timeout_s=HANG_S)
    assert_refused(outcome, f"Cannot connect to Spark Connect at sc://127.0.0.1:{not_grpc}",
                   "Spark Connect server unreachable")


@pytest.mark.parametrize(("url", "message"), [
    ("http://spark:15002", "a Spark Connect URL looks like sc://host:port"),
    ("sc://:15002", "a Spark Connect URL looks like sc://host:port"),
    ("sc://spark:port/;token=s3cret", "the port of a Spark Connect URL is a number"),
])
def test_not_a_connect_url(tmp_path: Path, url: str, message: str):
    project = _with_remote(tmp_path, url)
    line = next(i for i, text in enumerate((project / "config.yaml").read_text().splitlines(), 1)
                if text.strip().startswith("remote:"))
    with nothing_written(project):
        outcome = mesh(project, "plan", "--auto-apply")
    refused = assert_refused(outcome, f"config.yaml:{line}: gateways.local.connection.remote: {message}")
    assert "s3cret" not in refused
