"""What applying a plan would do, read from the plan alone: the physical tables it may create and
the views it moves (what `mesh plan --explain` shows, and what the apply itself follows), and the
intervals each model still misses (the gaps promotion refuses).

Kept apart from the apply (execution/apply/) so that explaining a plan, and promotion's check of
its gaps, load none of the machinery that evaluates, writes and moves views.
"""

from __future__ import annotations

from dataclasses import dataclass

from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.intervals import Interval, format_interval_range


@dataclass(frozen=True)
class PlanExplanation:
    """What applying a plan would do to the two layers (what `plan --explain` shows)."""

    creating: list[Snapshot]  # physical tables and views the apply may have to create
    promote: list[Snapshot]  # views of the environment to create or replace
    demote: list[str]  # models whose views go away


def explain(plan: Plan) -> PlanExplanation:
    """What applying `plan` would create and which views it would move, without doing it."""
    promote, demote = changed_views(plan)
    return PlanExplanation(physical_snapshots(plan) if plan.new_snapshots else [], promote, demote)


def physical_snapshots(plan: Plan) -> list[Snapshot]:
    """Snapshots whose physical object this apply may have to create."""
    reused = {n for n, prev in plan.previous.items() if prev.version == plan.snapshots[n].version}
    names = ({s.name for s in plan.new_snapshots} - reused) | set(plan.backfills)
    return [plan.snapshots[n] for n in plan.snapshots if n in names and not plan.snapshots[n].model.kind.is_symbolic]


def changed_views(plan: Plan, replaced: Environment | None = None) -> tuple[list[Snapshot], list[str]]:
    """Views to create or replace, and model names whose views go away.

    Against a finalized record only the differences move. An unfinalized one (an apply stopped
    while moving views) may show any mix of itself and `replaced`: every view is re-created, and
    the views of every model either of them showed but the plan does not are dropped.
    """
    base = plan.base_environment
    before = base.snapshot_by_name() if base else {}
    shown_before = set(base.promoted) if base else set()
    settled = base is not None and base.finalized_ts is not None and replaced is None
    if replaced is not None:
        shown_before |= set(replaced.promoted)
    promote = [
        plan.snapshots[n] for n in plan.promoted
        if not settled or n not in shown_before or before.get(n) is None
        or before[n].identifier != plan.snapshots[n].identifier
    ]
    demote = sorted(shown_before - set(plan.promoted))
    return promote, demote


@dataclass
class Gap:
    """Intervals a model's current version still misses before its environment can be promoted."""

    name: str
    view: str
    table: str
    intervals: list[Interval]
    unit: IntervalUnit

    def describe(self) -> str:
        if self.intervals == [ALL_TIME]:
            return "not built yet"
        return format_interval_range(self.intervals, self.unit)


def environment_gaps(plan: Plan) -> list[Gap]:
    """The plan's remaining backfill, model by model, parents first."""
    return [
        Gap(name, plan.view(name), snap.table_name, bf.intervals, snap.model.interval_unit)
        for name, bf in plan.backfills.items()
        for snap in [plan.snapshots[name]]
    ]
