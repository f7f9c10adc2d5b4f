"""What the linter did is part of a plan's review (issue 34, point 10), on real SQLite and real Postgres
(no Spark: nothing here evaluates). A protected plan made with `mesh plan --skip-linter` says, in
`mesh plans show` and in its Markdown summary (the prod review), that the linter was skipped and by
whom; a project whose config turns the linter off says so; a pushed commit whose own config.yaml turns
it off says it is allowed by design. The apply is not refused for it: the reviewer decides.

A pushed branch's `before_all` naming prod's view (issue 34, point 3: `git_plan` replaced prod's view)
is refused when the commit is planned: a failed record naming the entry, nothing applied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import CONFIG, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.context import Context
from mesh_dagster.core.plan.review import PlanStatus
from tests.execution.fake_engine import FakeEngine
from tests.state.test_git_plans import WATCHER_CONFIG, Repo

MODELS = {"models/p.sql": "MODEL (name s.p, kind FULL);\nSELECT 1 AS id\n",
          "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT * FROM s.p\n"}  # SELECT *, and no owner
PROTECTED = CONFIG + "protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"
LINTED = PROTECTED + "linter:\n  enabled: true\n  rules: []\n  warn_rules: [noselectstar]\n"
SKIPPED = "Linter: skipped by alice@example.com (--skip-linter): the models were not linted."
OFF = "Linter: off in the project's config.yaml (`linter.enabled` is false): the models were not linted."
PUSHED_OFF = ("Linter: off in the pushed commit's config.yaml (`linter.enabled` is false) — allowed by design: the "
              "commit's own linter config applies.")


def mesh(root: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["-p", str(root), *args])
    assert result.exit_code == 0, result.output
    return result.output


def pending(root: Path) -> str:
    (record,) = [r for r in Context(root).plan_records() if r.status == PlanStatus.PENDING]
    return record.plan_id


@pytest.mark.parametrize("config, flags, line", [
    (LINTED, ["--skip-linter"], SKIPPED),
    (LINTED, [], "Linter: ran, 1 warning(s)."),
    (PROTECTED, [], OFF),
])
def test_plans_show_and_the_review_say_what_the_linter_did(tmp_path, monkeypatch, config, flags, line):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    root = write_project(tmp_path / "p", MODELS, config)
    mesh(root, "plan", "--skip-tests", "--no-prompts", *flags)
    plan_id = pending(root)
    shown = mesh(root, "plans", "show", plan_id[:8])
    assert line in shown.splitlines()
    record = Context(root).reviews.records.find(plan_id)
    assert record.summary.markdown("prod").endswith(f"\n\n{line}")  # the review a prod approver reads
    assert record.summary.linter_line() == line


def test_a_skipped_linter_does_not_stop_the_approved_apply(tmp_path, state_url, monkeypatch):
    root = write_project(tmp_path / "p", MODELS, LINTED)
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    ctx.skip_lint_gate("--skip-linter")
    record = ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-03"))
    assert record.summary.linter_line() == SKIPPED
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(record.plan_id, "approve")
    assert ctx.reviews.apply_recorded(record.plan_id).status == PlanStatus.COMPLETED  # the reviewer decided


def test_a_pushed_commit_turning_its_linter_off_says_it_is_allowed_by_design(tmp_path, state_url, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    repo = Repo(tmp_path)
    sha = repo.commit({**MODELS, "config.yaml": CONFIG + "linter:\n  enabled: false\n"}, "no linter")
    repo.push("main")
    location = Context(write_project(tmp_path / "location", {}, WATCHER_CONFIG), state_url=state_url,
                       engine=FakeEngine())
    record = location.reviews.plan_git_commit("main", sha)
    assert (record.environment, record.status) == ("prod", PlanStatus.PENDING)
    assert record.summary.linter_line() == PUSHED_OFF
    assert record.summary.markdown("prod").endswith(f"\n\n{PUSHED_OFF}")


def test_a_pushed_before_all_naming_prods_view_is_a_failed_plan_and_nothing_runs(tmp_path, state_url, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    repo = Repo(tmp_path)
    hostile = CONFIG + "before_all:\n  - CREATE OR REPLACE VIEW s.m AS SELECT 666 AS id\n"
    sha = repo.commit({**MODELS, "config.yaml": hostile}, "replace prod's view")
    repo.push("feature/x")
    engine = FakeEngine()
    location = Context(write_project(tmp_path / "location", {}, WATCHER_CONFIG), state_url=state_url, engine=engine)
    record = location.reviews.plan_git_commit("feature/x", sha)
    assert (record.environment, record.status) == ("feature_x", PlanStatus.FAILED)
    assert record.events[-1].note.startswith(f"commit {sha[:8]}: config.yaml:6: before_all.0: it names s.m, a view "
                                             "of environment 'prod'")
    assert engine.calls == [] and location.state.environments.get_environments() == []
