"""A recorded plan's data diff on the page of the `plan_<env>` run that recorded it.

The run that records a plan ends before any data of the plan's new versions exists: its page says
the diff is pending. The diff is computed once an apply has built the new tables (by
`apply_plan_<env>`, `mesh plan`, `mesh plans apply` or the git sensor), and attached to the
plan's record. The plan status sensor, which reads the plan records on every tick whoever changed
them, then adds the diff to the recording run's log: the page the reviewer opened shows the data
they approve.
The recording run carries the plan's id as a tag; once the diff is posted, a second tag says so,
so a later change of the plan's status never posts it twice. Dagster's means for both are in
compat.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dagster import DagsterInstance

from mesh_dagster.dagster.compat import latest_runs, post_to_run, tag_run

PLAN_ID_TAG = "mesh/plan_id"  # on a plan_<env> run: the id of the plan it recorded
DIFF_POSTED_TAG = "mesh/data_diff_posted"  # on a plan_<env> run: its plan's data diff is in its log
RECENT_RUNS = 50  # how many of the latest plan_<env> runs a tick looks at


def mark_plan_run(instance: DagsterInstance, run_id: str, plan_id: str, shows_diff: bool) -> None:
    """Tag the `plan_<env>` run `run_id` with the plan it recorded (where its diff will be posted);
    `shows_diff`: its own metadata already shows a diff (one a prod plan reuses from a dev plan),
    which is then never posted again."""
    tag_run(instance, run_id, {PLAN_ID_TAG: plan_id, **({DIFF_POSTED_TAG: "true"} if shows_diff else {})})


def post_data_diffs(instance: DagsterInstance, environment: str,
                    metadata: Callable[[str], Mapping[str, Any] | None]) -> int:
    """Add each plan's data diff (`metadata(plan_id)`, as reviews.data_diff_metadata gives it; None:
    no diff yet) to the log of the latest `plan_<env>` runs that recorded it and do not show it
    yet; how many got one. Asked on every tick, not only when a plan's status changes: the diff is
    attached after its apply completed, with no status change of its own. The latest RECENT_RUNS
    runs are looked at: a plan applied later than that many newer plan runs keeps its diff in
    `mesh plans show` and on the apply's page only."""
    posted = 0
    for run in latest_runs(instance, f"plan_{environment}", RECENT_RUNS):
        plan_id = run.tags.get(PLAN_ID_TAG)
        if plan_id is None or run.tags.get(DIFF_POSTED_TAG) == "true" or not (shown := metadata(plan_id)):
            continue
        message = (f"Data diff of plan {plan_id[:8]}, computed once its apply built the new tables: "
                   "how the new data differs from what the environment served")
        if post_to_run(instance, run, message, shown):
            tag_run(instance, run.run_id, {DIFF_POSTED_TAG: "true"})
            posted += 1
    return posted
