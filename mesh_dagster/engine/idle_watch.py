"""The idle stop of a project's warm Spark server: a small process that lives beside the server.

A warm server holds a JVM of a gigabyte or more; nobody should have to remember to stop it. So
each server gets a watcher (`python -m mesh_dagster.engine.idle_watch MESH_DIR PID`, started with
it, in a session of its own) that stops it once no client has used it for its idle time
(`ServerInfo.idle_s`, from `server.idle_minutes`). Used means: a client holds a connection to it
(a command, a Dagster run, a notebook), or chose it lately (`connect.used`, touched under the
server's lock, so a client that just chose the server is never cut off by a stop it raced).

While the server idles, nobody waits for the machine: that is when the watcher has the JVM class
archive built if it is missing (class_archive.py), so that building it never slows a command.

The watcher ends when the server is gone, whoever stopped it. A server whose record is gone while
it runs (its project's `.mesh/` deleted, the project moved) can be reached by no client any more:
the watcher stops it rather than leave its JVM running for good. It imports no PySpark.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mesh_dagster.engine import class_archive
from mesh_dagster.engine.server_process import clients, is_server_process, retire, terminate
from mesh_dagster.engine.server_record import (
    LOG_FILE,
    ServerInfo,
    idle_left_s,
    mark_used,
    read_info,
    try_server_lock,
)

# Idle this long, the machine is the watcher's to build the class archive on.
ARCHIVE_AFTER_IDLE_S = 60.0


def start_watcher(mesh_dir: Path, pid: int) -> subprocess.Popen:
    """The watcher of the server `pid`, detached: it outlives the command that started the server."""
    with open(mesh_dir / LOG_FILE, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "mesh_dagster.engine.idle_watch", str(mesh_dir), str(pid)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            close_fds=True,
        )


def watch(mesh_dir: Path, pid: int, clock: Callable[[], float] = time.time,
          sleep: Callable[[float], None] = time.sleep) -> str:
    """Watch until the server is gone ('gone'), or stopped by the watcher: idle ('idle'), or without
    its record, which no client can find it by ('unreachable')."""
    archive_asked = False
    while True:
        if not is_server_process(pid, mesh_dir):
            return "gone"
        info = read_info(mesh_dir)
        if info is None or info.pid != pid:  # written atomically: missing means deleted
            terminate(pid, mesh_dir)
            return "unreachable"
        if clients(pid, info.port):
            mark_used(mesh_dir)
        else:
            left = idle_left_s(info, in_use=False, now=clock())
            if left is not None and left <= 0 and stop_if_idle(mesh_dir, pid, clock):
                return "idle"
            if not archive_asked and _idle_for(info, clock) >= ARCHIVE_AFTER_IDLE_S:
                archive_asked = True
                class_archive.build_if_needed()
        sleep(_poll_s(info))


def stop_if_idle(mesh_dir: Path, pid: int, clock: Callable[[], float] = time.time) -> bool:
    """Stop the server if it is still idle, under its lock: a client choosing it meanwhile wins."""
    with try_server_lock(mesh_dir) as locked:
        if not locked:
            return False  # a command is starting, choosing or stopping it: look again later
        info = read_info(mesh_dir)
        if info is None or info.pid != pid or clients(pid, info.port):
            return False
        left = idle_left_s(info, in_use=False, now=clock())
        if left is None or left > 0:
            return False
        _log(mesh_dir, f"mesh_dagster: stopping the Spark Connect server after {info.idle_s:g} s without a client")
        retire(pid, mesh_dir)
        return True


def _idle_for(info: ServerInfo, clock: Callable[[], float]) -> float:
    left = idle_left_s(info, in_use=False, now=clock())
    return 0.0 if left is None or info.idle_s is None else info.idle_s - left


def _poll_s(info: ServerInfo) -> float:
    """Often enough to stop within a tenth of the idle time, never busier than twice a second."""
    return 15.0 if info.idle_s is None else min(15.0, max(0.5, info.idle_s / 10))


def _log(mesh_dir: Path, line: str) -> None:
    with open(mesh_dir / LOG_FILE, "a") as log:
        log.write(line + "\n")


def _main(argv: list[str]) -> int:
    watch(Path(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
