"""The warm Spark server as an operating-system process: is it ours, is it used, stop it.

Without PySpark on purpose: the idle watcher (idle_watch.py), a small process that lives as long as
the server, imports this module and server_record.py only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from mesh_dagster.engine.server_record import ServerInfo, info_path, read_info, try_server_lock

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
BIND_ADDRESS = "127.0.0.1"
# A setting only our servers have: tells this project's server from any other process by its
# command line (pids are reused; the warehouse path can be overridden by the user's config).
MARKER = "spark.mesh_dagster.mesh_dir"
_STOP_GRACE_S = 30.0

# Processes started by this process: only the parent can reap a dead child, and until then the
# kernel keeps its pid alive as a zombie.
CHILDREN: dict[int, subprocess.Popen] = {}


def is_server_process(pid: int, mesh_dir: Path) -> bool:
    """Alive, and still this project's Connect server rather than a recycled pid."""
    child = CHILDREN.get(pid)
    if child is not None:  # ours, and its pid cannot be reused before we reap it
        return child.poll() is None
    try:
        command = psutil.Process(pid).cmdline()  # a zombie's is empty (or raises ZombieProcess)
    except (psutil.Error, ValueError):  # gone, not ours to read, or not a pid at all
        return False
    return any(SERVER_CLASS in arg for arg in command) and f"{MARKER}={mesh_dir}" in command


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((BIND_ADDRESS, port)) == 0


def clients(pid: int, port: int) -> int:
    """Connections clients hold open to the server: a command, a Dagster run or a notebook using it.
    A connection this process cannot see (another user's) does not count: the server is this user's."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.Error, ValueError):
        return 0
    return sum(1 for c in connections if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port)


def terminate(pid: int, mesh_dir: Path) -> bool:
    """SIGTERM (Spark shuts down cleanly and releases Derby), SIGKILL after a grace period."""
    if not is_server_process(pid, mesh_dir):
        reap(pid)
        return False
    for sig, wait_s in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            _signal(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _exiting_or_alive(pid):
            time.sleep(0.1)
        if not _exiting_or_alive(pid):
            break
    reap(pid)
    return True



def retire(pid: int, mesh_dir: Path) -> bool:
    """Stop the server (if `pid` still is this project's) and delete its record: how every stop ends.
    False when it was not running."""
    stopped = terminate(pid, mesh_dir)
    info_path(mesh_dir).unlink(missing_ok=True)
    return stopped


def _exiting_or_alive(pid: int) -> bool:
    """Until its files are closed. A JVM on its way out loses its command line, and its main thread
    shows as a zombie, while its other threads still run and hold its locks (Derby's among them);
    only a zombie with no thread left holds none."""
    child = CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE or process.num_threads() > 1
    except (psutil.Error, ValueError):
        return False


def _signal(pid: int, sig: int) -> None:
    """The server's whole process group: while starting, the JVM is still a shell script with a
    launcher child that must not outlive it. The server leads its own group (`start_new_session`)."""
    if os.getpgid(pid) == pid:
        os.killpg(pid, sig)
    else:
        os.kill(pid, sig)


def reap(pid: int) -> None:
    child = CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=10)


def server_status(mesh_dir: Path) -> ServerInfo | None:
    """The project's server if it is running and answering, else None.

    A record whose process is gone (killed, stopped when idle, machine rebooted, pid reused, or a
    project copied to another folder with its `.mesh/`) is deleted. A server that is alive but does
    not answer yet (another process is starting it) keeps its record.
    """
    mesh_dir = Path(mesh_dir).resolve()
    info = read_info(mesh_dir)
    if info is None:
        if info_path(mesh_dir).exists():
            _remove_stale(mesh_dir, None)
        return None
    if not is_server_process(info.pid, mesh_dir):
        _remove_stale(mesh_dir, info.pid)
        return None
    return info if info.ready and port_open(info.port) else None


def _remove_stale(mesh_dir: Path, pid: int | None) -> None:
    """Delete a dead server's record, unless someone holds the lock (they are replacing it)."""
    with try_server_lock(mesh_dir) as locked:
        if not locked:
            return
        current = read_info(mesh_dir)
        if (current is None and pid is None) or (current is not None and current.pid == pid):
            info_path(mesh_dir).unlink(missing_ok=True)
