"""Re-stamping: telling Dagster about data that exists without recomputing it.

Dagster marks every materialized partition of an asset stale when its code version (our snapshot
fingerprint) changes. But a metadata-only or indirect non-breaking change keeps the physical table
and its intervals — the plan reuses that data — and a dev environment starts out reusing prod's
tables. Those partitions are re-stamped by a Dagster run of the model assets themselves, tagged
`mesh/restamp=true` and ranged over the partitions (`dagster/asset_partition_range_start/end`):
in that mode the asset body computes nothing and yields, per selected model, one
`MaterializeResult` with the *unchanged* data version (the physical version). Dagster writes one
materialization per partition with the new code version and the input provenance itself, so
the partitions show fresh and nothing downstream looks changed — through public API only, and
a ranged run's events go to the event log in batches where the storage supports it (Postgres).

The same holds one step later: once a parent's new version is materialized, a child that kept its
version (the parent change was non-breaking for it) would look stale, its provenance pointing at
the parent's old data. Each event records the parent versions its data stands on (`BUILT_ON`);
a partition built on an older parent version whose current version now covers the same window is
re-stamped against the parent's new events. A partition computed from the parent's *current*
version is left to Dagster's own judgement, so real staleness (a child computed before its
parent) still shows.

The `restamp_<env>_sensor` finds the partitions (cheaply, see `Stamper.suspects`) and requests
one ranged run per interval unit, set of models and contiguous range of partitions.

Which partitions: those whose interval the state store records for the model's current version
(they hold the data), plus partitions outside the model's start/end (empty by definition) once
the model has data or Dagster has seen them. Partitions of a new version hold nothing and stay
stale until materialized — exactly what the change would recompute.
"""


from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import cast

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DataVersion,
    DefaultSensorStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from mesh_dagster.context import Context
from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.intervals import Interval
from mesh_dagster.core.plan import ALL_TIME
from mesh_dagster.core.snapshot import PROD
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.partitions import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    keys_in,
    partition_window,
    to_ms,
)
from mesh_dagster.dagster.versions import BUILT_ON, CODE_VERSION_TAG, DATA_VERSION_TAG, version_of

RESTAMP_TAG = "mesh/restamp"  # run tag: the run re-stamps the selected models over its range, computing nothing


@dataclass
class LatestEvent:
    """What the stamper needs of a partition's latest materialization."""

    tags: dict[str, str]
    built_on: dict[str, str]  # see versions.BUILT_ON

    @property
    def version(self) -> str | None:
        return version_of(self.tags.get(DATA_VERSION_TAG))


@dataclass
class Suspects:
    names: list[str]  # models that may need stamps
    tokens: dict[str, str]  # model -> what confirming it as fully stamped records (see `confirmation`)
    latest_ids: dict[str, int]  # model -> id of its latest materialization event


def confirmation(asset: ModelAsset, present: list[Interval]) -> str:
    """Fingerprint and intervals of a model's current version: while both stay the same, a model
    once found fully stamped needs no new look (unless a parent's data moves)."""
    intervals = hashlib.sha1(repr(sorted(present)).encode()).hexdigest()[:12]
    return f"{asset.fingerprint}:{intervals}"


