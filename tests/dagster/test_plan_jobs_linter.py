"""The linter in Dagster's jobs that make plans, through Dagster's own APIs, in process and without
Spark (a refused plan stops before anything would start it): like `mesh plan`, the plan, promote and
restate jobs run the project's linter first. An error of `linter.rules` fails the step with the one
line `mesh plan` prints (each violation as `file:line: rule: message`) and records nothing; a
warning of `linter.warn_rules` is logged and the plan is recorded. A pushed commit is linted with
its own files by the git_plan job: an error is a failed record, nothing applied. Loading the
definitions (which plans every environment) never lints, so a lint error cannot break the UI.
"""

from __future__ import annotations

import dagster as dg
from failures import failure_text
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions
from tests.state.test_git_plans import WATCHER_CONFIG, Repo

PARENT = "MODEL (name s.p, kind FULL, owner 'jen');\nSELECT 1 AS id, 2 AS x\n"
STAR = "MODEL (name s.m, kind FULL);\nSELECT * FROM s.p\n"  # line 2: SELECT *; line 1: no owner
FILES = {"models/p.sql": PARENT, "models/m.sql": STAR}
STAR_FOUND = ("models/m.sql:2: noselectstar: Query should not contain SELECT * on its outer most projections, even "
              "if it can be expanded.")
REFUSED = f"Linter errors: {STAR_FOUND.rstrip('.')}. Fix them, or move the rule to linter.warn_rules"
WARNED = "models/m.sql:1: nomissingowner: Model owner should always be specified."
# A user rule whose module leaves a mark when it is imported: what shows whether the linter ran.
MARKING_RULE = """from pathlib import Path
from sqlmesh.core.linter.rule import Rule

Path(__file__).with_name("imported.mark").write_text("linted")


class NeverFires(Rule):
    def check_model(self, model):
        return None
"""


def _linter(rules: str, warn: str = "[]") -> str:
    return f"linter:\n  enabled: true\n  rules: {rules}\n  warn_rules: {warn}\n"


def _project(tmp_path, rules: str, warn: str = "[]"):
    root = write_project(tmp_path / "p", {**FILES, "linter/marking.py": MARKING_RULE}, CONFIG + _linter(rules, warn))
    (tmp_path / "home").mkdir()
    return root, dg.DagsterInstance.local_temp(str(tmp_path / "home"))


def _log_messages(result, instance: dg.DagsterInstance, level: int) -> list[str]:
    """The user messages of the run's log at `level` (what the run page shows)."""
    records = instance.all_logs(result.run_id)
    return [r.user_message for r in records if r.dagster_event is None and r.level == level]


def test_a_linter_error_fails_the_plan_job_and_records_nothing(tmp_path):
    root, instance = _project(tmp_path, "[noselectstar]", "[nomissingowner]")
    defs = definitions(root, "dev", shared_spark=False)  # loading plans every environment: it never lints
    assert not (root / "linter" / "imported.mark").exists()

    result = defs.resolve_job_def("plan_dev").execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failure = failure_text(result)  # one line, no stack trace (failure_text checks)
    assert REFUSED in failure and "Nothing was planned." in failure
    assert "model's ignored_rules. Nothing was planned." in failure
    assert "--skip-linter" not in failure  # Dagster's jobs have no such flag
    assert (root / "linter" / "imported.mark").exists()
    assert Context(root).plan_records() == []  # nothing recorded
    # every finding in the run's log, as `mesh plan` prints them
    assert [m for m in _log_messages(result, instance, 40) if "Linter" in m] == [f"Linter error: {STAR_FOUND}"]
    assert [m for m in _log_messages(result, instance, 30) if "Linter" in m] == [f"Linter warning: {WARNED}"]


def test_a_linter_warning_is_logged_and_the_plan_is_recorded(tmp_path):
    root, instance = _project(tmp_path, "[]", "[noselectstar, nomissingowner]")
    defs = definitions(root, "dev", shared_spark=False)
    result = defs.resolve_job_def("plan_dev").execute_in_process(
        run_config={"ops": {"plan_dev_changes": {"config": {"execution_time": "2020-01-03"}}}}, instance=instance)
    assert result.success
    warnings = [m for m in _log_messages(result, instance, 30) if "Linter" in m]
    assert warnings == [f"Linter warning: {WARNED}", f"Linter warning: {STAR_FOUND}"]  # linted once in the run
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata
    assert metadata["linter_warnings"].value == f"{WARNED}\n{STAR_FOUND}"
    (record,) = Context(root).plan_records()
    assert (record.plan_id, record.environment, record.status.value) == (metadata["plan_id"].value, "dev", "pending")


def test_promote_and_restate_jobs_refuse_a_linter_error_before_planning(tmp_path):
    root, instance = _project(tmp_path, "[noselectstar]")
    defs = definitions(root, "dev", shared_spark=False)
    promoted = defs.resolve_job_def("promote_dev").execute_in_process(instance=instance, raise_on_error=False)
    assert not promoted.success and REFUSED in failure_text(promoted)
    restated = defs.resolve_job_def("restate_dev").execute_in_process(
        run_config={"ops": {"restate_dev_models": {"config": {"models": ["s.p"]}}}}, instance=instance,
        raise_on_error=False)
    assert not restated.success and REFUSED in failure_text(restated)
    ctx = Context(root)
    assert ctx.plan_records() == [] and ctx.state.environments.get_environment("dev") is None


def test_a_pushed_commit_is_linted_with_its_own_files(tmp_path, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    repo = Repo(tmp_path)
    # the commit's own config.yaml (written after the builder's) turns its linter on
    strict = repo.commit({**FILES, "config.yaml": CONFIG + _linter("[noselectstar]", "[nomissingowner]")}, "star")
    repo.push("feature/x")
    location = write_project(tmp_path / "location", {}, WATCHER_CONFIG)
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    defs = definitions(location, "prod", shared_spark=False)
    git_plan = defs.resolve_job_def("git_plan")

    refused = git_plan.execute_in_process(
        run_config={"ops": {"git_plan_commit": {"config": {"branch": "feature/x", "sha": strict}}}},
        instance=instance, raise_on_error=False)
    assert not refused.success
    assert f"commit {strict[:8]}: {REFUSED}" in failure_text(refused)
    ctx = Context(location)
    (record,) = ctx.plan_records()  # the push's outcome: a failed record, as for a commit that does not load
    assert (record.environment, record.status.value, record.git_commit) == ("feature_x", "failed", strict)
    assert REFUSED in (record.events[-1].note or "")
    assert ctx.state.environments.get_environment("feature_x") is None  # nothing applied

    # a warning only: the push to the protected branch records its pending plan, the warning in the run's log
    warned = repo.commit({**FILES, "config.yaml": CONFIG + _linter("[]", "[nomissingowner]")}, "warn only")
    repo.push("main")
    run = git_plan.execute_in_process(
        run_config={"ops": {"git_plan_commit": {"config": {"branch": "main", "sha": warned}}}}, instance=instance)
    assert run.success
    assert [m for m in _log_messages(run, instance, 20) if "Linter" in m] == [f"Linter warning: {WARNED}"]
    pending = [r for r in ctx.plan_records() if r.git_commit == warned]
    assert [(r.environment, r.status.value) for r in pending] == [("prod", "pending")]
