"""Re-stamping: telling Dagster about data that exists without recomputing it.

Dagster marks every materialized partition of an asset stale when its code version (our snapshot
fingerprint) changes. But a metadata-only or indirect non-breaking change keeps the physical table
and its intervals — the plan reuses that data — and a dev environment starts out reusing prod's
tables. For those partitions we write a materialization event carrying the new code version and
the *unchanged* data version, so Dagster shows them fresh and nothing downstream looks changed.

The same holds one step later: once a parent's new version is materialized, a child that kept its
version (the parent change was non-breaking for it) would look stale, its provenance pointing at
the parent's old data. Each event records the parent versions its data stands on (`BUILT_ON`);
a partition built on an older parent version whose current version now covers the same window is
re-stamped against the parent's new events. A partition computed from the parent's *current*
version is left to Dagster's own judgement, so real staleness (a child computed before its
parent) still shows.

Which partitions: those whose interval the state store records for the model's current version
(they hold the data), plus partitions outside the model's start/end (empty by definition) once
the model has data or Dagster has seen them. Partitions of a new version hold nothing and stay
stale until materialized — exactly what the change would recompute.
"""


import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    MetadataValue,
    OpExecutionContext,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    job,
    op,
    sensor,
)

from mesh_dagster.context import Context
from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.core.intervals import Interval
from mesh_dagster.core.plan import ALL_TIME
from mesh_dagster.core.snapshot import PROD
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.partitions import keys_in, partition_window, to_ms
from mesh_dagster.dagster.versions import (
    BUILT_ON,
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    input_data_version_tag,
    input_event_pointer_tag,
    version_of,
)


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
        """Model name -> (partition key, holds data) to stamp now, without emitting anything."""
        models = self._models(names)
        present = self._present(models)
        return {a.name: todo for a in models if (todo := self._todo(a, present))}

    def stamp(self, names: list[str] | None = None, limit: int | None = None) -> Iterator[AssetMaterialization]:
        """The stamps, model by model in DAG order. Each model's partitions are found only after
        its parents' stamps were emitted, so a child sees its parents' new data; consume the
        events as they come, since a child's provenance points at its parents' latest events."""
        models = self._models(names)
        present = self._present(models)
        emitted = 0
        for asset in models:
            if limit is not None and emitted >= limit:
                return
            todo = self._todo(asset, present)
            todo = todo if limit is None else todo[: limit - emitted]
            if todo:
                yield from self._stamps(asset, todo)
                emitted += len(todo)

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
        names = {AssetKey(list(a.key)): a.name for a in models}
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

    def _stamps(self, asset: ModelAsset, todo: list[tuple[str, bool]]) -> Iterator[AssetMaterialization]:
        """Stamps whose provenance points at the parents' latest events: the stamped data is
        right for the parents' current data, since this model kept its version through their changes."""
        key = AssetKey(list(asset.key))
        previous = self._latest(asset, [k for k, _ in todo])
        provenance = self._parents_latest([AssetKey(list(d)) for d in asset.deps])
        parents = self._parents(asset)
        version = asset.version or ""
        for partition, holds_data in todo:
            built_on = self._built_on(asset, parents, partition, previous.get(partition))
            self._versions.setdefault(asset.name, {})[partition] = version
            yield AssetMaterialization(
                asset_key=key,
                partition=partition,
                description="Re-stamped: this data is reused by the current version, not recomputed"
                if holds_data else "Re-stamped: outside the model's start/end, nothing to compute",
                metadata={"mesh/outcome": "restamped", "mesh/version": version,
                          "mesh/change": asset.change, "mesh/physical_table": asset.table or "",
                          BUILT_ON: MetadataValue.json(built_on)},
                tags={
                    CODE_VERSION_TAG: asset.fingerprint,
                    DATA_VERSION_TAG: version,
                    DATA_VERSION_IS_USER_PROVIDED_TAG: "true",
                    **provenance,
                },
            )

    def _built_on(self, asset: ModelAsset, parents: list[ModelAsset], partition: str,
                  before: LatestEvent | None) -> dict[str, str]:
        """The parent versions the stamped data stands on: each parent's version in this window
        when all of it is one version, else what the previous event said."""
        out: dict[str, str] = {}
        for parent in parents:
            keys = self._parent_keys(asset, parent, partition)
            versions = set(self._parent_versions(parent, set(keys)).values()) if keys else set()
            if len(versions) == 1 and None not in versions:
                out[parent.name] = cast(str, versions.pop())  # None was excluded above
            elif before is not None and parent.name in before.built_on:
                out[parent.name] = before.built_on[parent.name]
        return out

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
        key = AssetKey(list(asset.key))
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

    def _parents_latest(self, parents: list[AssetKey]) -> dict[str, str]:
        """Provenance pointing at each parent's latest event (what a run would record now)."""
        tags: dict[str, str] = {}
        records = {r.asset_entry.asset_key: r for r in self.instance.get_asset_records(parents)} if parents else {}
        for parent in parents:
            record = records.get(parent)
            event = record.asset_entry.last_materialization_record if record else None
            if event is None:
                continue
            materialization = event.event_log_entry.asset_materialization
            version = (materialization.tags or {}).get(DATA_VERSION_TAG) if materialization else None
            tags[input_event_pointer_tag(parent)] = str(event.storage_id)
            tags[input_data_version_tag(parent)] = version or "INITIAL"
        return tags


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


