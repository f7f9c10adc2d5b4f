"""Tiny helpers to write projects on disk for tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.time.dates import now_ms

CONFIG = """model_defaults:
  dialect: spark
  start: 2020-01-01
  cron: '@daily'
"""


def write_project(root: Path, files: dict[str, str], config: str = CONFIG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(config)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def record_plan(plan: Plan, state, finalize: bool = True) -> None:
    """Apply a plan to the state store only, as if every backfill succeeded (no Spark);
    `finalize=False` leaves it as an apply killed before its views moved."""
    state.snapshots.push_snapshots(plan.new_snapshots)
    items = []
    for name, bf in plan.backfills.items():
        snap = plan.snapshots[name]
        for interval in bf.intervals:
            items.append((name, snap.version, *(ALL_TIME if bf.full_refresh and interval == ALL_TIME else interval)))
    if items:
        state.intervals.add_intervals(items)
    state.environments.promote_environment(plan.target_environment(None if plan.is_prod else now_ms() + 10**9))
    if finalize:
        state.environments.finalize_environment(plan.environment, plan.plan_id)


def applied_example(dest: Path, finalize: bool = True) -> Path:
    """A copy of the quickstart project whose first plan (execution time 2025-06-20) is recorded
    in its state store as applied (`record_plan`: no Spark)."""
    from bad_input.harness import copy_example

    from mesh_dagster.context import Context

    root = copy_example(dest)
    ctx = Context(root)
    try:
        record_plan(ctx.plans.plan(execution_time="2025-06-20"), ctx.state, finalize=finalize)
    finally:
        ctx.close()
    return root
