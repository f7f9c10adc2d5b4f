"""Issue 19, point 6, from the command line on real Spark: `mesh plans apply ID` of an approved plan
killed mid-backfill (kill -9 of its process group: an OOM, a CI timeout) left the record `running`
forever, refused by `mesh plans apply` and `mesh plans cancel` alike. While the apply runs both
still refuse it, naming its process; once it is gone the record is resumed (only the missing
intervals are computed) or cancelled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.plan.review import PlanStatus
from mesh_dagster.engine.kill_points import PAUSE_AT_ENV
from mesh_dagster.state import StateStore
from tests.cli.test_interrupted_backfill import DAILY, DAYS, EVENTS, ROWS_PER_DAY, TOTAL, _counts, _csv, _recorded

pytestmark = pytest.mark.slow

PROTECTED = """model_defaults:
  dialect: spark
  start: 2020-01-01
protected_environments:
  prod:
    approvers: [alice@example.com, bob@example.com]
"""


def _as(monkeypatch: pytest.MonkeyPatch, who: str) -> None:
    monkeypatch.setenv("MESH_USER", who)


def _approved(tmp_path: Path, mesh, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    root = write_project(tmp_path / "p", {"models/events.sql": EVENTS, "models/daily.sql": DAILY,
                                          "models/total.sql": TOTAL, "seeds/events.csv": _csv()}, PROTECTED)
    _as(monkeypatch, "alice@example.com")
    out = mesh(root, "plan", "--auto-apply", "--skip-tests", "--no-diff").stdout
    assert "recorded for review" in out
    with StateStore(f"sqlite:///{root / '.mesh' / 'state.db'}") as store:
        (record,) = store.plans.list_plan_records()
    _as(monkeypatch, "bob@example.com")
    mesh(root, "plans", "approve", record.plan_id[:8])
    return root, record.plan_id


def _status(root: Path, plan_id: str) -> PlanStatus:
    with StateStore(f"sqlite:///{root / '.mesh' / 'state.db'}") as store:
        record = store.plans.get_plan_record(plan_id)
    assert record is not None
    return record.status


def _apply_killed_mid_backfill(root: Path, plan_id: str, mesh) -> None:
    """`mesh plans apply` in its own process group; while it backfills, a second `mesh plans
    apply` and a `mesh plans cancel` are refused naming it; then the group is killed with -9. The
    apply stops itself once its third interval is recorded (MESH_TEST_PAUSE_AT), alive and
    mid-backfill however fast its writes and however slow the refused commands."""
    proc = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(root), "plans", "apply",
                             plan_id[:8]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, PAUSE_AT_ENV: "recorded@daily:3"})
    deadline = time.monotonic() + 300
    try:
        while _recorded(root, "s.daily") < 3:
            assert proc.poll() is None, "the apply finished before it could be interrupted"
            assert time.monotonic() < deadline, "the backfill never started"
            time.sleep(0.1)
        for command, what in (("apply", "applied"), ("cancel", "cancelled")):
            refused = mesh(root, "plans", command, plan_id[:8], check=False)
            assert refused.returncode == 1
            shown = " ".join((refused.stdout + refused.stderr).split())
            assert f"Plan {plan_id} is running and cannot be {what}: mesh (pid {proc.pid} by " in shown
            assert "Traceback" not in shown
        assert proc.poll() is None, "the apply ended while it was being refused: nothing was killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the Python process and its JVM
        proc.wait()
    assert 3 <= _recorded(root, "s.daily") < DAYS
    assert _status(root, plan_id) == PlanStatus.RUNNING


def test_a_killed_apply_is_resumed_by_mesh_plans_apply(tmp_path, mesh, monkeypatch):
    root, plan_id = _approved(tmp_path, mesh, monkeypatch)
    _apply_killed_mid_backfill(root, plan_id, mesh)

    out = mesh(root, "plans", "apply", plan_id[:8]).stdout
    assert f"Plan {plan_id[:8]} applied to 'prod' (resumed: its earlier apply was killed)." in out
    batches = [line for line in out.splitlines() if line.startswith("[") and " s.daily " in line]
    assert 0 < len(batches) <= DAYS - 3  # only what was missing
    assert _status(root, plan_id) == PlanStatus.COMPLETED
    n, amount = DAYS * ROWS_PER_DAY, DAYS * sum(range(1, ROWS_PER_DAY + 1))
    assert _counts(mesh, root) == [str(n), str(DAYS), str(n), str(amount), str(n), str(amount)]


def test_a_killed_apply_is_cancelled_by_mesh_plans_cancel(tmp_path, mesh, monkeypatch):
    root, plan_id = _approved(tmp_path, mesh, monkeypatch)
    _apply_killed_mid_backfill(root, plan_id, mesh)

    out = mesh(root, "plans", "cancel", plan_id[:8], "-m", "killed by the CI timeout").stdout
    assert f"Plan {plan_id[:8]} cancelled by bob@example.com." in out
    assert _status(root, plan_id) == PlanStatus.CANCELLED
    again = mesh(root, "plans", "apply", plan_id[:8], check=False)
    assert again.returncode == 1 and "is cancelled: it cannot be applied" in again.stdout + again.stderr
    with StateStore(f"sqlite:///{root / '.mesh' / 'state.db'}") as store:
        assert store.environments.get_environment("prod") is None  # killed before prod was recorded: nothing to take back
