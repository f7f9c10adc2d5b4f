"""Recorded plans, protected environments and approvals, on real SQLite and real Postgres (no Spark:
the in-memory engine stands for it). An approval covers exactly the plan reviewed: a changed project
or a moved environment supersedes the record and nothing runs."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.context import Context
from mesh_dagster.core.errors import ConfigError, EngineError, PlanError
from mesh_dagster.core.plan.identity import current_user
from mesh_dagster.core.plan.review import PlanEvent, PlanStatus, ProtectionError
from mesh_dagster.execution.plans.records import PlanSupersededError
from mesh_dagster.state import StateStore
from tests.execution.fake_engine import FakeEngine

WHEN = "2020-01-03"
MODELS = {
    "models/a.sql": """
        MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.a\n",
}
PROTECTED = """model_defaults:
  dialect: spark
  start: 2020-01-01
protected_environments:
  prod:
    approvers: [alice@example.com, bob@example.com]
"""


def project(tmp_path: Path, config: str = PROTECTED) -> Path:
    return write_project(tmp_path / "p", MODELS, config)


def as_user(monkeypatch: pytest.MonkeyPatch, who: str) -> None:
    monkeypatch.setenv("MESH_USER", who)


def context(root: Path, state_url: str, engine: FakeEngine | None = None) -> Context:
    return Context(root, state_url=state_url, engine=engine or FakeEngine())


def statuses(ctx: Context, plan_id: str) -> list[tuple[str, str, str]]:
    return [(e.action, e.actor, e.status.value) for e in ctx.reviews.records.find(plan_id).events]


def test_a_protected_prod_is_changed_only_by_an_approved_plan(tmp_path, state_url, monkeypatch):
    root = project(tmp_path)
    as_user(monkeypatch, "alice@example.com")
    ctx = context(root, state_url)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    with pytest.raises(ProtectionError, match="'prod' is a protected environment"):
        ctx.reviews.apply(plan)
    assert ctx.state.environments.get_environment("prod") is None and ctx.plan_records() == []  # nothing written

    record = ctx.reviews.record(plan)
    assert (record.status, record.author) == (PlanStatus.PENDING, "alice@example.com")
    assert [c.name for c in record.summary.changes] == ["s.a", "s.b"]
    assert record.summary.backfill_text["s.a"] == "[2020-01-01 - 2020-01-02]"
    with pytest.raises(ProtectionError, match="needs an approval first"):
        ctx.reviews.apply_recorded(plan.plan_id[:8])
    with pytest.raises(ProtectionError, match="alice@example.com made plan .* and may not approve it"):
        ctx.decide(plan.plan_id, "approve")
    as_user(monkeypatch, "carol@example.com")
    with pytest.raises(ProtectionError, match="carol@example.com may not approve plans for 'prod': its approvers "
                                              "are alice@example.com, bob@example.com"):
        ctx.decide(plan.plan_id, "approve")
    assert ctx.reviews.records.find(plan.plan_id).status == PlanStatus.PENDING and ctx.state.environments.get_environment("prod") is None

    as_user(monkeypatch, "BOB@example.com")  # identities compare without case
    assert ctx.decide(plan.plan_id, "approve", "looks right").status == PlanStatus.APPROVED
    with pytest.raises(ProtectionError, match="is approved: it cannot be approved"):
        ctx.decide(plan.plan_id, "approve")

    as_user(monkeypatch, "alice@example.com")
    done = ctx.reviews.apply_recorded(plan.plan_id)
    assert done.status == PlanStatus.COMPLETED
    assert ctx.state.environments.get_environment("prod").plan_id == plan.plan_id  # prod says which reviewed plan it runs
    assert statuses(ctx, plan.plan_id) == [
        ("create", "alice@example.com", "pending"), ("approve", "BOB@example.com", "approved"),
        ("start", "alice@example.com", "running"), ("complete", "alice@example.com", "completed")]
    assert ctx.reviews.records.find(plan.plan_id).events[1].note == "looks right"


def test_an_approved_plan_outdated_by_a_change_is_superseded_and_nothing_runs(tmp_path, state_url, monkeypatch):
    root = project(tmp_path)
    as_user(monkeypatch, "alice@example.com")
    engine = FakeEngine()
    ctx = context(root, state_url, engine)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(plan)
    as_user(monkeypatch, "bob@example.com")
    ctx.decide(plan.plan_id, "approve")
    # a new commit changes a model after the review
    (root / "models" / "b.sql").write_text("MODEL (name s.b, kind FULL);\nSELECT id, 2 AS x FROM s.a\n")
    ctx = context(root, state_url, engine)
    with pytest.raises(PlanSupersededError, match=r"superseded: the project changed since the review: s\.b"):
        ctx.reviews.apply_recorded(plan.plan_id)
    assert ctx.reviews.records.find(plan.plan_id).status == PlanStatus.SUPERSEDED
    assert ctx.state.environments.get_environment("prod") is None and engine.calls == []
    with pytest.raises(ProtectionError, match="is superseded: it cannot be applied"):
        ctx.reviews.apply_recorded(plan.plan_id)


