"""The git worker: the process of its own in which a pushed commit is loaded, planned and applied.

Loading a project runs its Python (`macros/*.py`, Python models, signals, a `config.py`) and applying
it evaluates that code: a push is code nobody has reviewed. The process that watches the repository
(Dagster's code location and its runs) holds what such code must not get through the tool:
notification credentials, the settings of gateways and environments it does not plan, every other
variable of its environment. So `plan_git_commit` (execution/plans/reviews.py) hands the commit to a
worker, `mesh git-worker` (cli/git_worker.py), and reads what it came to from the state store.

The worker is told what to do on stdin (`GitPlanRequest`, the state store URL included: a command
line is visible to every user of the machine). Its environment holds `WORKER_ENV`, the locale and
the names `git.worker_env` lists, nothing else. It reports progress (the `ApplyListener` calls) as
JSON lines on the stdout it keeps for that alone; everything else it writes, pushed code's output
and its own one-line error included, goes to a log file. Its word is never taken for an outcome:
pushed code can print anything, so the state store says what happened.

It is a separate process, not a sandbox: it runs as the same user, so it reads what that user may
(the files of the project, the state store it must write, the Spark it must use).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any, NamedTuple

from pydantic import BaseModel, Field

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.execution.events import ApplyListener

# What the worker gets of this process's environment (with every `LC_*`): the user, the locale,
# where programs are, how Java and Spark are found and started (their launch options and the JVM
# class archive: engine/class_archive.py), and whether runs share the project's Spark Connect
# server. Credentials it needs come in its request (the state store URL) or through
# `git.worker_env`, named one by one.
WORKER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "XDG_CACHE_HOME", "PYTHONPATH",
              "JAVA_HOME", "SPARK_HOME", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_PYTHON", "SPARK_SUBMIT_OPTS",
              "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS", "MESH_JVM_ARCHIVE", "MESH_JVM_CACHE", "MESH_SPARK_SERVER")
# What a left-out variable holding a whole notification URL reads as in the worker (`.invalid` never
# resolves): see `worker_environment`.
STAND_IN_URL = "https://withheld.invalid"
COMMAND = "git-worker"  # the hidden `mesh` command that is the worker (cli/git_worker.py)
CALLS = frozenset(name for name in vars(ApplyListener) if not name.startswith("_"))  # what the channel carries


class RecordedApply(BaseModel):
    """Apply the recorded plan `plan_id` of the commit as `actor`, or supersede it as `outdated` says."""

    plan_id: str
    actor: str
    outdated: str | None = None


class GitPlanRequest(BaseModel):
    """What one worker is asked: plan commit `sha` of `branch` into `environment` for `author` — or,
    with `apply`, apply a recorded plan of it — as the watching project (`project_dir`, its `.mesh/`
    in `home`) under `rules`: its config.yaml's git, protection and plan settings, without
    notification targets or gateways."""

    project_dir: Path
    home: Path
    gateway: str | None = None
    state_url: str = Field(repr=False)  # may hold a password
    rules: ProjectConfig
    branch: str
    sha: str
    environment: str
    author: str
    apply: RecordedApply | None = None


class WorkerVariables(NamedTuple):
    """The names a git worker's environment is made of: those it gets with this process's values
    (`passed`, those this process has), and those that read as `STAND_IN_URL` (`withheld`). Names
    only: `mesh ui` writes them into the script that starts its location of pushed environments
    (dagster/ui/pushed_python.py), which must hold no value."""

    passed: frozenset[str]
    withheld: frozenset[str]


def worker_variables(extra: Collection[str], notification_urls: Collection[str]) -> WorkerVariables:
    """`WORKER_ENV`, this process's `LC_*` and `extra` (`git.worker_env`) are passed. A variable left
    out that holds a whole notification URL is withheld, there as `STAND_IN_URL`: the commit's own
    config.yaml, which the worker loads, may read it (`{{ env_var('HOOK') }}`) and must still load;
    the worker never notifies."""
    passed = frozenset(WORKER_ENV) | frozenset(extra) | {name for name in os.environ if name.startswith("LC_")}
    urls = {url.strip() for url in notification_urls}
    withheld = frozenset(name for name, value in os.environ.items() if name not in passed and value.strip() in urls)
    return WorkerVariables(passed, withheld)


def worker_environment(extra: Collection[str], notification_urls: Collection[str]) -> dict[str, str]:
    """The worker's environment (`worker_variables`), with this process's values."""
    names = worker_variables(extra, notification_urls)
    env = {name: value for name, value in os.environ.items() if name in names.passed}
    return env | dict.fromkeys(names.withheld, STAND_IN_URL)


class WorkerChannel(ApplyListener):
    """The worker's side of the channel: each listener call, one JSON line on `out`."""

    def __init__(self, out: IO[str]):
        self._out = out

    def send(self, call: str, args: tuple[Any, ...]) -> None:
        self._out.write(json.dumps({"call": call, "args": list(args)}) + "\n")
        self._out.flush()


