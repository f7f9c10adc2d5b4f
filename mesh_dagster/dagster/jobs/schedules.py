"""Crons become schedules: at each tick, materialize the newly due partitions (what `mesh run` does).

One schedule per distinct cadence — cron, `cron_tz` and interval unit — targeting the models with
it. The schedule fires in the cron's time zone (Dagster's `execution_timezone`); partitions stay
UTC windows of the interval unit, as the intervals they show are. A tick asks the Context for
the due, missing intervals of those models and launches one ranged run per distinct range (on a
normal day: one run for yesterday). Schedules are stopped by default; start them in the UI
(Automation → Schedules) or with `definitions(..., schedules_running=True)`.
"""

import re
from collections.abc import Sequence
from typing import NamedTuple

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from mesh_dagster.context import Context, LogLines
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.time.cron import ALIASES, IntervalUnit, interval_unit, validate_cron
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.core.time.intervals import Interval, merge_intervals
from mesh_dagster.dagster.assets import SCHEDULED_TAG
from mesh_dagster.dagster.mapping.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.mapping.partitions import range_tags, to_ms


def cron_slug(cron: str) -> str:
    text = cron.lstrip("@").replace("*", "x").replace("/", "every")
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


class Cadence(NamedTuple):
    """When a group of models runs (cron in its time zone) and the unit of their partitions."""

    cron: str
    tz: str
    unit: IntervalUnit

    @property
    def slug(self) -> str:
        """`daily`, `daily_europe_paris`, `hourly_five_minute`: the cron alone in the common case,
        so schedule names stay put when a project adds a time zone to other models."""
        parts = [cron_slug(self.cron)]
        if self.tz != "UTC":
            parts.append(re.sub(r"[^A-Za-z0-9]+", "_", self.tz).strip("_").lower())
        if self.unit != interval_unit(self.cron):
            parts.append(self.unit.value)
        return "_".join(parts)

    def describe(self) -> str:
        tz = "" if self.tz == "UTC" else f" ({self.tz})"
        unit = "" if self.unit == interval_unit(self.cron) else f", {self.unit.value} intervals"
        return f"`{self.cron}`{tz}{unit}"


def cron_groups(graph: ProjectGraph) -> dict[Cadence, list[ModelAsset]]:
    groups: dict[Cadence, list[ModelAsset]] = {}
    for asset in graph.materializable:
        cadence = Cadence(validate_cron(asset.model.cron), asset.model.cron_tz or "UTC", asset.unit)
        groups.setdefault(cadence, []).append(asset)
    return groups


def run_requests(unit: IntervalUnit, assets: list[ModelAsset], pending: dict[str, list[Interval]],
                 run_key_prefix: str) -> list[RunRequest]:
    """As few ranged runs as possible without recomputing anything that is present.

    One run spans every missing interval of the group. Seeds, views and FULL models join it (they
    are built once per run whatever its range), so do the unpartitioned models (they process all
    their pending intervals, after their parents of the same run), and so does each incremental
    model whose missing intervals are exactly that span within its lifetime; any other
    incremental model gets one run per missing range of its own.

    Partitions are whole intervals: the incomplete last interval an `allow_partials` model has
    pending is left to `mesh run` (a partition run would record the whole interval as done).
    """
    ranges = {a.name: r for a in assets if (r := _whole(unit, a, pending.get(a.name, [])))}
    if not ranges:
        return []
    timed = [r for r in ranges.values() if r != [ALL_TIME]]
    if timed:
        span = (min(r[0][0] for r in timed), max(r[-1][1] for r in timed))
    else:
        latest = unit.floor(now_ms())
        span = (unit.shift(latest, -1), latest)
    main: list[ModelAsset] = []
    own: dict[Interval, list[ModelAsset]] = {}
    for asset in assets:
        missing = ranges.get(asset.name)
        if not missing:
            continue
        if (missing == [ALL_TIME] or not asset.model.kind.is_incremental or not asset.is_partitioned
                or missing == [_clip(span, asset, unit)]):
            main.append(asset)
        else:
            for interval in missing:
                own.setdefault(interval, []).append(asset)
    groups = [(span, main)] if main else []
    groups += sorted(own.items())
    return [
        RunRequest(
            run_key=f"{run_key_prefix}:{interval[0]}:{interval[1]}:{','.join(sorted(a.name for a in members))}",
            asset_selection=[a.asset_key for a in members],
            # a run of unpartitioned models alone is no run for partitions
            tags={**(range_tags(unit, interval) if any(a.is_partitioned for a in members) else {}),
                  SCHEDULED_TAG: "true"},
        )
        for interval, members in groups
    ]


def _whole(unit: IntervalUnit, asset: ModelAsset, pending: list[Interval]) -> list[Interval]:
    """`pending` merged; for a partitioned model, only its whole intervals."""
    merged = merge_intervals(pending)
    if not asset.is_partitioned or merged == [ALL_TIME]:
        return merged
    return [(start, end) for start, end in ((s, unit.floor(e)) for s, e in merged) if start < end]


def _clip(span: Interval, asset: ModelAsset, unit: IntervalUnit) -> Interval:
    low = span[0] if asset.start_ms is None else max(span[0], unit.floor(asset.start_ms))
    high = span[1] if asset.end_ms is None else min(span[1], asset.end_ms)
    return low, high


def cron_schedules(graph: ProjectGraph, project_dir: str, gateway: str | None, state_url: str | None,
                   running: bool, home: str | None = None, repos: Sequence[str] = ()) -> list[ScheduleDefinition]:
    return [cron_schedule(graph, cadence, assets, project_dir, gateway, state_url, running, home, repos)
            for cadence, assets in cron_groups(graph).items()]


def cron_schedule(graph: ProjectGraph, cadence: Cadence, assets: list[ModelAsset], project_dir: str,
                  gateway: str | None, state_url: str | None, running: bool,
                  home: str | None = None, repos: Sequence[str] = ()) -> ScheduleDefinition:
    environment = graph.environment
    slug, unit = cadence.slug, cadence.unit
    names = [a.name for a in assets]
    job = define_asset_job(
        name=f"run_{environment}_{slug}",
        selection=AssetSelection.assets(*[a.asset_key for a in assets]),
        description=f"Models of '{environment}' with cron {cadence.describe()}",
    )

    @schedule(
        name=f"run_{environment}_{slug}_schedule",
        cron_schedule=ALIASES.get(cadence.cron, cadence.cron),
        job=job,
        execution_timezone=cadence.tz,
        default_status=DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED,
        description=f"At {cadence.describe()}, materialize the due partitions of these models in '{environment}' "
                    "(what `mesh run` does).",
    )
    def _schedule(context: ScheduleEvaluationContext):
        ctx = Context(project_dir, gateway, state_url=state_url, home=home, repos=repos)
        waits = LogLines()  # what the pending intervals leave out because a signal holds it back
        try:
            when = context.scheduled_execution_time
            pending = ctx.runs.pending_intervals(environment, names, execution_time=to_ms(when) if when else None,
                                            listener=waits)
        finally:
            ctx.close()
        shown = [printable(line) for line in waits.lines]  # a signal's arguments are the project's text
        for line in shown:
            context.log.info(line)
        requests = run_requests(unit, assets, pending, f"{environment}:{slug}")
        if requests:
            return requests
        if shown:
            return SkipReason("Every due, missing interval waits for a signal:\n" + "\n".join(shown))
        return SkipReason("No model of this cron has a due, missing interval")

    return _schedule