def test_a_plan_whose_environment_moved_is_superseded(tmp_path, state_url, monkeypatch):
    root = project(tmp_path)
    ctx = context(root, state_url)
    as_user(monkeypatch, "alice@example.com")
    first, second = ctx.plans.plan("prod", execution_time=WHEN), ctx.plans.plan("prod", execution_time=WHEN)
    for p in (first, second):
        ctx.reviews.record(p)
    as_user(monkeypatch, "bob@example.com")
    for p in (first, second):
        ctx.decide(p.plan_id, "approve")
    ctx.reviews.apply_recorded(first.plan_id)
    # superseded as the first one completed, not left waiting for an apply that cannot run (issue 38, point 5)
    record = ctx.state.plans.get_plan_record(second.plan_id)
    assert record.status.value == "superseded"
    assert record.events[-1].note == f"'prod' now serves plan {first.plan_id[:8]}, applied after it was made"
    with pytest.raises(ProtectionError, match="is superseded: it cannot be applied"):
        ctx.reviews.apply_recorded(second.plan_id)


def test_a_plan_made_on_what_the_environment_now_serves_stays_waiting(tmp_path, state_url, monkeypatch):
    """Only plans made before the apply are outdated by it: one made on top of it still waits."""
    root = project(tmp_path)
    ctx = context(root, state_url)
    as_user(monkeypatch, "alice@example.com")
    first = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(first)
    as_user(monkeypatch, "bob@example.com")
    ctx.decide(first.plan_id, "approve")
    ctx.reviews.apply_recorded(first.plan_id)
    later = ctx.plans.plan("prod", execution_time=WHEN, allow_empty=True)  # on top of what prod serves now
    ctx.reviews.record(later)
    assert ctx.state.plans.get_plan_record(later.plan_id).status.value == "pending"


class FailingOnce(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def insert_overwrite_interval(self, *args, **kwargs):
        if not self.failed:
            self.failed = True
            raise EngineError("executor lost")
        return super().insert_overwrite_interval(*args, **kwargs)


def test_a_failed_apply_is_recorded_and_a_retry_resumes(tmp_path, state_url, monkeypatch):
    root = project(tmp_path)
    as_user(monkeypatch, "alice@example.com")
    ctx = context(root, state_url, FailingOnce())
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(plan)
    as_user(monkeypatch, "bob@example.com")
    ctx.decide(plan.plan_id, "approve")
    with pytest.raises(EngineError, match="executor lost"):
        ctx.reviews.apply_recorded(plan.plan_id)
    failed = ctx.reviews.records.find(plan.plan_id)
    assert failed.status == PlanStatus.FAILED and failed.events[-1].note == "executor lost"
    assert ctx.state.environments.get_environment("prod") is None
    assert ctx.reviews.apply_recorded(plan.plan_id).status == PlanStatus.COMPLETED  # still approved: the retry runs


def test_unprotected_plans_are_recorded_with_their_outcome_and_can_be_cancelled(tmp_path, state_url, monkeypatch):
    root = project(tmp_path, "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n")
    as_user(monkeypatch, "dana@example.com")
    ctx = context(root, state_url)
    applied = ctx.plans.plan("dev", execution_time=WHEN)
    ctx.reviews.apply(applied)
    record = ctx.reviews.records.find(applied.plan_id)
    assert (record.environment, record.status, record.author) == ("dev", PlanStatus.COMPLETED, "dana@example.com")
    with pytest.raises(ProtectionError, match="is completed: it cannot be cancelled"):
        ctx.decide(applied.plan_id, "cancel")
    waiting = ctx.reviews.record(ctx.plans.plan("dev", execution_time=WHEN, allow_empty=True))
    with pytest.raises(ProtectionError, match="'dev' is not a protected environment: its plans need no approval"):
        ctx.decide(waiting.plan_id, "approve")
    ctx.decide(waiting.plan_id, "cancel")

    left = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(left)
    assert ctx.decide(left.plan_id, "cancel").status == PlanStatus.CANCELLED
    with pytest.raises(ProtectionError, match="is cancelled: it cannot be applied"):
        ctx.reviews.apply_recorded(left.plan_id)
    assert ctx.state.environments.get_environment("prod") is None
    assert [r.status for r in ctx.plan_records()] == [PlanStatus.CANCELLED, PlanStatus.CANCELLED,
                                                      PlanStatus.COMPLETED]
    assert [r.plan_id for r in ctx.plan_records("dev", ["completed"])] == [applied.plan_id]


def test_two_deciders_at_once_one_wins(store: StateStore, tmp_path, monkeypatch):
    from mesh_dagster.core.time.dates import now_ms

    root = project(tmp_path)
    ctx = Context(root, state_url=store.url, engine=FakeEngine())
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    ctx.reviews.record(plan)
    approve = PlanEvent(action="approve", actor="bob@example.com", ts=now_ms(), status=PlanStatus.APPROVED)
    cancel = PlanEvent(action="cancel", actor="alice@example.com", ts=now_ms(), status=PlanStatus.CANCELLED)
    assert store.plans.transition_plan(plan.plan_id, ["pending"], approve) is not None
    assert store.plans.transition_plan(plan.plan_id, ["pending"], cancel) is None  # it was no longer pending
    assert [e.action for e in store.plans.get_plan_record(plan.plan_id).events] == ["create", "approve"]


def test_identity_comes_from_mesh_user_then_git_then_the_os(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.delenv("MESH_USER", raising=False)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "user.email", "erin@example.com"], check=True)
    assert current_user(root) == "erin@example.com"
    monkeypatch.setenv("MESH_USER", "frank")
    assert current_user(root) == "frank"
    monkeypatch.delenv("MESH_USER")
    outside = tmp_path / "not_git"
    outside.mkdir()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no_gitconfig"))
    assert current_user(outside)  # the OS user


