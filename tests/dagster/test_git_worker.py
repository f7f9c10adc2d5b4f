"""The git_plan job, as the git sensor launches it, runs a pushed commit's code in a git worker: a
process of its own (execution/plans/git_worker.py). Real git repositories, real processes (the worker, a
kill -9 of it), real Spark in the worker for the applies, a real webhook server.

- a pushed `macros/*.py` runs in the worker, never in this process (the code location's here), and
  sees no notification credential nor any variable the worker was not given; the plan is still
  recorded and applied (a feature branch's at once, prod's once approved, by `apply_plan_prod`), and
  the notifications go out from this process;
- a worker killed mid-apply fails the run in one line and its plan is settled as failed, nothing
  served; one killed or over `git.plan_timeout_s` mid-plan, or whose run is stopped, leaves a failed
  plan saying so; one that crashes leaves its detail in a log file the run's one line names;
- (to extend once the statement scope and the project-file checks are merged) a pushed `before_all`
  naming prod's view, and a seed linking outside the project, are failed plans naming them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from failures import failure_text
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.state.test_git_plans import PROJECT_CONFIG, WATCHER_CONFIG, Repo
from tests.state.test_plan_reviews import Hook

HOOK_ENV = "MESH_TEST_GIT_HOOK"
SECRET = "s3cret-hook-password"
UNRELATED = ("MESH_TEST_UNRELATED", "unrelated-token-value")
STAND_IN_URL = "https://withheld.invalid"
NOTIFIED = f"notification_targets:\n  - url: \"{{{{ env_var('{HOOK_ENV}') }}}}\"\n"
MODEL = "MODEL (name s.e, kind FULL);\nSELECT @answer() AS x\n"
EVIL = """
import json
import os
from pathlib import Path

from mesh_dagster import macro

Path({out!r}).write_text(json.dumps({{"pid": os.getpid(), "env": dict(os.environ)}}))


@macro()
def answer(evaluator):
    return 42
"""
NAPPER = """
import os
import time
from pathlib import Path

Path({out!r}).write_text(str(os.getpid()))
time.sleep(600)
"""
SLEEPER = """
import os
import time
from pathlib import Path

from mesh_dagster import ExecutionContext, model


@model("s.slow", columns={{"x": "int"}})
def execute(context: ExecutionContext, start, end, execution_time):
    Path({out!r}).write_text(str(os.getpid()))
    time.sleep(600)
