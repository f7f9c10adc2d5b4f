"""A recorded plan's data diff on the page of the `plan_<env>` run that recorded it.

The run that records a plan ends before any data of the plan's new versions exists: its page says
the diff is pending. The diff is computed once an apply has built the new tables (by
`apply_plan_<env>`, `mesh plan`, `mesh plans apply` or the git sensor), and attached to the
plan's record. The plan status sensor, which sees every record change whoever made it, then adds
the diff to the recording run's log: the page the reviewer opened shows the data they approve.
The recording run carries the plan's id as a tag; once the diff is posted, a second tag says so,
so a later change of the plan's status never posts it twice. Dagster's means for both are in
compat.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import DagsterInstance

from mesh_dagster.dagster.compat import post_to_run, runs_tagged, tag_run

PLAN_ID_TAG = "mesh/plan_id"  # on a plan_<env> run: the id of the plan it recorded
DIFF_POSTED_TAG = "mesh/data_diff_posted"  # on a plan_<env> run: its plan's data diff is in its log


def mark_plan_run(instance: DagsterInstance, run_id: str, plan_id: str, shows_diff: bool) -> None:
    """Tag the `plan_<env>` run `run_id` with the plan it recorded (where its diff will be posted);
    `shows_diff`: its own metadata already shows a diff (one a prod plan reuses from a dev plan),
    which is then never posted again."""
    tag_run(instance, run_id, {PLAN_ID_TAG: plan_id, **({DIFF_POSTED_TAG: "true"} if shows_diff else {})})


def post_data_diff(instance: DagsterInstance, environment: str, plan_id: str, metadata: Mapping[str, Any]) -> int:
    """Add the plan's data diff (`metadata`, as reviews.data_diff_metadata gives it) to the log of
    each `plan_<env>` run that recorded `plan_id` and has not shown it yet; how many got it."""
    runs = runs_tagged(instance, f"plan_{environment}", {PLAN_ID_TAG: plan_id})
    posted = 0
    for run in runs:
        if run.tags.get(DIFF_POSTED_TAG) == "true":
            continue
        message = (f"Data diff of plan {plan_id[:8]}, computed once its apply built the new tables: "
                   "how the new data differs from what the environment served")
        if post_to_run(instance, run, message, metadata):
            tag_run(instance, run.run_id, {DIFF_POSTED_TAG: "true"})
            posted += 1
    return posted
