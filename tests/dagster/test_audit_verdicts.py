"""Audits are checks that hold, through Dagster's own execution APIs on the test process's Spark:
an audit's verdict stays with the data it judged (state store, execution/evaluate/verdicts.py) — re-stamps
carry it forward instead of resetting it, audits run by the CLI show as check results — and a
failed blocking audit on what an environment would serve blocks its promotion, by promote_<env>
and by the git sensor's deploy.

The example project; prod applied by the CLI; then its blocking audit edited to fail (`item_id >
2`: a metadata change, the data and its version stay)."""

from __future__ import annotations

import shutil
import subprocess

import dagster as dg
import pytest
from failures import failure_text
from plan_checks import audit_evaluations
from test_dagster_materialize import Project, _drop, _new_project, _restamped

from mesh_dagster.context import Context

pytestmark = pytest.mark.spark

FAILING_AUDIT = "AUDIT (\n  name assert_positive_order_ids,\n);\n\nSELECT *\nFROM @this_model\nWHERE\n  item_id > 2\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark):
    from mesh_dagster.engine.adapter import SparkEngine

    p = _new_project(tmp_path_factory.mktemp("verdicts"))
    ctx = Context(p.root)
    try:
        ctx.reviews.apply(ctx.plans.plan("prod"))  # what `mesh plan --auto-apply` does: the audit runs, and passes
    finally:
        ctx.close()
    yield p
    _drop(SparkEngine(spark), p.schema)


def _checks(results: list[dg.ExecuteInProcessResult]) -> list[dg.AssetCheckEvaluation]:
    return [e for r in results for e in audit_evaluations(r)]


def _edit(project: Project, model: str, old: str, new: str) -> None:
    path = project.root / "models" / f"{model}.sql"
    path.write_text(path.read_text().replace(old, new, 1))


def test_audits_run_by_the_cli_show_as_check_results(project):
    held = Context(project.root).verdicts([(project.name("full_model"), _version(project))])
    assert [h.verdict.source for v in held.values() for h in v.holdings] == ["apply"]
    results = project.restamp()  # prod's data is shown in Dagster: the audit's verdict with it
    assert results and all(r.success for r in results)
    (check,) = _checks(results)
    assert (check.asset_key, check.check_name, check.passed) == (project.key("full_model"),
                                                                  "assert_positive_order_ids", True)
    assert " by apply at " in check.metadata["audited"].value


def test_a_failed_blocking_audit_blocks_promotion_and_survives_restamps(project):
    audit = project.root / "audits" / "assert_positive_order_ids.sql"
    original = audit.read_text()
    audit.write_text(FAILING_AUDIT)
    prod_plan = Context(project.root).state.environments.get_environment("prod").plan_id
    try:
        result = project.run(asset_selection=[project.key("full_model")])
        assert not result.success
        (check,) = audit_evaluations(result)
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        rows = check.metadata["failing_rows"].value
        assert f"{rows} failing row(s):" in check.description and "| `item_id` |" in check.description  # the rows
        assert "Audit 'assert_positive_order_ids' failed for" in failure_text(result)

        refused = project.run("promote_prod")
        assert not refused.success
        message = failure_text(refused)
        assert "Cannot promote 'prod': 1 blocking audit(s) failed on the data it would serve" in message
        assert f"{project.schema}.full_model: blocking audit 'assert_positive_order_ids' failed for " in message
        assert Context(project.root).state.environments.get_environment("prod").plan_id == prod_plan  # nothing moved

        # another change of full_model's metadata: re-stamped, and its check keeps the failure
        _edit(project, "full_model", "  cron '@daily',\n", "  cron '@daily',\n  owner someone,\n")
        results = project.restamp()
        assert all(r.success for r in results)  # carrying a failure forward fails nothing
        assert _restamped(results) == {"full_model": 1}
        (carried,) = _checks(results)
        assert not carried.passed and " by materialize at " in carried.metadata["audited"].value
        assert carried.metadata["failing_rows_sample"].value in carried.description  # kept with the verdict
    finally:
        audit.write_text(original)
        _edit(project, "full_model", "  owner someone,\n", "")


def test_the_git_sensor_does_not_deploy_data_a_blocking_audit_failed_on(project, tmp_path):
    """A pushed branch whose plan would serve full_model's data as judged by the failing audit
    (the same version, the same audit definition) is recorded failed, nothing applied."""
    clone = tmp_path / "clone"
    shutil.copytree(project.root, clone, ignore=shutil.ignore_patterns(".mesh"))
    (clone / "audits" / "assert_positive_order_ids.sql").write_text(FAILING_AUDIT)
    bare = tmp_path / "warehouse.git"
    for args in (["init", "-q", "--bare", "-b", "main", str(bare)], ["-C", str(clone), "init", "-q", "-b", "x"],
                 ["-C", str(clone), "add", "-A"],
                 ["-C", str(clone), "-c", "user.email=a@example.com", "-c", "user.name=A", "commit", "-qm", "x"],
                 ["-C", str(clone), "push", "-q", str(bare), "x:refs/heads/feature/x"]):
        subprocess.run(["git", *args], check=True, capture_output=True)
    sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    config = project.root / "config.yaml"
    original = config.read_text()
    config.write_text(original + f"\nprotected_environments:\n  prod: {{}}\ngit:\n  repo: {bare}\n")
    ctx = Context(project.root)
    try:
        record = ctx.reviews.plan_git_commit("feature/x", sha)
        assert record.status.value == "failed"
        assert f"commit {sha[:8]}: Cannot promote 'feature_x': 1 blocking audit(s) failed" in record.events[-1].note
        assert ctx.state.environments.get_environment("feature_x") is None
    finally:
        ctx.close()
        config.write_text(original)


def _version(project: Project) -> str:
    ctx = Context(project.root)
    try:
        return ctx.plans.plan("prod", allow_empty=True).snapshots[project.name("full_model")].version
    finally:
        ctx.close()