"""
CRASH = "class Boom(BaseException):\n    pass\n\n\nraise Boom('pushed code ended its process')\n"


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch):
    """The code location's notification target, its URL (with a password) in an environment variable,
    beside a variable that has nothing to do with the worker."""
    server = Hook()
    monkeypatch.setenv(HOOK_ENV, server.url.replace("://", f"://hook:{SECRET}@"))
    monkeypatch.setenv(*UNRELATED)
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    monkeypatch.setenv("MESH_SPARK_SERVER", "0")  # the worker's Spark: embedded, in its own session
    yield server
    server.close()


class Location:
    """The code location watching the bare repository, and the Dagster instance its runs go to."""

    def __init__(self, root: Path, extra_git: str = "") -> None:
        self.root = write_project(root / "location", {}, WATCHER_CONFIG + extra_git + NOTIFIED)
        (root / "home").mkdir()
        self.instance = dg.DagsterInstance.local_temp(str(root / "home"))
        self.defs = definitions(self.root, "prod", shared_spark=False)

    def git_plan(self, branch: str, sha: str) -> dg.ExecuteInProcessResult:
        """What the git sensor launches for a push."""
        return self._run("git_plan", "git_plan_commit", {"branch": branch, "sha": sha})

    def apply_plan(self, plan_id: str) -> dg.ExecuteInProcessResult:
        """What an approver launches for a recorded prod plan."""
        return self._run("apply_plan_prod", "apply_plan_prod_record", {"plan_id": plan_id})

    def _run(self, job: str, op: str, config: dict) -> dg.ExecuteInProcessResult:
        return self.defs.resolve_job_def(job).execute_in_process(
            run_config={"ops": {op: {"config": config}}}, instance=self.instance, raise_on_error=False)

    def records(self):
        ctx = Context(self.root)
        try:
            return ctx.plan_records()
        finally:
            ctx.close()

    def environment(self, name: str):
        ctx = Context(self.root)
        try:
            return ctx.state.environments.get_environment(name)
        finally:
            ctx.close()


def push(repo: Repo, branch: str, files: dict[str, str]) -> str:
    sha = repo.commit({"config.yaml": PROJECT_CONFIG + NOTIFIED, **files}, branch)
    repo.push(branch)
    return sha


def in_background(location: Location, branch: str, sha: str) -> tuple[threading.Thread, dict]:
    """The git_plan run in a thread (as a run worker would be), so this test can kill its worker."""
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(run=location.git_plan(branch, sha)), daemon=True)
    thread.start()
    return thread, done


def wait_for(found: Callable[[], object], what: str, timeout_s: float = 600) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout_s}s")


def written_pid(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.strip() else None


def gone(pid: int) -> bool:
    """Neither the worker nor anything of its session (an embedded Spark's JVM) still runs."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def one_line(run: dg.ExecuteInProcessResult) -> str:
    """The failed run's one line: its step's cause (mesh.JobFailed), with no stack trace."""
    assert not run.success
    (line,) = [m.removeprefix("mesh.JobFailed: ") for m in failure_text(run).splitlines()
               if m.startswith("mesh.JobFailed: ")]
    return line


def test_pushed_code_runs_in_a_worker_that_holds_no_secret(tmp_path: Path, hook: Hook,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "evil.json"
    repo = Repo(tmp_path)
    sha = push(repo, "feature/evil", {"macros/evil.py": EVIL.format(out=str(out)), "models/e.sql": MODEL})
    repo.push("main")
    location = Location(tmp_path)

    def seen() -> dict:
        """What the pushed macro's top level saw, the last time it ran."""
        found = json.loads(out.read_text())
        out.unlink()
        assert found["pid"] != os.getpid()
        assert SECRET not in json.dumps(found) and UNRELATED[0] not in found["env"]
        assert found["env"][HOOK_ENV] == STAND_IN_URL  # its config.yaml reads the variable, and still loads
        return found

    run = location.git_plan("feature/evil", sha)  # planned and applied: the worker's Spark serves it
    assert run.success, failure_text(run)
    (record,) = location.records()
    assert (record.environment, record.status.value, record.git_commit) == ("feature_evil", "completed", sha)
    env = location.environment("feature_evil")
    assert env is not None and env.plan_id == record.plan_id and env.finalized_ts is not None
    assert "PATH" in seen()["env"]

    assert location.git_plan("main", sha).success  # prod's plan waits for a second person
    (pending,) = [r for r in location.records() if r.environment == "prod"]
    seen()
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    Context(location.root).decide(pending.plan_id, "approve")
    applied = location.apply_plan(pending.plan_id)
    assert applied.success, failure_text(applied)  # the approved plan too is applied from the commit in a worker
    seen()
    assert location.environment("prod").plan_id == pending.plan_id
    assert [(b["event"], b["actor"]) for b in hook.received] == [
        ("plan_applied", "alice@example.com"), ("plan_pending", "alice@example.com"),
        ("plan_approved", "bob@example.com"), ("plan_applied", "bob@example.com")]  # all sent from here


def test_a_worker_killed_mid_apply_fails_the_run_in_one_line_and_settles_the_plan(tmp_path: Path, hook: Hook) -> None:
    out = tmp_path / "slow.pid"
    repo = Repo(tmp_path)
    sha = push(repo, "feature/slow", {"models/slow.py": SLEEPER.format(out=str(out))})
    location = Location(tmp_path)

    thread, done = in_background(location, "feature/slow", sha)
    pid = wait_for(lambda: written_pid(out), "Python model evaluating in the worker")
    assert pid != os.getpid()
    assert [r.status.value for r in location.records()] == ["running"]
    os.kill(pid, signal.SIGKILL)
    thread.join(120)

    line = one_line(done["run"])
    assert re.fullmatch(r"the git worker was killed by SIGKILL; its output: \S+\.log", line), line
    (record,) = location.records()
    assert (record.status.value, record.events[-1].action) == ("failed", "fail")  # settled, not left running
    assert record.events[-1].note == line
    env = location.environment("feature_slow")
    assert env is None or env.finalized_ts is None  # nothing served
    assert [b["event"] for b in hook.received] == ["plan_failed"]
    wait_for(lambda: gone(pid), "end of the worker's JVM", 60)


@pytest.mark.parametrize("ending", ["killed", "over its time"])
def test_a_worker_ended_mid_plan_leaves_a_failed_plan(tmp_path: Path, hook: Hook, ending: str) -> None:
    out = tmp_path / "nap.pid"
    repo = Repo(tmp_path)
    sha = push(repo, "main", {"macros/nap.py": NAPPER.format(out=str(out)), "models/e.sql": MODEL})
    location = Location(tmp_path, "  plan_timeout_s: 20\n" if ending == "over its time" else "")

    if ending == "killed":
        thread, done = in_background(location, "main", sha)
        pid = wait_for(lambda: written_pid(out), "pushed macro napping in the worker")
        assert pid != os.getpid()  # never this process (3fabff4 napped here)
        os.kill(pid, signal.SIGKILL)
        thread.join(60)
        run, how = done["run"], "was killed by SIGKILL"
    else:
        run, how = location.git_plan("main", sha), r"took longer than git.plan_timeout_s \(20s\) and was stopped"
        pid = written_pid(out)
    assert pid is not None and pid != os.getpid() and gone(pid)
    line = one_line(run)
    assert re.fullmatch(rf"commit {sha[:8]}: the git worker {how}; its output: \S+\.log", line), line
    (record,) = location.records()  # the worker recorded nothing: this process did, as failed
    assert (record.environment, record.status.value, record.events[-1].note) == (
        "prod", "failed", line)
    assert [b["event"] for b in hook.received] == ["plan_failed"]


class Stopped(BaseException):
    """What Dagster raises in a run it terminates."""


def test_a_stopped_git_plan_run_stops_its_worker_and_settles_the_plan(tmp_path: Path, hook: Hook) -> None:
    out = tmp_path / "nap.pid"
    repo = Repo(tmp_path)
    sha = push(repo, "main", {"macros/nap.py": NAPPER.format(out=str(out)), "models/e.sql": MODEL})
    location = Location(tmp_path)

    def stop(*_: object) -> None:  # once the pushed macro naps in the worker
        if written_pid(out) is None:
            signal.alarm(1)
            return
        raise Stopped()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(1)
    ctx = Context(location.root)
    try:
        with pytest.raises(Stopped):
            ctx.reviews.plan_git_commit("main", sha)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        ctx.close()
    pid = written_pid(out)
    assert pid is not None and pid != os.getpid() and gone(pid)
    (record,) = location.records()
    assert (record.status.value, record.events[-1].note) == ("failed", f"commit {sha[:8]}: the git_plan run was stopped")
    assert [b["event"] for b in hook.received] == ["plan_failed"]


def test_a_crashed_worker_is_one_line_naming_the_log_of_its_output(tmp_path: Path, hook: Hook) -> None:
    repo = Repo(tmp_path)
    sha = push(repo, "main", {"macros/crash.py": CRASH, "models/e.sql": MODEL})
    location = Location(tmp_path)

    line = one_line(location.git_plan("main", sha))
    match = re.fullmatch(rf"commit {sha[:8]}: the git worker ended with exit code 1; its output: (\S+\.log)", line)
    assert match, line
    detail = Path(match.group(1)).read_text()
    assert "Boom: pushed code ended its process" in detail and "macros/crash.py" in detail  # the traceback
    (record,) = location.records()
    assert (record.status.value, record.events[-1].note) == ("failed", line)


# -- refused pushes: these pass once the statement scope check (statements) and the project-file checks
# (hardening) are merged; extend them there.
def test_a_pushed_before_all_naming_prods_view_is_refused_at_plan_time(tmp_path: Path, hook: Hook) -> None:
    repo = Repo(tmp_path)
    sha = repo.commit({"config.yaml": PROJECT_CONFIG + NOTIFIED + "before_all:\n  - DROP VIEW IF EXISTS s.e\n",
                       "models/e.sql": "MODEL (name s.e, kind FULL);\nSELECT 1 AS x\n"}, "statements")
    repo.push("feature/drop")
    location = Location(tmp_path)

    line = one_line(location.git_plan("feature/drop", sha))
    assert "before_all.0" in line, line
    (record,) = location.records()
    assert (record.environment, record.status.value) == ("feature_drop", "failed")
    assert "before_all.0" in (record.events[-1].note or "")
    assert location.environment("feature_drop") is None


def test_a_pushed_seed_linking_outside_the_project_is_refused(tmp_path: Path, hook: Hook) -> None:
    """A link out of the commit's files is refused as they are exported; one out of the project but
    inside the repository (`git.project_path`) as the project loads."""
    repo = Repo(tmp_path)
    location = Location(tmp_path, "  project_path: proj\n")
    seed = "MODEL (name s.x, kind SEED (path '../seeds/x.csv'));\n"
    for target in ("/etc/hostname", "../../outside.csv"):
        (repo.clone / "proj" / "seeds").mkdir(parents=True, exist_ok=True)
        link = repo.clone / "proj" / "seeds" / "x.csv"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        sha = repo.commit({"outside.csv": "id\n1\n", "proj/config.yaml": PROJECT_CONFIG + NOTIFIED,
                           "proj/models/x.sql": seed}, f"link to {target}")
        repo.push("feature/seed")

        line = one_line(location.git_plan("feature/seed", sha))
        assert "seeds/x.csv" in line and "id\n1" not in line, line
        record = location.records()[0]
        assert (record.git_commit, record.status.value) == (sha, "failed")
        assert location.environment("feature_seed") is None
