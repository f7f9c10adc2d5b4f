"""What a project's Spark Connect server leaves in `.mesh/`: its record, its lock, its last use.

- `connect.json`: how to reach the server and what it was started with (`ServerInfo`), written
  atomically and readable by its owner only (it holds the token);
- `connect.lock`: an flock that serialises starting, stopping and the idle stop;
- `connect.used`: its modification time is the last time a client chose the server; the idle stop
  (idle_watch.py) counts from it and from the server's open connections.

Kept apart from the server's life (connect_server.py) so that the idle watcher, a small process
of its own, reads and locks the same files without importing PySpark.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from mesh_dagster.core.errors import EngineError

INFO_FILE = "connect.json"
LOG_FILE = "connect.log"
LOCK_FILE = "connect.lock"
USED_FILE = "connect.used"
# The opt-out (and opt-in) of the warm server, over `server.enabled` of the connection.
SERVER_ENV = "MESH_SPARK_SERVER"


class ServerInfo(BaseModel):
    """What `connect.json` records about a running server."""

    pid: int
    port: int
    url: str
    token: str = Field(repr=False)  # a secret: kept out of reprs that may reach a log
    started_ts: int
    log_path: str
    mesh_dir: str
    master: str
    spark_version: str
    ready: bool = False
    # What decides the server's behaviour (server_identity.py): a client whose own differs restarts it.
    identity: dict[str, str] = Field(default_factory=dict)
    # Seconds without a client after which the server stops itself; None: it never does.
    idle_s: float | None = None
    watcher_pid: int | None = None

    @property
    def client_url(self) -> str:
        """The URL a client connects with: `url` plus the token."""
        return f"{self.url}/;token={self.token}"


def info_path(mesh_dir: Path) -> Path:
    return mesh_dir / INFO_FILE


def read_info(mesh_dir: Path) -> ServerInfo | None:
    try:
        return ServerInfo.model_validate(json.loads(info_path(mesh_dir).read_text()))
    except (OSError, ValueError, ValidationError):
        return None


def write_info(mesh_dir: Path, info: ServerInfo) -> None:
    """Atomically, readable by this user only: it holds the token."""
    path = info_path(mesh_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(info.model_dump_json(indent=2))
    os.replace(tmp, path)


def mark_used(mesh_dir: Path) -> None:
    """A client chose the server now: the idle stop starts counting again."""
    path = mesh_dir / USED_FILE
    try:
        path.touch()  # an existing file's modification time becomes now
    except OSError:
        pass  # a read-only .mesh: the server's open connections still count as use


def last_used(mesh_dir: Path) -> float | None:
    """When a client last chose the server (epoch seconds), None if never."""
    try:
        return (mesh_dir / USED_FILE).stat().st_mtime
    except OSError:
        return None


def idle_left_s(info: ServerInfo, in_use: bool, now: float | None = None) -> float | None:
    """Seconds before the server stops itself; None when it never does or a client is connected."""
    if info.idle_s is None or in_use:
        return None
    since = max(last_used(Path(info.mesh_dir)) or 0.0, info.started_ts / 1000)
    return max(0.0, since + info.idle_s - (time.time() if now is None else now))


@contextlib.contextmanager
def server_lock(mesh_dir: Path, timeout_s: float) -> Iterator[None]:
    lock = _file_lock(mesh_dir)
    try:
        lock.acquire(timeout=timeout_s, poll_interval=0.2)
    except Timeout:
        raise EngineError(
            f"Timed out after {timeout_s:g} s waiting for another process to finish starting or "
            f"stopping the Spark Connect server of {mesh_dir.parent} (lock {mesh_dir / LOCK_FILE})."
        ) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def try_server_lock(mesh_dir: Path) -> Iterator[bool]:
    lock = _file_lock(mesh_dir)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _file_lock(mesh_dir: Path) -> FileLock:
    """An flock on `connect.lock` (`filelock.FileLock`): the kernel drops it with its process, so a
    starter that dies leaves nothing stale. A new object per use: flock excludes other threads of this
    process too, as it must (one starter per project, whatever the thread)."""
    if os.name != "posix":  # the server's process group is stopped with killpg
        raise EngineError("The shared Spark Connect server needs a POSIX system (Linux or macOS).")
    # fallback_to_soft=False: on a filesystem without flock, fail rather than leave a marker that a
    # crashed starter would leave behind for good.
    return FileLock(mesh_dir / LOCK_FILE, fallback_to_soft=False)