for _call in CALLS:
    setattr(WorkerChannel, _call, lambda self, *args, _call=_call: self.send(_call, args))


def open_channel() -> WorkerChannel:
    """In the worker: its stdout becomes the channel, and what it writes to stdout from now on
    (`print` in pushed code) goes to stderr, the worker's log file."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return WorkerChannel(out)


def run_worker(request: GitPlanRequest, listener: ApplyListener | None, env: dict[str, str],
               timeout_s: float | None, log: Path) -> str | None:
    """Run the worker for `request`, its progress replayed on `listener`, and stop it (its whole
    process group) after `timeout_s`, or when this process is interrupted. None once it ended
    well; else the one line saying how it ended — its output, the detail, is kept in `log`."""
    command = [sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(request.project_dir), COMMAND]
    try:
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with log.open("wb") as output:
            worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=output,
                                      env=env, cwd=request.home, start_new_session=True)
    except OSError as e:
        return f"the git worker could not start: {e.strerror or e} ({e.filename or command[0]})"
    try:
        _send(worker, request)
        in_time = _follow(worker, listener, timeout_s)
    finally:
        if worker.poll() is None:
            _stop(worker)
    if worker.returncode == 0 and in_time:
        log.unlink(missing_ok=True)
        return None
    return _ending(worker.returncode, in_time, timeout_s, log)


def _send(worker: subprocess.Popen, request: GitPlanRequest) -> None:
    assert worker.stdin is not None
    try:
        worker.stdin.write(request.model_dump_json().encode())
        worker.stdin.close()
    except BrokenPipeError:  # it ended before reading: how is its exit's to say
        pass


def _follow(worker: subprocess.Popen, listener: ApplyListener | None, timeout_s: float | None) -> bool:
    """Replay the worker's channel until it ends; False when `timeout_s` ran out first. A reader
    thread feeds a queue, so a worker that writes nothing (or half a line) cannot outlast it."""
    lines: queue.Queue[bytes | None] = queue.Queue()
    threading.Thread(target=_read, args=(worker.stdout, lines), name="mesh-git-worker", daemon=True).start()
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            break
        if listener is not None:
            _replay(line, listener)
    try:
        worker.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _read(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    try:
        for line in stream:
            lines.put(line)
    finally:
        lines.put(None)


def _replay(line: bytes, listener: ApplyListener) -> None:
    """One line of the channel, as the listener call it stands for; anything else is logged as
    text (pushed code may write to the channel too: never trusted to be well formed)."""
    try:
        message = json.loads(line)
        call, args = message["call"], message["args"]
        if call in CALLS and isinstance(args, list):
            getattr(listener, call)(*args)
            return
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    listener.log(f"git worker: {line.decode(errors='replace').rstrip()}")


def _stop(worker: subprocess.Popen) -> None:
    """Kill the worker and what it started in its session (an embedded Spark's JVM), and reap it:
    a lock it held is free at once for whoever settles its plan (execution/locking.py)."""
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.wait()


def _ending(code: int | None, in_time: bool, timeout_s: float | None, log: Path) -> str:
    """How the worker ended, in one line: its own one-line error when it printed one, else what
    became of it, naming the log of its output."""
    if not in_time:
        return f"the git worker took longer than git.plan_timeout_s ({timeout_s:g}s) and was stopped; its output: {log}"
    error = _error_line(log)
    if error is not None:
        return error
    if code is not None and code < 0:
        return f"the git worker was killed by {signal.Signals(-code).name}; its output: {log}"
    return f"the git worker ended with exit code {code}; its output: {log}"


def _error_line(log: Path) -> str | None:
    """The one line a failed `mesh` command ends with (it names its own log file), if the worker
    printed one."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    errors = [line.removeprefix("Error: ") for line in lines if line.startswith("Error: ")]
    return errors[-1] if errors else None