STAMP_LIMIT = 20000  # events per run; what is left is stamped by the next run


def stamp_job(graph: ProjectGraph, partitions: dict):
    """`restamp_<env>`: write the stamps (launched by the sensor, or by hand after a change)."""
    environment = graph.environment

    @op(name=f"restamp_{environment}_partitions", out={}, required_resource_keys={"mesh"},
        description="Mark partitions whose data the current versions reuse as materialized, without recomputing.")
    def _restamp(context: OpExecutionContext):
        stamper = Stamper(graph, partitions, context.resources.mesh.get_context(), context.instance)
        stamped: Counter[AssetKey] = Counter()
        for event in stamper.stamp(None, STAMP_LIMIT):
            stamped[event.asset_key] += 1
            yield event
        context.log.info(f"{sum(stamped.values())} partition(s) re-stamped in {len(stamped)} model(s)" if stamped
                         else "Every partition with data already carries its current code version")

    @job(name=f"restamp_{environment}", tags={"mesh/environment": environment, "mesh/restamp": "true"},
         description=f"Re-stamp reused data of environment '{environment}' (no recomputation).")
    def _job():
        _restamp()

    return _job


IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def run_in_flight(instance: DagsterInstance, keys: set[AssetKey], restamp_job: str) -> str | None:
    """The id of a run not finished yet that materializes some of `keys` or re-stamps them."""
    for record in instance.get_run_records(filters=RunsFilter(statuses=IN_FLIGHT), limit=500):
        run = record.dagster_run
        if run.job_name == restamp_job or keys.intersection(run.asset_selection or ()):
            return run.run_id
    return None


def read_cursor(cursor: str | None) -> tuple[dict[str, str], dict[str, int]]:
    """(fingerprints confirmed as fully stamped, latest event id per model at the last tick)."""
    data = json.loads(cursor) if cursor else {}
    if not isinstance(data, dict) or "confirmed" not in data:
        return {}, {}  # none yet, or written by an earlier release: check everything once
    return dict(data["confirmed"]), {k: int(v) for k, v in data.get("seen", {}).items()}


def stamp_sensor(graph: ProjectGraph, partitions: dict, job, project_dir: str, gateway: str | None,
                 state_url: str | None, running: bool):
    """Launches the re-stamp job whenever some reused data carries an outdated code version."""
    keys = {AssetKey(list(a.key)) for a in graph.materializable}

    @sensor(name=f"restamp_{graph.environment}_sensor", job=job, minimum_interval_seconds=60,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description="Keeps Dagster in step with the state store: data a plan reuses (or that `mesh` computed) "
                        "shows as materialized under the current code version.")
    def _sensor(context: SensorEvaluationContext):
        busy = run_in_flight(context.instance, keys, job.name)
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
        finally:
            ctx.close()
        confirmed = {n: token for n, token in suspects.tokens.items()
                     if confirmed.get(n) == token or (n in suspects.names and n not in pending)}
        context.update_cursor(json.dumps({"confirmed": confirmed, "seen": suspects.latest_ids}, sort_keys=True))
        if not pending:
            return SkipReason("Nothing to re-stamp")
        return RunRequest(run_key=pending_digest(pending, graph, suspects.latest_ids))

    return _sensor
