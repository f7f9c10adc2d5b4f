"""One `mesh ui` per project (the lock in `.mesh/dagster/`). Its own module, importing nothing of
Dagster nor of the project: the supervisor takes the lock and starts `dagster dev` before it loads
anything heavier (see supervisor.py), which is a second of every `mesh ui` start."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from mesh_dagster.core.errors import MeshError

LOCK_FILE = "ui.lock"


class UiAlreadyRunning(MeshError):
    """Another `mesh ui` serves this project."""


@contextlib.contextmanager
def only_ui(dagster_home: Path) -> Iterator[None]:
    """One `mesh ui` per project: a second would run every schedule and sensor twice, and stopping
    either would cancel the other's runs.

    An flock (`filelock.FileLock`) on `ui.lock`: the kernel drops it when its process dies, however
    it dies, so a killed `mesh ui` leaves nothing stale. The holder writes its pid into the file for
    the refusal message; a contender only reads it (filelock never truncates a file it did not lock).
    """
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / LOCK_FILE
    # fallback_to_soft=False: on a filesystem without flock, fail rather than leave a marker a crash
    # would leave behind for good.
    lock = FileLock(path, blocking=False, fallback_to_soft=False, on_acquired=_write_pid)
    try:
        lock.acquire()
    except Timeout:
        raise UiAlreadyRunning(
            f"`mesh ui` already runs for this project (pid {_holder(path)}, instance {dagster_home}): use its "
            f"webserver, or stop it (Ctrl-C) before starting another."
        ) from None
    try:
        yield
    finally:
        lock.release()


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def check_ui_free(dagster_home: Path) -> None:
    """Refuse early (before printing where the UI will be) when another `mesh ui` holds the lock."""
    with only_ui(dagster_home):
        pass