class Stamper:
    """Finds the partitions to re-stamp for one environment's assets and builds their events."""

    def __init__(self, graph: ProjectGraph, partitions: dict, context: Context, instance: DagsterInstance):
        self.graph = graph
        self.partitions = partitions  # IntervalUnit -> TimeWindowPartitionsDefinition
        self.context = context  # the project's: where the intervals the tables hold are recorded
        self.instance = instance
        # model -> partition -> physical version of its latest event, including stamps emitted here
        self._versions: dict[str, dict[str, str | None]] = {}

    def pending(self, names: list[str] | None = None) -> dict[str, list[tuple[str, bool]]]:
        """Model name -> (partition key, holds data) to stamp now, models in DAG order.

        A model's stamps count as written for the models after it (a re-stamp run yields parents
        first), so a child kept through its parent's change is found behind it in the same pass."""
        models = self._models(names)
        present = self._present(models)
        out: dict[str, list[tuple[str, bool]]] = {}
        for asset in models:
            todo = self._todo(asset, present)
            if todo:
                out[asset.name] = todo
                self._versions.setdefault(asset.name, {}).update({k: asset.version or "" for k, _ in todo})
        return out

    def runs(self, pending: dict[str, list[tuple[str, bool]]]) -> list[RestampRun]:
        """The ranged runs writing `pending`: one per interval unit, set of models and contiguous
        range of partitions sharing that set (a run's range applies to each model it selects)."""
        out: list[RestampRun] = []
        for unit, pdef in self.partitions.items():
            names = [a.name for a in self.graph.partitioned if a.unit == unit and a.name in pending]
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
        return out

    def unstampable(self, asset: ModelAsset, keys: list[str]) -> list[str]:
        """The partitions of `keys` a re-stamp must not mark materialized: they hold no data of
        the model's current version, and are not outside its start/end (empty by definition)."""
        present = self._present([asset]).get((asset.name, asset.version or ""), [])
        covered, outside = self._candidates(asset, present)
        allowed = {*covered, *outside}
        return [k for k in keys if k not in allowed]

    def range_built_on(self, asset: ModelAsset, keys: list[str]) -> dict[str, str]:
        """The parent versions the stamped range stands on: each parent whose data over the whole
        range is one version (the others are left out: Dagster's own provenance decides)."""
        out: dict[str, str] = {}
        for parent in self._parents(asset):
            mapped = {m for k in keys for m in self._parent_keys(asset, parent, k)}
            versions = set(self._parent_versions(parent, mapped).values()) if mapped else set()
            if len(versions) == 1 and None not in versions:
                out[parent.name] = cast(str, versions.pop())
        return out

    def _models(self, names: list[str] | None) -> list[ModelAsset]:
        """Partitioned models only: the others have no partitions to stamp (see ModelAsset.is_partitioned)."""
        return [a for a in self.graph.partitioned if names is None or a.name in names]

    def _parents(self, asset: ModelAsset) -> list[ModelAsset]:
        return [p for p in self.graph.parent_assets(asset) if p.is_partitioned]

    def _todo(self, asset: ModelAsset, present: dict[tuple[str, str], list[Interval]]) -> list[tuple[str, bool]]:
        """(partition key, holds data) still carrying another code version, or built on a parent
        version that the parent's newer data has since replaced."""
        # No version: nothing present (the "" key is never there).
        covered, outside = self._candidates(asset, present.get((asset.name, asset.version or ""), []))
        if not covered and not outside:
            return []
        latest = self._latest(asset, [*covered, *outside])
        code = {k: e.tags.get(CODE_VERSION_TAG) for k, e in latest.items()}
        todo = [(k, True) for k in covered if code.get(k) != asset.fingerprint]
        # outside the model's lifetime: empty by definition, stamped once the model has data
        todo += [(k, False) for k in outside if (code[k] != asset.fingerprint if k in latest else bool(covered))]
        stamped = [k for k in [*covered, *outside] if code.get(k) == asset.fingerprint]
        holds_data = set(covered)
        return todo + [(k, k in holds_data) for k in self._behind(asset, stamped, latest)]

    def suspects(self, confirmed: dict[str, str], seen: dict[str, int]) -> Suspects:
        """Models that may need stamps. Cheap — the state's intervals and one query for the latest
        event ids, nothing per partition — so a sensor can ask every minute.

        A model is suspect when its fingerprint and intervals are not those last confirmed as
        fully stamped (a change, or data computed outside Dagster, e.g. by `mesh run`), or when a
        parent has new events since `seen` (its data may have moved to a new version)."""
        models = self.graph.partitioned
        latest_ids = self._latest_ids(models)
        moved = {name for name, storage_id in latest_ids.items() if storage_id > seen.get(name, -1)}
        present = self._present(models)
        tokens = {a.name: confirmation(a, present.get((a.name, a.version or ""), [])) for a in models}
        names = [a.name for a in models if confirmed.get(a.name) != tokens[a.name] or moved.intersection(a.parents)]
        return Suspects(names, tokens, latest_ids)

    def _latest_ids(self, models: list[ModelAsset]) -> dict[str, int]:
        names = {a.asset_key: a.name for a in models}
        out = {}
        for record in self.instance.get_asset_records(list(names)):
            event = record.asset_entry.last_materialization_record
            if event is not None:
                out[names[record.asset_entry.asset_key]] = event.storage_id
        return out

    def _present(self, models: list[ModelAsset]) -> dict[tuple[str, str], list[Interval]]:
        return self.context.intervals([(a.name, a.version) for a in models if a.version])

    def _behind(self, asset: ModelAsset, keys: list[str], latest: dict[str, LatestEvent]) -> list[str]:
        """Partitions built on an older version of a parent whose current version now holds the
        data of the same time window. This model kept its version through that parent's change,
        so its data is still right: it is re-stamped against the parent's new events."""
        behind: set[str] = set()
        for parent in self._parents(asset):
            older = [k for k in keys if k not in behind
                     and latest[k].built_on.get(parent.name, parent.version) != parent.version]
            if not older:
                continue
            mapped = {k: self._parent_keys(asset, parent, k) for k in older}
            versions = self._parent_versions(parent, {m for ms in mapped.values() for m in ms})
            behind |= {k for k, ms in mapped.items() if ms and all(versions.get(m) == parent.version for m in ms)}
        return [k for k in keys if k in behind]

    def _parent_keys(self, asset: ModelAsset, parent: ModelAsset, partition: str) -> list[str]:
        """The parent's partitions in this partition's time window (Dagster's default mapping)."""
        if parent.unit == asset.unit:
            return [partition]
        window = partition_window(self.partitions[asset.unit], partition)
        return keys_in(parent.unit, self.partitions[parent.unit], [window])

    def _parent_versions(self, parent: ModelAsset, keys: set[str]) -> dict[str, str | None]:
        """Physical version of each partition's latest event (memoised, and updated by our own stamps)."""
        known = self._versions.setdefault(parent.name, {})
        missing = [k for k in keys if k not in known]
        if missing:
            found = self._latest(parent, missing)
            known.update({k: found[k].version if k in found else None for k in missing})
        return {k: known[k] for k in keys}

    def _candidates(self, asset: ModelAsset, present: list[Interval]) -> tuple[list[str], list[str]]:
        unit: IntervalUnit = asset.unit
        pdef = self.partitions[unit]
        if asset.is_timeless:
            covered = keys_in(unit, pdef, [ALL_TIME]) if present else []
            return covered, []
        covered = keys_in(unit, pdef, present)
        first = to_ms(pdef.start)
        outside: list[str] = []
        if asset.start_ms is not None and asset.start_ms > first:
            outside += keys_in(unit, pdef, [(first, unit.floor(asset.start_ms))])
        if asset.end_ms is not None:
            outside += keys_in(unit, pdef, [(unit.ceil(asset.end_ms), ALL_TIME[1])])
        return covered, outside

    def _latest(self, asset: ModelAsset, partitions: list[str]) -> dict[str, LatestEvent]:
        """The latest materialization of each partition (partitions never seen are absent).

        Through the instance's documented `fetch_materializations`, newest first: each query asks
        only for the partitions whose latest event is still unknown, so older events of a
        partition already found are read at most once per query."""
        if not partitions:
            return {}
        key = asset.asset_key
        out: dict[str, LatestEvent] = {}
        for i in range(0, len(partitions), 500):
            left = set(partitions[i:i + 500])
            while left:
                limit = min(2 * len(left), 1000)
                records = self.instance.fetch_materializations(
                    AssetRecordsFilter(asset_key=key, asset_partitions=sorted(left)), limit=limit).records
                for record in records:
                    materialization = record.asset_materialization
                    if materialization is None or materialization.partition not in left:
                        continue  # an older event of a partition already found in this page
                    left.discard(materialization.partition)
                    built_on = materialization.metadata.get(BUILT_ON)
                    out[materialization.partition] = LatestEvent(
                        dict(materialization.tags or {}),
                        dict(built_on.value) if built_on is not None and isinstance(built_on.value, dict) else {})
                if len(records) < limit:
                    break  # every partition with an event was in this page: the rest have none
        return out


