"""Re-stamp runs and the sensor that requests them (what to stamp: stamps.py).

A re-stamp run is a run of the model assets tagged `mesh/restamp=true`: its steps compute
nothing; each yields the model's unchanged data version over the run's range (or, for a model
without partitions, once), so Dagster writes the materializations with the current code version
and input provenance itself, and then the verdicts that hold on that data as its checks' results
(verdicts.py), so a re-stamp never erases an audit's verdict.

They are bookkeeping, not work: they select no checks (nothing is planned that could show as
skipped), and are tagged so (`mesh/restamp=true`, `mesh/environment=<env>`); the Runs page shows
them "launched by restamp_<env>_sensor". They stay in its default view: Dagster 1.13 hides a run
from it only when the run belongs to a backfill (`dagster/backfill`), and no backfill exists for a
re-stamp (a sensor can launch one only through a private constructor, `RunRequest.
for_asset_graph_subset`), so that tag would link to nothing. Nor are they runless events: a
sensor's asset events, like `DagsterInstance.report_runless_asset_event`, are stored one at a time
(19 a second on the embedded SQLite instance of this busy 2-core machine: two minutes for the
example's 2,521 partitions), while a run's events go to the event log in batches.

A run of this code location that computed a version the environment does not serve yet (a change
materialized without promote_<env>) is the exception: its few partitions are stamped back with
what the environment serves by runless events of the sensor (stamps.Stamper.served_events).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from dagster import (
    AssetCheckEvaluation,
    AssetExecutionContext,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from mesh_dagster.context import Context
from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.dagster.compat import latest_check_metadata
from mesh_dagster.dagster.mapping.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.mapping.outcomes import JobFailed, NothingComputed, materialization
from mesh_dagster.dagster.mapping.partitions import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from mesh_dagster.dagster.mapping.plan_check import PLAN_LINE, plan_check_key, plan_evaluation, plan_verdict
from mesh_dagster.dagster.restamp.stamps import Stamper
from mesh_dagster.dagster.restamp.verdicts import verdict_evaluations

RESTAMP_TAG = "mesh/restamp"  # run tag: the run re-stamps the selected models over its range, computing nothing
ENVIRONMENT_TAG = "mesh/environment"  # the environment whose assets a run writes (as the promote and plan jobs say)


@dataclass
class RestampRun:
    """One re-stamp run: `names` (DAG order) over partitions `first`..`last` of `unit`, and the
    models without partitions (`whole`), once (a run of these alone has no `unit`)."""

    unit: IntervalUnit | None
    names: tuple[str, ...]  # partitioned models, over the range
    first: str = ""
    last: str = ""
    last_index: int = -1
    whole: tuple[str, ...] = ()  # models without partitions, re-stamped once

    @property
    def selected(self) -> tuple[str, ...]:
        return self.whole + self.names

    def tags(self, environment: str) -> dict[str, str]:
        tags = {RESTAMP_TAG: "true", ENVIRONMENT_TAG: environment}
        if self.unit is not None:
            tags.update({ASSET_PARTITION_RANGE_START_TAG: self.first, ASSET_PARTITION_RANGE_END_TAG: self.last})
        return tags


def restamp_runs(stamper: Stamper, pending: dict[str, list[tuple[str, bool]]], whole: list[str]) -> list[RestampRun]:
    """The runs writing `pending` (partitioned: one per interval unit, set of models and contiguous
    range of partitions sharing that set, as a run's range applies to each model it selects) and
    `whole` (the models without partitions: one run)."""
    out: list[RestampRun] = []
    for unit, pdef in stamper.partitions.items():
        names = [a.name for a in stamper.graph.partitioned if a.unit == unit and a.name in pending]
        if not names:
            continue
        all_keys = pdef.get_partition_keys()
        index = {k: i for i, k in enumerate(all_keys)}
        wanted: dict[int, list[str]] = {}
        for name in names:
            for key, _ in pending[name]:
                wanted.setdefault(index[key], []).append(name)
        group: RestampRun | None = None
        for i in sorted(wanted):
            selected = tuple(wanted[i])
            key = all_keys[i]
            if group is not None and group.names == selected and group.last_index == i - 1:
                group.last, group.last_index = key, i
            else:
                group = RestampRun(unit, selected, key, key, i)
                out.append(group)
    if whole and out:  # with the first ranged run: Dagster orders the steps, parents first
        out[0].whole = tuple(whole)
    elif whole:
        out.append(RestampRun(None, (), whole=tuple(whole)))
    return out


def pending_digest(pending: dict[str, list[tuple[str, bool]]], whole: list[str], graph: ProjectGraph,
                   latest_ids: dict[str, int]) -> str:
    """Identifies one set of outstanding stamps (a sensor's run key). The latest event ids of the
    models and their parents are part of it: the same partitions can need stamps again once a
    parent's data has moved on (or a change is reverted: the same fingerprint is stamped again,
    over the reverted variant's events), but a failed re-stamp is not retried until something
    changes. Dagster never launches a run key a sensor requested before."""
    h = hashlib.sha1()
    for name in sorted(pending):
        asset = graph.assets[name]
        ids = ",".join(str(latest_ids.get(n, -1)) for n in (name, *asset.parents))
        h.update(f"{name}:{asset.fingerprint}:{len(pending[name])}:{pending[name][0][0]}:"
                 f"{pending[name][-1][0]}:{ids};".encode())
    for name in sorted(whole):  # its latest event too: a revert stamps the same fingerprint again
        h.update(f"{name}:{graph.assets[name].fingerprint}:{latest_ids.get(name, -1)}:whole;".encode())
    return h.hexdigest()[:16]


RUNLESS_PER_TICK = 500  # runless events are stored one at a time (about 20 a second): a tick stays short


def tick_share(found: dict[str, list[str | None]]) -> tuple[dict[str, list[str | None]], set[str]]:
    """What one tick stamps of `found` (whole models, at most RUNLESS_PER_TICK partitions) and the
    models left for later ticks (they stay unconfirmed, so the next tick looks at them again)."""
    share: dict[str, list[str | None]] = {}
    left = RUNLESS_PER_TICK
    for name, keys in found.items():
        if left <= 0:
            break
        share[name] = keys[:left]
        left -= len(share[name])
    return share, {n for n, keys in found.items() if len(share.get(n, ())) < len(keys)}


def plan_evaluations(graph: ProjectGraph, instance: DagsterInstance,
                     stamped: Collection[str] = ()) -> list[AssetCheckEvaluation]:
    """The plan check's verdict on each model whose verdict moved since its last evaluation (a
    promotion, an apply elsewhere, a code change: the location shows the plan it loaded), and on
    the models `stamped` by this tick's runless events (a check's status is that of its asset's
    latest materialization: reported after them, the verdict stays shown)."""
    assets = graph.materializable
    shown = latest_check_metadata(instance, [plan_check_key(a) for a in assets]) or {}
    out = []
    for asset in assets:
        verdict = plan_verdict(asset)
        if asset.name in stamped or shown.get(plan_check_key(asset), {}).get(PLAN_LINE) != verdict.metadata[PLAN_LINE]:
            out.append(plan_evaluation(asset, verdict))
    return out[:RUNLESS_PER_TICK]


def is_restamp(tags: Mapping[str, str]) -> bool:
    return tags.get(RESTAMP_TAG) == "true"


def restamp_results(context: AssetExecutionContext, graph: ProjectGraph, partitions: dict, mesh_context: Context,
                    asset: ModelAsset) -> Iterator:
    """The step of a re-stamp run (`mesh/restamp=true`): one result over the run's range (or once,
    without partitions) with the model's unchanged data version, then the verdicts that hold on
    that data. Refused when the environment does not serve the model's current version, or part
    of the range holds no data of it: that must be promoted, or computed, not stamped."""
    stamper = Stamper(graph, partitions, mesh_context, context.instance)
    keys = list(context.partition_keys) if asset.is_partitioned else []
    try:
        if not stamper.serves(asset):
            raise JobFailed(f"Cannot re-stamp {asset.name}: '{graph.environment}' does not serve its current "
                            f"version yet (promote_{graph.environment} does that).")
        missing = stamper.unstampable(asset, keys) if asset.is_partitioned else \
            ([] if asset.name in stamper.whole() else ["all time"])
        if missing:
            raise JobFailed(
                f"Cannot re-stamp {asset.name} for {missing[0]}{' - ' + missing[-1] if len(missing) > 1 else ''}: "
                f"{len(missing)} partition(s) hold no data of its current version. Materialize them instead "
                "(a run without the mesh/restamp tag).")
        built_on = stamper.range_built_on(asset, keys) if asset.is_partitioned else stamper.whole_built_on(asset)
        yield materialization(asset, NothingComputed.RESTAMPED, built_on=built_on)
        yield from verdict_evaluations(mesh_context, context.instance, asset,
                                    partitions.get(asset.unit) if asset.is_partitioned else None, keys)
        yield plan_evaluation(asset)  # a check keeps its verdict on the newest materialization too
    except MeshError as e:
        raise JobFailed(str(e)) from None
    context.log.info(f"{asset.name}: {len(keys) or 1} partition(s) re-stamped under its current code version")


IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def run_in_flight(instance: DagsterInstance, keys: set[AssetKey]) -> str | None:
    """The id of a run not finished yet that materializes (or re-stamps) some of `keys`."""
    for record in instance.get_run_records(filters=RunsFilter(statuses=IN_FLIGHT), limit=500):
        run = record.dagster_run
        if keys.intersection(run.asset_selection or ()):
            return run.run_id
    return None


def read_cursor(cursor: str | None) -> tuple[dict[str, str], dict[str, int]]:
    """(fingerprints confirmed as fully stamped, latest event id per model at the last tick)."""
    data = json.loads(cursor) if cursor else {}
    if not isinstance(data, dict) or "confirmed" not in data:
        return {}, {}  # none yet, or written by an earlier release: check everything once
    return dict(data["confirmed"]), {k: int(v) for k, v in data.get("seen", {}).items()}


def stamp_sensor(graph: ProjectGraph, partitions: dict, project_dir: str, gateway: str | None,
                 state_url: str | None, running: bool, repos: Sequence[str] = ()):
    """Launches re-stamp runs whenever data the environment serves carries an outdated code version."""
    keys = {a.asset_key for a in graph.materializable}

    @sensor(name=f"restamp_{graph.environment}_sensor", target=AssetSelection.assets(*sorted(keys, key=str)),
            minimum_interval_seconds=graph.sensor_interval_s,  # 30 s by default: Dagster's own default
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description="Keeps Dagster in step with what the environment serves: data its views point at (computed "
                        "by a plan, `mesh`, or another environment) shows as materialized under the current code "
                        "version, with the audit verdicts that hold on it.")
    def _sensor(context: SensorEvaluationContext):
        busy = run_in_flight(context.instance, keys)
        if busy is not None:
            # stamping data a run is still writing events for would race it (and duplicate its events)
            return SkipReason(f"Run {busy} is writing to these assets; re-stamping waits for it to finish")
        confirmed, seen = read_cursor(context.cursor)
        ctx = Context(project_dir, gateway, state_url=state_url, repos=repos)
        try:
            if graph.environment != PROD and ctx.state.environments.get_environment(graph.environment) is None:
                return SkipReason(f"Environment '{graph.environment}' does not exist yet: nothing of it to show "
                                  f"until it is planned or promoted")
            stamper = Stamper(graph, partitions, ctx, context.instance)
            suspects = stamper.suspects(confirmed, seen)
            whole = stamper.whole()
            pending = stamper.pending(suspects.names, whole) if suspects.names or whole else {}
            runs = restamp_runs(stamper, pending, whole)
            shown, later = tick_share(stamper.shown_otherwise(suspects.names))
            served = [*stamper.served_events(shown), *plan_evaluations(graph, context.instance, set(shown))]
        finally:
            ctx.close()
        confirmed = {n: token for n, token in suspects.tokens.items()
                     if confirmed.get(n) == token or (n in suspects.names and n not in pending and n not in later)}
        context.update_cursor(json.dumps({"confirmed": confirmed, "seen": suspects.latest_ids}, sort_keys=True))
        if not runs and not served:
            return SkipReason("Nothing to re-stamp")
        digest = pending_digest(pending, whole, graph, {**suspects.latest_ids, **stamper.whole_ids})
        return SensorResult(asset_events=served, run_requests=[
            RunRequest(run_key=f"{digest}:{i}", tags=run.tags(graph.environment),
                       asset_selection=[graph.assets[n].asset_key for n in run.selected], asset_check_keys=[])
            for i, run in enumerate(runs)])

    return _sensor
