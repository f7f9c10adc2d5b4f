"""Issue 19, point 6, on real SQLite and Postgres: an approved plan whose apply was killed (kill -9
of its process group while it moved prod's views) used to stay `running` forever, refused by both
`mesh plans apply` and `mesh plans cancel`. Its record can now be resumed or cancelled once its
process is gone (the environment's lock is free or its holder dead), and is refused, naming the
process, while it still runs.

The apply runs in a real process of its own, on the in-memory engine, which blocks when it creates
a view: the kill lands after the environment was recorded and before it was finalized, every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.plan.review import PlanStatus, ProtectionError
from tests.execution.fake_engine import FakeEngine
from tests.state.test_plan_reviews import WHEN, as_user, context, project

REPO = Path(__file__).resolve().parents[2]
STUCK_APPLY = """
import sys, time
sys.path.insert(0, {repo!r})
from mesh_dagster.context import Context
from tests.execution.fake_engine import FakeEngine

class StuckInViews(FakeEngine):
    def create_view(self, *args, **kwargs):
        print("moving views", flush=True)
        time.sleep(600)

Context({root!r}, state_url={url!r}, engine=StuckInViews()).reviews.apply_recorded({plan_id!r})
"""


def _approved(ctx: Context, root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A plan of the current project for prod, made by alice and approved by bob."""
    as_user(monkeypatch, "alice@example.com")
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(plan)
    as_user(monkeypatch, "bob@example.com")
    ctx.decide(plan.plan_id, "approve")
    return plan.plan_id


def _start_stuck_apply(root: Path, state_url: str, plan_id: str) -> subprocess.Popen:
    """`apply_recorded` in a process of its own, as bob, stopped while it moves the views."""
    script = textwrap.dedent(STUCK_APPLY).format(repo=str(REPO), root=str(root), url=state_url, plan_id=plan_id)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "MESH_USER": "bob@example.com"})
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "moving views":
        proc.kill()
        raise AssertionError(f"the apply did not reach its views: {line}{proc.communicate()[1]}")
    return proc


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def prod_with_killed_apply(tmp_path, state_url, monkeypatch):
    """Prod on an applied plan (`served`), and a second approved plan (`killed`) whose apply was
    killed half-way through its views; yields (root, ctx, served, killed, pid of the dead apply)."""
    root = project(tmp_path)
    ctx = context(root, state_url)
    served = _approved(ctx, root, monkeypatch)
    ctx.reviews.apply_recorded(served)
    (root / "models" / "b.sql").write_text("MODEL (name s.b, kind FULL);\nSELECT id, 2 AS x FROM s.a\n")
    ctx = context(root, state_url)
    killed = _approved(ctx, root, monkeypatch)
    proc = _start_stuck_apply(root, state_url, killed)
    try:
        # While it runs, neither resuming nor cancelling it is allowed: it is named.
        for attempt, what in ((lambda: ctx.reviews.apply_recorded(killed), "applied"),
                              (lambda: ctx.decide(killed, "cancel"), "cancelled")):
            with pytest.raises(ProtectionError) as refused:
                attempt()
            assert f"Plan {killed} is running and cannot be {what}: mesh (pid {proc.pid} by " in str(refused.value)
            assert "is applying to 'prod' since" in str(refused.value)
        assert ctx.reviews.records.find(killed).status == PlanStatus.RUNNING
    finally:
        _kill(proc)
    env = ctx.state.environments.get_environment("prod")
    assert (env.plan_id, env.finalized_ts) == (killed, None)  # recorded, views half-moved, never finalized
    assert ctx.reviews.records.find(killed).status == PlanStatus.RUNNING  # and nobody left to say otherwise
    yield root, ctx, served, killed, proc.pid
    ctx.close()


def test_a_killed_apply_is_resumed_by_applying_its_record_again(prod_with_killed_apply):
    _, ctx, served, killed, _ = prod_with_killed_apply
    assert ctx.state.environments.served_environment("prod").plan_id == served  # what `mesh run` evaluates meanwhile

    done = ctx.reviews.apply_recorded(killed[:8])
    assert done.status == PlanStatus.COMPLETED
    assert [(e.action, e.status.value) for e in done.events][-3:] == [
        ("start", "running"), ("resume", "running"), ("complete", "completed")]
    assert done.events[-2].note == "its earlier apply is gone (killed): resumed"
    env = ctx.state.environments.get_environment("prod")
    assert (env.plan_id, env.previous_plan_id) == (killed, served) and env.finalized_ts is not None
    assert ctx.state.environments.replaced_environment("prod") is None


def test_a_killed_apply_is_cancelled_and_prod_returns_to_the_plan_it_served(prod_with_killed_apply):
    root, ctx, served, killed, _ = prod_with_killed_apply
    assert ctx.decide(killed, "cancel", "killed by the CI timeout").status == PlanStatus.CANCELLED
    env = ctx.state.environments.get_environment("prod")
    assert env.plan_id == served and env.finalized_ts is None  # its views are re-created by the next apply
    assert ctx.state.environments.served_environment("prod").plan_id == served
    assert ctx.state.environments.replaced_environment("prod").promoted == ["s.a", "s.b"]
    with pytest.raises(ProtectionError, match="is cancelled: it cannot be applied"):
        ctx.reviews.apply_recorded(killed)

    # The next plan is based on the plan prod serves, and its apply settles the views.
    engine = FakeEngine()
    ctx = context(root, ctx.state.url, engine)
    again = ctx.plans.plan("prod", execution_time=WHEN)
    assert again.base_environment.plan_id == served and again.finishes_interrupted_apply
    assert "s.b" in again.directly_modified



def test_the_next_plan_of_the_environment_settles_the_killed_apply_record(prod_with_killed_apply, monkeypatch):
    """Issue 34, point 1: the killed plan's record stayed `running` after a later plan completed."""
    _, ctx, _, killed, _ = prod_with_killed_apply
    later = _approved(ctx, ctx.path, monkeypatch)  # a new plan, based on the killed apply's record

    assert ctx.reviews.apply_recorded(later).status == PlanStatus.COMPLETED
    settled = ctx.reviews.records.find(killed)
    assert settled.status == PlanStatus.FAILED
    assert (settled.events[-1].action, settled.events[-1].actor) == ("fail", "bob@example.com")
    assert settled.events[-1].note == (f"interrupted: its apply ended without an outcome (its process was killed); "
                                       f"plan {later[:8]} ran after it")
    assert ctx.plan_records("prod", statuses=["running"]) == []