def pending_digest(pending: dict[str, list[tuple[str, bool]]], graph: ProjectGraph,
                   latest_ids: dict[str, int]) -> str:
    """Identifies one set of outstanding stamps (a sensor's run key). The latest event ids of the
    models and their parents are part of it: the same partitions can need stamps again once a
    parent's data has moved on, but a failed re-stamp is not retried until something changes."""
    h = hashlib.sha1()
    for name in sorted(pending):
        asset = graph.assets[name]
        ids = ",".join(str(latest_ids.get(n, -1)) for n in (name, *asset.parents))
        h.update(f"{name}:{asset.fingerprint}:{len(pending[name])}:{pending[name][0][0]}:"
                 f"{pending[name][-1][0]}:{ids};".encode())
    return h.hexdigest()[:16]


@dataclass
class RestampRun:
    """One ranged re-stamp run: `names` (DAG order) over partitions `first`..`last` of `unit`."""

    unit: IntervalUnit
    names: tuple[str, ...]
    first: str
    last: str
    last_index: int

    @property
    def tags(self) -> dict[str, str]:
        return {RESTAMP_TAG: "true", ASSET_PARTITION_RANGE_START_TAG: self.first,
                ASSET_PARTITION_RANGE_END_TAG: self.last}


def is_restamp(tags: Mapping[str, str]) -> bool:
    return tags.get(RESTAMP_TAG) == "true"


