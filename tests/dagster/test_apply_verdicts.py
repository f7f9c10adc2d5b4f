"""Every apply honours the audit verdicts that hold, on real Spark and through Dagster's own APIs:
a failed blocking audit recorded by a Dagster materialization stops `apply_plan_<env>`, a CLI
apply (`mesh plan --auto-apply`, `mesh plans apply`) and the git sensor's deploy alike — they
share the check in execution/apply/apply.py — before any view moves, with one line naming the model, the
audit and what to do, the plan record left failed (retryable). A newer passing verdict on the
same data (a re-audit), or a fixed audit whose new run passed, lets the apply through.

The example project, prod applied by the CLI; then its blocking audit edited to fail (`item_id >
2`: a metadata change of full_model, whose version and data stay), and full_model materialized in
the dev code location, where the audit runs and fails."""

from __future__ import annotations

import dagster as dg
import pytest
from failures import failure_text
from plan_checks import audit_evaluations
from test_dagster_materialize import Project, _drop, _new_project

from mesh_dagster.context import Context
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.execution.evaluate.evaluator import AuditResult
from mesh_dagster.execution.evaluate.verdicts import ApplyAuditsFailed, record

pytestmark = pytest.mark.spark

AUDIT = "AUDIT (\n  name assert_positive_order_ids,\n);\n\nSELECT *\nFROM @this_model\nWHERE\n  item_id {}\n"
FAILING, FIXED = AUDIT.format("> 2"), AUDIT.format("> 1000")


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark):
    from mesh_dagster.engine.adapter import SparkEngine

    p = _new_project(tmp_path_factory.mktemp("apply_verdicts"))
    ctx = Context(p.root)
    try:
        ctx.reviews.apply(ctx.plans.plan("prod"))  # `mesh plan --auto-apply`: the audit runs, and passes
    finally:
        ctx.close()
    yield p
    _drop(SparkEngine(spark), p.schema)


def _plan_dev(project: Project) -> str:
    """plan_dev, as launched in Dagster: the recorded plan's id."""
    result = project.run("plan_dev", env="dev")
    assert result.success
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return output.event_specific_data.metadata["plan_id"].value


def _apply_dev(project: Project, plan_id: str) -> dg.ExecuteInProcessResult:
    return project.run("apply_plan_dev", env="dev",
                       run_config={"ops": {"apply_plan_dev_record": {"config": {"plan_id": plan_id}}}})


def _refusal(project: Project, plan_id: str) -> str:
    return (f"Cannot apply plan {plan_id[:8]} to 'dev', so no view was moved: {project.schema}__dev.full_model: "
            "blocking audit 'assert_positive_order_ids' failed for the whole table (")


def test_a_failed_blocking_verdict_stops_every_apply_until_fixed(project):
    audit = project.root / "audits" / "assert_positive_order_ids.sql"
    original = audit.read_text()
    audit.write_text(FAILING)
    ctx = project.context()
    try:
        failed = project.run(env="dev", asset_selection=[project.key("full_model", "dev")])
        assert not failed.success and not audit_evaluations(failed)[0].passed  # the verdict, recorded

        plan_id = _plan_dev(project)
        refused = _apply_dev(project, plan_id)
        assert not refused.success
        message = failure_text(refused)
        assert _refusal(project, plan_id) in message and "`mesh plans apply " in message
        assert ctx.state.environments.get_environment("dev") is None  # nothing recorded, no view made
        assert not ctx.engine.catalog.table_exists(f"{project.schema}__dev.full_model")
        assert ctx.reviews.records.find(plan_id).status.value == "failed"  # retryable
        assert _refusal(project, plan_id) in (ctx.reviews.records.find(plan_id).events[-1].note or "")

        with pytest.raises(ApplyAuditsFailed) as cli:  # `mesh plans apply`: the same record, the same refusal
            ctx.reviews.apply_recorded(plan_id)
        assert str(cli.value).startswith(_refusal(project, plan_id)) and "\n" not in str(cli.value)
        plan = ctx.plans.plan("dev")
        with pytest.raises(ApplyAuditsFailed) as auto:  # `mesh plan dev --auto-apply`
            ctx.reviews.apply(plan)
        assert str(auto.value).startswith(_refusal(project, plan.plan_id))
        assert ctx.state.environments.get_environment("dev") is None
        assert ctx.reviews.records.find(plan_id).status.value == "failed"

        # a newer verdict that holds (the same data audited again by the same audit, and passing)
        full = plan.snapshots[project.name("full_model")]
        record(ctx.state, full, ctx.project.audits, [(ALL_TIME, [AuditResult("assert_positive_order_ids", 0, True)])],
               "materialize")
        done = _apply_dev(project, plan_id)  # the record refused before is applied now
        assert done.success, failure_text(done)
        assert ctx.reviews.records.find(plan_id).status.value == "completed"
        assert ctx.state.environments.get_environment("dev") is not None
        assert project.rows(f"SELECT COUNT(*) FROM {project.schema}__dev.full_model")[0][0] > 0
    finally:
        audit.write_text(original)
        ctx.close()


def test_a_fixed_audit_audited_again_is_applied(project):
    """In another environment (qa): the audit fixed (another definition: the failed verdict does not
    hold for it) and full_model materialized again, where the fixed audit runs and passes: the CLI
    apply goes through."""
    audit = project.root / "audits" / "assert_positive_order_ids.sql"
    original = audit.read_text()
    audit.write_text(FAILING)
    ctx = project.context()
    try:
        assert not project.run(env="qa", asset_selection=[project.key("full_model", "qa")]).success
        with pytest.raises(ApplyAuditsFailed, match="Cannot apply plan .* to 'qa', so no view was moved"):
            ctx.reviews.apply(ctx.plans.plan("qa"))
        assert ctx.state.environments.get_environment("qa") is None
        audit.write_text(FIXED)
        fixed = project.run(env="qa", asset_selection=[project.key("full_model", "qa")])
        assert fixed.success and audit_evaluations(fixed)[0].passed
        ctx.close()
        ctx = project.context()  # the project as it is now (a Context loads it once)
        plan = ctx.plans.plan("qa")
        ctx.reviews.apply(plan)
        assert ctx.reviews.records.find(plan.plan_id).status.value == "completed"
        assert project.rows(f"SELECT COUNT(*) FROM {project.schema}__qa.full_model")[0][0] > 0
    finally:
        audit.write_text(original)
        ctx.close()
