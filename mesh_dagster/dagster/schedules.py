"""Crons become schedules: at each tick, materialize the newly due partitions (what `mesh run` does).

One schedule per distinct cron, targeting the models with that cron. A tick asks the Context for
the due, missing intervals of those models and launches one ranged run per distinct range (on a
normal day: one run for yesterday). Schedules are stopped by default; start them in the UI
(Automation → Schedules) or with `definitions(..., schedules_running=True)`.
"""

import re

from dagster import (
    AssetKey,
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from mesh_dagster.core.cron import ALIASES, IntervalUnit, validate_cron
from mesh_dagster.core.dates import now_ms
from mesh_dagster.core.intervals import Interval, merge_intervals
from mesh_dagster.core.plan import ALL_TIME
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.partitions import range_tags, to_ms


def cron_slug(cron: str) -> str:
    text = cron.lstrip("@").replace("*", "x").replace("/", "every")
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def cron_groups(graph: ProjectGraph) -> dict[str, list[ModelAsset]]:
    groups: dict[str, list[ModelAsset]] = {}
    for asset in graph.materializable:
        groups.setdefault(validate_cron(asset.model.cron), []).append(asset)
    return groups


def run_requests(unit: IntervalUnit, assets: list[ModelAsset], pending: dict[str, list[Interval]],
                 run_key_prefix: str) -> list[RunRequest]:
    """One ranged run per distinct missing range; seeds and views ride along with the first."""
    by_range: dict[Interval, list[ModelAsset]] = {}
    timeless: list[ModelAsset] = []
    for asset in assets:
        intervals = pending.get(asset.name)
        if not intervals:
            continue
        if intervals == [ALL_TIME]:
            timeless.append(asset)
            continue
        for interval in merge_intervals(intervals):
            by_range.setdefault(interval, []).append(asset)
    if timeless and not by_range:
        latest = unit.floor(now_ms())
        by_range[(unit.shift(latest, -1), latest)] = []
    requests = []
    for i, (interval, members) in enumerate(sorted(by_range.items())):
        selected = members + (timeless if i == 0 else [])
        requests.append(RunRequest(
            run_key=f"{run_key_prefix}:{interval[0]}:{interval[1]}:{','.join(sorted(a.name for a in selected))}",
            asset_selection=[AssetKey(list(a.key)) for a in selected],
            tags={**range_tags(unit, interval), "mesh/scheduled": "true"},
        ))
    return requests


def cron_schedules(graph: ProjectGraph, project_dir: str, gateway: str | None, state_url: str | None,
                   running: bool) -> list[ScheduleDefinition]:
    return [cron_schedule(graph, cron, assets, project_dir, gateway, state_url, running)
            for cron, assets in cron_groups(graph).items()]


def cron_schedule(graph: ProjectGraph, cron: str, assets: list[ModelAsset], project_dir: str, gateway: str | None,
                  state_url: str | None, running: bool) -> ScheduleDefinition:
    from mesh_dagster.context import Context

    environment = graph.environment
    slug = cron_slug(cron)
    unit = assets[0].unit
    names = [a.name for a in assets]
    job = define_asset_job(
        name=f"run_{environment}_{slug}",
        selection=AssetSelection.assets(*[AssetKey(list(a.key)) for a in assets]),
        description=f"Models of '{environment}' with cron `{cron}`",
    )

    @schedule(
        name=f"run_{environment}_{slug}_schedule",
        cron_schedule=ALIASES.get(cron, cron),
        job=job,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED,
        description=f"At `{cron}`, materialize the due partitions of these models in '{environment}' "
                    "(what `mesh run` does).",
    )
    def _schedule(context: ScheduleEvaluationContext):
        ctx = Context(project_dir, gateway, state_url=state_url)
        try:
            when = context.scheduled_execution_time
            pending = ctx.pending_intervals(environment, names, execution_time=to_ms(when) if when else None)
        finally:
            ctx.close()
        requests = run_requests(unit, assets, pending, f"{environment}:{slug}")
        return requests or SkipReason("No model of this cron has a due, missing interval")

    return _schedule
