"""Issue 19, point 8 (first half), on real SQLite and Postgres: an approval counts at apply time only
if config.yaml's rules as they are then still allow it. An approver removed from
`protected_environments.<env>.approvers` after approving, or a self-approval once
`allow_self_approval` is off, no longer counts: the apply is refused, naming the approver and what
to do, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.core.plan.review import PlanStatus, ProtectionError
from tests.execution.fake_engine import FakeEngine
from tests.state.test_plan_reviews import PROTECTED, WHEN, as_user, context, project


def _approved_by(tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch, approver: str,
                 config: str = PROTECTED) -> tuple[Path, str]:
    root = project(tmp_path, config)
    as_user(monkeypatch, "alice@example.com")
    ctx = context(root, state_url)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(plan)
    as_user(monkeypatch, approver)
    ctx.decide(plan.plan_id, "approve")
    ctx.close()
    return root, plan.plan_id


def _refused_and_nothing_written(root: Path, state_url: str, plan_id: str, message: str) -> None:
    engine = FakeEngine()
    ctx = context(root, state_url, engine)
    events = ctx.reviews.records.find(plan_id).events
    with pytest.raises(ProtectionError) as refused:
        ctx.reviews.apply_recorded(plan_id)
    assert str(refused.value) == message
    record = ctx.reviews.records.find(plan_id)
    assert record.status == PlanStatus.APPROVED and record.events == events
    assert ctx.state.environments.get_environment("prod") is None and engine.calls == []
    ctx.close()


def test_an_approval_by_someone_no_longer_an_approver_does_not_count(tmp_path, state_url, monkeypatch):
    root, plan_id = _approved_by(tmp_path, state_url, monkeypatch, "bob@example.com")
    (root / "config.yaml").write_text(PROTECTED.replace("bob@example.com", "carol@example.com"))
    as_user(monkeypatch, "alice@example.com")
    _refused_and_nothing_written(root, state_url, plan_id, (
        f"Plan {plan_id} was not applied: its approval no longer counts (bob@example.com is no longer one of its "
        "approvers in protected_environments.prod of config.yaml, whose approvers are alice@example.com, "
        "carol@example.com). Make a new plan for one of them to approve, and cancel this one "
        f"(`mesh plans cancel {plan_id[:8]}`)"))

    # Listed again, the approval counts again: nothing was spent by the refusal.
    (root / "config.yaml").write_text(PROTECTED)
    assert context(root, state_url).reviews.apply_recorded(plan_id).status == PlanStatus.COMPLETED


def test_a_self_approval_does_not_count_once_self_approval_is_turned_off(tmp_path, state_url, monkeypatch):
    allowing = PROTECTED + "    allow_self_approval: true\n"
    root, plan_id = _approved_by(tmp_path, state_url, monkeypatch, "alice@example.com", allowing)
    (root / "config.yaml").write_text(PROTECTED)
    _refused_and_nothing_written(root, state_url, plan_id, (
        f"Plan {plan_id} was not applied: its approval no longer counts (alice@example.com made the plan and "
        "self-approval is no longer allowed in protected_environments.prod of config.yaml, whose approvers are "
        "alice@example.com, bob@example.com). Make a new plan for one of them to approve, and cancel this one "
        f"(`mesh plans cancel {plan_id[:8]}`)"))


def test_a_failed_plan_retried_after_its_approver_left_is_refused(tmp_path, state_url, monkeypatch):
    """A failed plan may be applied again on its old approval: only while that approval counts."""
    from tests.state.test_plan_reviews import FailingOnce

    root, plan_id = _approved_by(tmp_path, state_url, monkeypatch, "bob@example.com")
    with pytest.raises(Exception, match="executor lost"):
        context(root, state_url, FailingOnce()).reviews.apply_recorded(plan_id)
    (root / "config.yaml").write_text(PROTECTED.replace("bob@example.com", "carol@example.com"))
    ctx = context(root, state_url)
    with pytest.raises(ProtectionError, match="bob@example.com is no longer one of its approvers"):
        ctx.reviews.apply_recorded(plan_id)
    assert ctx.reviews.records.find(plan_id).status == PlanStatus.FAILED and ctx.state.environments.get_environment("prod") is None