def test_a_plan_records_the_commit_it_was_made_from(tmp_path, state_url, monkeypatch):
    root = project(tmp_path)
    for args in (["init", "-q", "-b", "feature/x"], ["config", "user.email", "g@example.com"],
                 ["config", "user.name", "G"], ["add", "."], ["commit", "-qm", "models"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    monkeypatch.delenv("MESH_USER", raising=False)
    ctx = context(root, state_url)
    record = ctx.reviews.record(ctx.plans.plan("prod", execution_time=WHEN))
    assert (record.git_commit, record.git_branch, record.author) == (head, "feature/x", "g@example.com")


@pytest.mark.parametrize(("config", "message"), [
    (PROTECTED.replace("approvers:", "approver:"), "protected_environments.prod.approver"),
    (PROTECTED.replace("  prod:", "  Prod:"), "only 'prod' names the production environment"),
    (PROTECTED + "    allow_self_approval: maybe\n", "allow_self_approval"),
])
def test_bad_protection_settings_are_refused(tmp_path, config, message):
    root = project(tmp_path, config)
    with pytest.raises(ConfigError, match=message):
        Context(root).config  # noqa: B018


def test_the_review_from_the_command_line(tmp_path, monkeypatch):
    root = project(tmp_path)  # its own state file: the CLI reads the project's config
    runner = CliRunner()

    def mesh(*args: str, user: str) -> str:
        monkeypatch.setenv("MESH_USER", user)
        result = runner.invoke(cli, ["--paths", str(root), *args], obj={})
        return f"{result.exit_code}:{result.output}"

    # on a protected prod the CLI's plan is recorded for review, not applied (so no Spark starts)
    made = mesh("plan", "--execution-time", WHEN, "--auto-apply", "--no-diff", user="alice@example.com")
    assert made.startswith("0:") and "'prod' is protected: plan" in made and "recorded for review" in made
    ctx = Context(root, engine=FakeEngine())
    (record,) = ctx.plan_records()
    plan_id = record.plan_id
    assert ctx.state.environments.get_environment("prod") is None
    ctx.close()
    listed = mesh("plans", "list", user="alice@example.com")
    assert listed.startswith("0:") and plan_id[:8] in listed and "pending" in listed
    shown = mesh("plans", "show", plan_id[:8], user="alice@example.com")
    assert "| `s.a` | added |" in shown and "create     alice@example.com" in shown
    refused = mesh("plans", "approve", plan_id[:8], user="alice@example.com")
    assert refused.startswith("1:") and "may not approve it" in refused
    assert mesh("plans", "approve", plan_id[:8], "-m", "ok", user="bob@example.com").startswith(
        f"0:Plan {plan_id[:8]} approved by bob@example.com.")
    assert "No plan 'zzzzzzzz'" in mesh("plans", "show", "zzzzzzzz", user="bob@example.com")


class Hook:
    """A real HTTP server on 127.0.0.1 that keeps what it is sent (and can be told to fail)."""

    def __init__(self, status: int = 200) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        received: list[dict] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_plan_events_reach_webhooks_and_a_dead_one_is_only_logged(tmp_path, state_url, monkeypatch, caplog):
    hook, failing = Hook(), Hook(status=500)
    try:
        config = PROTECTED + (f"notification_targets:\n  - url: {hook.url}\n"
                              f"  - url: {failing.url}\n    events: [plan_applied]\n"
                              "  - url: http://127.0.0.1:9/nobody-listens\n")
        root = project(tmp_path, config)
        as_user(monkeypatch, "alice@example.com")
        ctx = context(root, state_url)
        plan = ctx.plans.plan("prod", execution_time=WHEN)
        ctx.reviews.record(plan)
        as_user(monkeypatch, "bob@example.com")
        ctx.decide(plan.plan_id, "approve")
        with caplog.at_level("WARNING", logger="mesh_dagster.notify"):
            ctx.reviews.apply_recorded(plan.plan_id)  # the dead targets do not stop it
        assert [(b["event"], b["actor"], b["status"]) for b in hook.received] == [
            ("plan_pending", "alice@example.com", "pending"), ("plan_approved", "bob@example.com", "approved"),
            ("plan_applied", "bob@example.com", "completed")]
        assert hook.received[0]["plan_id"] == plan.plan_id and hook.received[0]["changes"] == ["s.a", "s.b"]
        assert [b["event"] for b in failing.received] == ["plan_applied"]  # only what it asked for
        assert ctx.reviews.records.find(plan.plan_id).status == PlanStatus.COMPLETED
        warnings = [r.getMessage() for r in caplog.records]
        assert any("plan_applied" in w and failing.url in w for w in warnings)
        assert any("nobody-listens" in w for w in warnings)
    finally:
        hook.close()
        failing.close()


@pytest.mark.parametrize(("target", "message"), [
    ("  - url: ftp://x\n", "is not an http(s) URL"),
    ("  - url: http://x\n    events: [plan_exploded]\n", "unknown event(s) plan_exploded"),
    ("  - type: slack\n    url: http://x\n", "type 'slack' is not supported: only webhook"),
])
def test_bad_notification_targets_are_refused(tmp_path, target, message):
    root = project(tmp_path, PROTECTED + "notification_targets:\n" + target)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Context(root).config  # noqa: B018


def test_a_protected_environment_is_not_promoted_without_an_approved_plan(tmp_path, state_url, monkeypatch):
    as_user(monkeypatch, "alice@example.com")
    open_root = project(tmp_path / "open", "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n")
    for root, protected in ((open_root, False), (project(tmp_path), True)):
        ctx = context(root, state_url if not protected else f"sqlite:///{tmp_path / 'prot.db'}")
        today = datetime.now(UTC).strftime("%Y-%m-%d")  # promotion looks at what is due now
        list(ctx.runs.materialize(["s.a", "s.b"], "2020-01-01", today))  # no gaps left
        if protected:
            with pytest.raises(ProtectionError, match="'prod' is a protected environment"):
                ctx.reviews.promote("prod")
            assert ctx.state.environments.get_environment("prod") is None and ctx.plan_records() == []
        else:
            plan = ctx.reviews.promote("prod")
            assert ctx.reviews.records.find(plan.plan_id).status == PlanStatus.COMPLETED  # recorded like any plan


def test_an_unreachable_postgres_is_one_clear_error_and_nothing_is_half_done(tmp_path, monkeypatch):
    from mesh_dagster.core.errors import StateError

    root = project(tmp_path)
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx = Context(root, state_url="postgresql+psycopg://postgres@127.0.0.1:9/test", engine=FakeEngine())
    for action in (lambda: ctx.plan_records(), lambda: ctx.decide("feedface", "approve"),
                   lambda: ctx.reviews.record(ctx.plans.plan("prod", execution_time=WHEN))):
        with pytest.raises(StateError, match="127.0.0.1:9"):
            action()


def test_a_failed_run_is_notified_through_the_projects_one_notifier(tmp_path, state_url):
    hook = Hook()
    try:
        root = project(tmp_path, PROTECTED + f"notification_targets:\n  - url: {hook.url}\n    events: [run_failed]\n")
        ctx = context(root, state_url)
        with pytest.raises(PlanError, match=r"Environment 'qa' does not exist\. Run `mesh plan qa` first"):
            ctx.runs.run("qa")  # no such environment: the run fails before anything is written
        assert [(b["event"], b["environment"]) for b in hook.received] == [("run_failed", "qa")]
        assert hook.received[0]["error"] == "Environment 'qa' does not exist. Run `mesh plan qa` first."
        assert ctx.notifier is ctx.reviews.records.notifier  # plan records and runs share it
        assert [event for _, event in ctx.notifier.delivered] == ["run_failed"]
    finally:
        hook.close()
