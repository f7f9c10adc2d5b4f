"""Who holds the embedded Derby metastore, asked before a JVM is started.

Derby admits one JVM per database. A second process that opens it anyway gets its session
(8 s of JVM start), and its first catalog call then fails after ~20 s of Hive retries, each logged
with several hundred lines of DataNucleus stack traces. Asking first costs a file read: a booted
Derby holds a POSIX lock on `metastore_db/dbex.lck` for as long as it runs (the lock dies with the
process, so a crash leaves nothing stale), and on Linux `/proc/locks` names the holder's pid.

The check cannot close the window between asking and booting; a process that loses that race
still fails in Spark, and `derby_busy_database` recognises the failure so it is reported the same
way (the log4j configuration keeps DataNucleus's stack traces off the terminal).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "MetastoreHolder",
    "busy_message",
    "derby_busy_database",
    "derby_database",
    "metastore_holder",
]

_EXCLUSIVE_LOCK = "dbex.lck"
_PROC_LOCKS = Path("/proc/locks")
_DERBY_URL = re.compile(r"^jdbc:derby:(?:;databaseName=)?([^;]+)")
_BOOTED_ELSEWHERE = re.compile(r"Another instance of Derby may have already booted the database (.+?)\.?$")
_CONNECT_SERVER = "SparkConnectServer"
_SPARK_SUBMIT = "org.apache.spark.deploy.SparkSubmit"
_MAX_COMMAND = 100
_MAX_CAUSES = 30


@dataclass(frozen=True)
class MetastoreHolder:
    """The process holding a Derby database: its pid and command line, when the system tells."""

    pid: int | None = None
    command: str | None = None
    connect_server: bool = False

    def describe(self) -> str:
        if self.connect_server:
            return f"the project's Spark Connect server (pid {self.pid})"
        if self.pid is None:
            return "another process"
        return (
            f"another process (pid {self.pid}: {self.command})" if self.command else f"another process (pid {self.pid})"
        )


def derby_database(url: str) -> Path | None:
    """The embedded Derby database a metastore JDBC URL boots (None: not Derby, or in memory)."""
    match = _DERBY_URL.match(url)
    if match is None or match.group(1).startswith("memory:"):
        return None
    return Path(match.group(1))


def metastore_holder(database: Path) -> MetastoreHolder | None:
    """The other process that has `database` booted, or None when it is free (or does not exist yet)."""
    lock = Path(database) / _EXCLUSIVE_LOCK
    try:
        stat = lock.stat()
    except OSError:
        return None
    if _PROC_LOCKS.exists():
        pid = _posix_lock_owner(stat)
        return _holder(pid) if pid is not None and pid != os.getpid() else None
    return MetastoreHolder() if _locked_elsewhere(lock) else None


def busy_message(database: Path, holder: MetastoreHolder) -> str:
    """One line: who holds the metastore, why that stops us, and what to do."""
    if holder.connect_server:  # not answering yet, or this process would have become its client
        return (
            f"The project's metastore ({database}) is held by {holder.describe()}, which does not answer "
            f"yet: run this again once `mesh spark status` shows it running, or stop it with `mesh spark stop`."
        )
    return (
        f"The project's metastore ({database}) is in use by {holder.describe()}: embedded Spark admits one "
        f"process at a time. Wait for it to finish and run this again; to run several commands at once, "
        f"start a shared Spark server with `mesh spark start` while no other command runs."
    )


def derby_busy_database(exc: BaseException) -> Path | None:
    """The database named by Derby's 'already booted' error (XSDB6) anywhere in `exc`'s Java causes.

    PySpark keeps the Java exception as `_origin` (captured SQL errors) or `java_exception`
    (Py4JJavaError); the Python text holds only the outermost message ("Unable to instantiate
    SessionHiveMetaStoreClient"), the Derby reason is a dozen causes down.
    """
    cause = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    for _ in range(_MAX_CAUSES):
        if cause is None:
            break
        try:
            match = _BOOTED_ELSEWHERE.search(str(cause.getMessage() or ""))
            if match:
                return Path(match.group(1))
            cause = cause.getCause()
        except Exception:  # noqa: BLE001 - a JVM that is gone must not hide the original error
            break
    match = _BOOTED_ELSEWHERE.search(str(exc))
    return Path(match.group(1)) if match else None


def _posix_lock_owner(stat: os.stat_result) -> int | None:
    """Linux: the pid holding a POSIX lock on the file, from `/proc/locks` (nothing is locked by asking;
    psutil does not list locks)."""
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) >= 6 and fields[1] in ("POSIX", "OFDLCK") and fields[5] == device:
            return int(fields[4]) if fields[4].isdigit() else None
    return None


def _locked_elsewhere(lock: Path) -> bool:
    """Elsewhere than Linux: try the lock Derby takes, and let go at once.

    Derby (Java's `FileChannel.tryLock`) takes an fcntl record lock; `filelock.FileLock` takes an
    flock, a separate lock that never conflicts with it, so it would call a booted Derby free.
    """
    # Imported here on purpose: fcntl exists on POSIX systems only, and this module is imported by
    # every process that starts Spark (session.py); only this check, off Linux, needs it.
    import fcntl  # deliberately lazy, see above

    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases the lock, had we got it
    return False


def _holder(pid: int) -> MetastoreHolder:
    """The JVM that holds the lock, described by what the user started: PySpark's JVM by its parent."""
    command = _command(pid)
    if command and _CONNECT_SERVER in " ".join(command):
        return MetastoreHolder(pid, None, connect_server=True)
    if command and _SPARK_SUBMIT in command:
        parent = _parent(pid)
        parent_command = _command(parent) if parent else None
        if parent and parent_command:
            return MetastoreHolder(parent, _short(parent_command))
    return MetastoreHolder(pid, _short(command) if command else None)


def _command(pid: int) -> list[str] | None:
    try:
        return psutil.Process(pid).cmdline() or None
    except psutil.Error:
        return None


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid() or None
    except psutil.Error:
        return None


def _short(command: list[str]) -> str:
    """`/venv/bin/python /venv/bin/mesh plan dev` -> `mesh plan dev`."""
    args = list(command)
    if len(args) > 1 and Path(args[0]).name.startswith("python") and not args[1].startswith("-"):
        args = args[1:]
    args[0] = Path(args[0]).name
    text = " ".join(" ".join(args).split())  # one line, whatever the arguments hold
    return text if len(text) <= _MAX_COMMAND else text[: _MAX_COMMAND - 3] + "..."