def restamp_results(context: AssetExecutionContext, graph: ProjectGraph, partitions: dict, mesh_context: Context,
                    assets: list[ModelAsset]) -> Iterator[MaterializeResult]:
    """The body of a re-stamp run (`mesh/restamp=true`): for each selected model, parents first,
    one result over the run's range with the model's unchanged data version. Refused when part of
    the range holds no data of a model's current version: that must be computed, not stamped."""
    keys = list(context.partition_keys)
    selected = [a for a in assets if a.asset_key in context.selected_asset_keys]
    stamper = Stamper(graph, partitions, mesh_context, context.instance)
    try:
        for asset in selected:
            missing = stamper.unstampable(asset, keys)
            if missing:
                raise Failure(description=(
                    f"Cannot re-stamp {asset.name} for {missing[0]}{' - ' + missing[-1] if len(missing) > 1 else ''}: "
                    f"{len(missing)} partition(s) hold no data of its current version. Materialize them instead "
                    "(a run without the mesh/restamp tag)."))
        for asset in selected:
            yield MaterializeResult(
                asset_key=asset.asset_key,
                data_version=DataVersion(asset.version or ""),
                metadata={"mesh/outcome": "restamped", "mesh/version": asset.version or "",
                          "mesh/change": asset.change, "mesh/physical_table": asset.table or "",
                          BUILT_ON: MetadataValue.json(stamper.range_built_on(asset, keys))},
            )
    except MeshError as e:
        raise Failure(description=str(e)) from None
    context.log.info(f"{len(keys)} partition(s) re-stamped for {', '.join(a.name for a in selected)}")


SENSOR_INTERVAL_S = 30  # Dagster's default: a plan's reused data shows fresh within half a minute

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
                 state_url: str | None, running: bool):
    """Launches ranged re-stamp runs whenever some reused data carries an outdated code version."""
    keys = {a.asset_key for a in graph.materializable}
    targets = [a.asset_key for a in graph.partitioned]

    @sensor(name=f"restamp_{graph.environment}_sensor", target=AssetSelection.assets(*targets),
            minimum_interval_seconds=SENSOR_INTERVAL_S,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description="Keeps Dagster in step with the state store: data a plan reuses (or that `mesh` computed) "
                        "shows as materialized under the current code version.")
    def _sensor(context: SensorEvaluationContext):
        busy = run_in_flight(context.instance, keys)
        if busy is not None:
            # stamping data a run is still writing events for would race it (and duplicate its events)
            return SkipReason(f"Run {busy} is writing to these assets; re-stamping waits for it to finish")
        confirmed, seen = read_cursor(context.cursor)
        ctx = Context(project_dir, gateway, state_url=state_url)
        try:
            if graph.environment != PROD and not ctx.environment_exists(graph.environment):
                return SkipReason(f"Environment '{graph.environment}' does not exist yet: nothing of it to show "
                                  f"until it is planned or promoted")
            stamper = Stamper(graph, partitions, ctx, context.instance)
            suspects = stamper.suspects(confirmed, seen)
            pending = stamper.pending(suspects.names) if suspects.names else {}
            runs = stamper.runs(pending)
        finally:
            ctx.close()
        confirmed = {n: token for n, token in suspects.tokens.items()
                     if confirmed.get(n) == token or (n in suspects.names and n not in pending)}
        context.update_cursor(json.dumps({"confirmed": confirmed, "seen": suspects.latest_ids}, sort_keys=True))
        if not pending:
            return SkipReason("Nothing to re-stamp")
        digest = pending_digest(pending, graph, suspects.latest_ids)
        return SensorResult(run_requests=[
            RunRequest(run_key=f"{digest}:{i}", tags=run.tags,
                       asset_selection=[graph.assets[n].asset_key for n in run.names])
            for i, run in enumerate(runs)])

    return _sensor
