"""What tests about re-stamps and audits read of a result, the plan check left out: every model's
step and the re-stamp sensor also report the `serves_current_code` check (dagster/mapping/
plan_check.py, tested in test_plan_check.py and the webserver scenarios)."""

from __future__ import annotations

import dagster as dg

from mesh_dagster.dagster.mapping.plan_check import PLAN_CHECK


def is_plan_check(event) -> bool:
    return isinstance(event, dg.AssetCheckEvaluation) and event.check_name == PLAN_CHECK


def audit_evaluations(result: dg.ExecuteInProcessResult) -> list[dg.AssetCheckEvaluation]:
    """A run's check evaluations of audits."""
    return [e for e in result.get_asset_check_evaluations() if not is_plan_check(e)]


def stamps_only(wanted, instance: dg.DagsterInstance):
    """A re-stamp sensor tick's answer without its plan-check verdicts, which are reported to
    `instance` first, as Dagster's daemon reports a sensor's asset events: a SkipReason when
    nothing else was asked."""
    if isinstance(wanted, dg.SkipReason):
        return wanted
    for event in (e for e in wanted.asset_events if is_plan_check(e)):
        instance.report_runless_asset_event(event)
    events = [e for e in wanted.asset_events if not is_plan_check(e)]
    if not events and not wanted.run_requests:
        return dg.SkipReason("only plan-check verdicts")
    return dg.SensorResult(run_requests=wanted.run_requests, asset_events=events)


def audit_checks(checks) -> list:
    """Of an asset's checks (check keys, or the webserver's check dicts), its audits'."""
    return [c for c in checks if (c["name"] if isinstance(c, dict) else c.name) != PLAN_CHECK]


def plan_check_shown(checks: list[dict]) -> tuple[str | None, str]:
    """(status, description) of the serves_current_code check's latest execution, from the
    webserver's check dicts (`name`, `executionForLatestMaterialization { status evaluation
    { description } }`)."""
    (check,) = [c for c in checks if c["name"] == PLAN_CHECK]
    execution = check["executionForLatestMaterialization"] or {}
    return execution.get("status"), (execution.get("evaluation") or {}).get("description") or ""
