"""`mesh ui`'s supervisor: runs `dagster dev`, and stops everything it started when told to.

`dagster dev` alone does not. On Ctrl-C it asks its webserver and daemon to stop and exits, but the
code servers and the run workers they spawned (each with `tail` and orphan-watcher helpers) live
on: a run busy in Spark kept all of them alive for minutes, and a SIGTERM sent to `dagster dev`
afterwards reached nobody. So `mesh ui` runs this module (`python -m
mesh_dagster.dagster.ui.supervisor WORKSPACE HOST PORT`), which:

1. starts `dagster dev` in a session of its own. Every process Dagster starts, at any depth, keeps
   that session id (none starts a new session), even once its parent died and it was re-parented,
   so the session is the exact list of what must stop. The project's Spark Connect server starts
   itself in a session of its own and survives: the `mesh` CLI shares it.
2. on SIGINT, SIGTERM or SIGHUP: marks the runs in progress CANCELING (Dagster's run worker then
   reports its interruption as a cancellation), interrupts `dagster dev` (which stops its webserver
   and daemon) and sends SIGTERM to the rest of the session: the run workers and code servers.
3. after `GRACE_S` (at once on a second signal), SIGKILLs whatever of the session is left;
4. marks the runs still in progress CANCELED: no process is left that could.

One supervisor per project (a lock in `.mesh/dagster/`): on the default SQLite instance, which is
the project's, the runs in progress when it stops are this supervisor's runs. A Postgres instance
(config.yaml `dagster.storage`) is shared with other people's `mesh ui`s: there only the runs whose
run worker lives in one of this session's code servers are marked (Dagster tags a launched run with
the code server it runs in), so stopping one UI never cancels a teammate's runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import yaml

from mesh_dagster.dagster.ui.lock import UiAlreadyRunning, only_ui

if TYPE_CHECKING:
    from dagster import DagsterInstance

# What needs Dagster itself (compat.py, the watch) is imported once `dagster dev` runs: a second of
# importing before it would be a second more of every `mesh ui` start (benchmarks/bench_ui_start.py).

GRACE_S = 5.0  # for `dagster dev` to stop its services and for runs to end as canceled
KILL_WAIT_S = 3.0  # for the kernel to take down what was SIGKILLed
_POLL_S = 0.2
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_IN_PROGRESS = ("STARTING", "STARTED", "CANCELING")
CANCEL_MESSAGE = "Canceled: `mesh ui` was stopped while this run was in progress."


def main(argv: list[str]) -> int:
    """`mesh ui` execs this with the environment `dagster dev` gets (workspace.dagster_env)."""
    workspace, host, port = Path(argv[0]), argv[1], int(argv[2])
    watches: list = []

    def watch() -> None:  # code locations follow the environments (watch.py), once `dagster dev` runs
        from mesh_dagster.dagster.ui.watch import WorkspaceWatch

        watches.append(WorkspaceWatch(workspace, host, port))
        watches[0].start()

    try:
        with only_ui(workspace.parent):
            try:
                return Supervisor(dagster_dev_args(workspace, host, port), dict(os.environ), workspace.parent).run(
                    started=watch)
            finally:
                if watches:
                    from mesh_dagster.dagster.ui.watch import wait_stopped

                    wait_stopped(watches[0])
    except UiAlreadyRunning as e:
        print(f"Error: {e}", file=sys.stderr, flush=True)
        return 1


def dagster_dev_args(workspace: Path, host: str, port: int) -> list[str]:
    """`dagster dev` itself, as the supervisor starts it."""
    return [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", host, "-p", str(port)]


class Supervisor:
    """`dagster dev` as a child in its own session; `run()` returns once all of that session is gone."""

    def __init__(self, command: list[str], env: dict[str, str], dagster_home: Path):
        self._command = command
        self._env = env
        self._runs = Runs(dagster_home, shared=is_shared_instance(dagster_home))
        self._signals: list[int] = []
        self._wake = threading.Event()

    def run(self, started: Callable[[], None] | None = None) -> int:
        """`started`: called once the child runs (what may take its time without delaying it)."""
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        child = subprocess.Popen(self._command, env=self._env, stdin=subprocess.DEVNULL, start_new_session=True)
        if started is not None:
            started()
        while child.poll() is None and not self._signals:
            self._wake.wait(1.0)
        canceled = self._stop(child)
        if canceled:
            print(f"Marked {canceled} run(s) in progress as canceled.", flush=True)
        return 128 + self._signals[0] if self._signals else child.returncode

    def _on_signal(self, signum: int, _frame) -> None:
        self._signals.append(signum)
        self._wake.set()

    def _stop(self, child: subprocess.Popen) -> int:
        """Steps 2-4 of the module doc; returns how many runs had to be marked canceled by us."""
        session = child.pid
        self._runs.servers = _code_server_sockets(session)  # before they stop: whose runs are ours
        self._runs.mark(self._runs.canceling)
        child.send_signal(signal.SIGINT)  # Popen's own: a no-op once `dagster dev` exited, never another process
        services = {child.pid, *(p.pid for p in _children(child.pid))}  # webserver, daemon: `dagster dev` stops them
        for process in _session_members(session):
            if process.pid not in services:
                _send(process, signal.SIGTERM)
        self._wait_gone(child, session, time.monotonic() + GRACE_S, hurry=True)
        for process in _session_members(session):
            _send(process, signal.SIGKILL)
        self._wait_gone(child, session, time.monotonic() + KILL_WAIT_S, hurry=False)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=KILL_WAIT_S)
        return self._runs.mark(self._runs.canceled)

    def _wait_gone(self, child: subprocess.Popen, session: int, deadline: float, hurry: bool) -> None:
        while time.monotonic() < deadline and not (hurry and len(self._signals) > 1):
            child.poll()  # reaps `dagster dev`: a zombie still counts as a session member
            if not _session_members(session):
                return
            time.sleep(_POLL_S)


class Runs:
    """The project's Dagster runs in progress, through its instance (compat.py: Dagster documents
    none of the instance methods this takes).

    The instance is opened only when needed: opening it alongside `dagster dev` on a new project
    would run two schema migrations of the same SQLite files at once (seen: "alembic_version has
    more than one head").
    """

    def __init__(self, dagster_home: Path, shared: bool = False):
        self._home = dagster_home
        self._shared = shared
        self.servers: set[str] = set()  # sockets of this session's code servers (for a shared instance)
        self._instance: DagsterInstance | None = None

    def mark(self, report) -> int:
        """`report(instance, run)` for every run in progress; how many there were.

        Never raises: a broken instance must not stop the supervisor from stopping the processes.
        """
        try:
            instance = self._get()
            if instance is None:
                return 0
            from mesh_dagster.dagster.compat import runs_with_status

            runs = runs_with_status(instance, _IN_PROGRESS)
            if self._shared:
                runs = [run for run in runs if run_server(run.tags) in self.servers]
            for run in runs:
                report(instance, run)
            return len(runs)
        except Exception as e:  # noqa: BLE001
            first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            print(f"Error: cannot mark the runs in progress in {self._home}: {first}", file=sys.stderr, flush=True)
            return 0

    @staticmethod
    def canceling(instance, run) -> None:
        from mesh_dagster.dagster.compat import report_canceling

        if run.status.value != "CANCELING":
            report_canceling(instance, run, "`mesh ui` is stopping: canceling this run.")

    @staticmethod
    def canceled(instance, run) -> None:
        from mesh_dagster.dagster.compat import report_canceled

        report_canceled(instance, run, CANCEL_MESSAGE)

    def _get(self) -> DagsterInstance | None:
        # no storage yet: no run ever (a shared instance keeps none here, but has runs)
        if self._instance is None and (self._shared or (self._home / "storage").exists()):
            from mesh_dagster.dagster.compat import open_instance

            self._instance = open_instance(self._home)
        return self._instance


def is_shared_instance(dagster_home: Path) -> bool:
    """A dagster.yaml with a Postgres `storage` (see ui.instance_config): other UIs use it too."""
    try:
        config = yaml.safe_load((dagster_home / "dagster.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(config, dict) and isinstance(config.get("storage"), dict) and "postgres" in config["storage"]


def run_server(tags) -> str | None:
    """The socket (or host:port) of the code server a run was launched in, from its tags
    (Dagster's hidden `GRPC_INFO_TAG`)."""
    from mesh_dagster.dagster.compat import run_code_server

    return run_code_server(tags)


def _code_server_sockets(session: int) -> set[str]:
    """The sockets this session's code servers listen on (`dagster api grpc --socket PATH`)."""
    from mesh_dagster.dagster.compat import CODE_SERVER_SOCKET_ARG

    out: set[str] = set()
    for process in _session_members(session):
        try:
            args = process.cmdline()
        except psutil.Error:
            continue
        out |= {args[i + 1] for i, a in enumerate(args[:-1]) if a == CODE_SERVER_SOCKET_ARG}
    return out


# -- processes -----------------------------------------------------------------------------------


def _session_members(session: int) -> list[psutil.Process]:
    """Live (not zombie) processes of a session. psutil has no session id: `os.getsid` asks the kernel."""
    return [process for process in psutil.process_iter() if _sid(process) == session and _live(process)]


def _sid(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except OSError:  # gone since the listing
        return None


def _children(parent: int) -> list[psutil.Process]:
    """Direct, live children: `dagster dev`'s webserver and daemon."""
    try:
        children = psutil.Process(parent).children()
    except psutil.Error:
        return []
    return [child for child in children if _live(child)]


def _live(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _send(process: psutil.Process, sig: int) -> None:
    """psutil refuses (NoSuchProcess) when the pid was reused by another process since it was listed."""
    with contextlib.suppress(psutil.Error):
        process.send_signal(sig)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
