"""Re-stamping: telling Dagster about data that exists without recomputing it.

Dagster marks every materialized partition of an asset stale when its code version (our snapshot
fingerprint) changes. But a metadata-only or indirect non-breaking change keeps the physical table
and its intervals — the plan reuses that data — and a dev environment starts out reusing prod's
tables. For those partitions we write a materialization event carrying the new code version and
the *unchanged* data version, with the provenance of the previous event (or the parents' current
events when there is none), so Dagster shows them fresh and nothing downstream looks changed.

Which partitions: those whose interval the state store records for the model's current version
(they hold the data), plus partitions outside the model's start/end (empty by definition) once
the model has data or Dagster has seen them. Partitions of a new version hold nothing and stay stale until
materialized — exactly what the change would recompute.
"""


import hashlib
import json
from typing import Iterator

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    DefaultSensorStatus,
    OpExecutionContext,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    job,
    op,
    sensor,
)
from dagster._core.definitions.data_version import (
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)
from dagster._core.events import DagsterEventType

from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.core.intervals import Interval
from mesh_dagster.core.plan import ALL_TIME
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.partitions import keys_in, partition_window, to_ms
from mesh_dagster.dagster.versions import data_version, version_of

MATERIALIZATION = DagsterEventType.ASSET_MATERIALIZATION


class Stamper:
    """Finds the partitions to re-stamp for one environment's assets and builds their events."""

    def __init__(self, graph: ProjectGraph, partitions: dict, state, instance: DagsterInstance):
        self.graph = graph
        self.partitions = partitions  # IntervalUnit -> TimeWindowPartitionsDefinition
        self.state = state
        self.instance = instance

    def pending(self, names: list[str] | None = None) -> dict[str, list[tuple[str, bool]]]:
        """Model name -> (partition key, holds data) still carrying another code version."""
        models = [a for a in self.graph.materializable if names is None or a.name in names]
        present = self._present(models)
        out: dict[str, list[tuple[str, bool]]] = {}
        for asset in models:
            covered, outside = self._candidates(asset, present.get((asset.name, asset.version), []))
            if not covered and not outside:
                continue
            latest = self._latest_tags(asset, [*covered, *outside], [CODE_VERSION_TAG])
            todo = [(k, True) for k in covered if latest.get(k, {}).get(CODE_VERSION_TAG) != asset.fingerprint]
            # outside the model's lifetime: empty by definition, stamped once the model has data
            todo += [(k, False) for k in outside
                     if (latest[k].get(CODE_VERSION_TAG) != asset.fingerprint if k in latest else bool(covered))]
            if todo:
                out[asset.name] = todo
        return out

    def suspects(self, confirmed: dict[str, str]) -> list[str]:
        """Models that may need stamps: a fingerprint not yet confirmed as fully stamped, or data
        in the state store that Dagster never saw materialized (e.g. computed by `mesh run`).
        Cheap: no event is read, so a sensor can ask every minute."""
        models = self.graph.materializable
        present = self._present(models)
        out = []
        for asset in models:
            if confirmed.get(asset.name) != asset.fingerprint:
                out.append(asset.name)
                continue
            covered, outside = self._candidates(asset, present.get((asset.name, asset.version), []))
            if covered and not {*covered, *outside} <= set(
                    self.instance.get_materialized_partitions(AssetKey(list(asset.key)))):
                out.append(asset.name)
        return out

    def _present(self, models: list[ModelAsset]) -> dict[tuple[str, str], list[Interval]]:
        return self.state.get_intervals([(a.name, a.version) for a in models if a.version])

    def events(self, pending: dict[str, list[tuple[str, bool]]],
               limit: int | None = None) -> Iterator[AssetMaterialization]:
        """Events in DAG order. Consume them as they come: a child's provenance points at its
        parents' latest events, which must include the parents' new stamps."""
        emitted = 0
        for asset in self.graph.materializable:
            todo = pending.get(asset.name)
            if not todo:
                continue
            if limit is not None and emitted >= limit:
                return
            todo = todo if limit is None else todo[: limit - emitted]
            yield from self._stamps(asset, todo)
            emitted += len(todo)

    def _stamps(self, asset: ModelAsset, todo: list[tuple[str, bool]]) -> Iterator[AssetMaterialization]:
        key = AssetKey(list(asset.key))
        parents = [AssetKey(list(d)) for d in asset.deps]
        input_tags = [t for p in parents for t in (get_input_data_version_tag(p), get_input_event_pointer_tag(p))]
        previous = self._latest_tags(asset, [k for k, _ in todo], [DATA_VERSION_TAG, *input_tags])
        current = self._parents_latest(parents)
        pdef = self.partitions[asset.unit]
        for partition, holds_data in todo:
            before = previous.get(partition, {})
            provenance = {t: before[t] for t in input_tags if t in before}
            if len(provenance) != len(input_tags):
                provenance = current
            yield AssetMaterialization(
                asset_key=key,
                partition=partition,
                description="Re-stamped: this data is reused by the current version, not recomputed"
                if holds_data else "Re-stamped: outside the model's start/end, nothing to compute",
                metadata={"mesh/outcome": "restamped", "mesh/version": asset.version or "",
                          "mesh/change": asset.change, "mesh/physical_table": asset.table or ""},
                tags={
                    CODE_VERSION_TAG: asset.fingerprint,
                    DATA_VERSION_TAG: self._data_version(asset, partition, holds_data, before.get(DATA_VERSION_TAG),
                                                         pdef),
                    DATA_VERSION_IS_USER_PROVIDED_TAG: "true",
                    **provenance,
                },
            )

    def _data_version(self, asset: ModelAsset, partition: str, holds_data: bool, before: str | None, pdef) -> str:
        version = asset.version or ""
        if before is not None and version_of(before) == version:
            return before  # same table, same data: keep the version its children saw
        if not holds_data:
            return data_version(version, None)
        return data_version(version, ALL_TIME if asset.is_timeless else partition_window(pdef, partition))

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

    def _latest_tags(self, asset: ModelAsset, partitions: list[str], tag_keys: list[str]) -> dict[str, dict[str, str]]:
        """Tags of the latest materialization of each partition (partitions never seen are absent)."""
        if not partitions:
            return {}
        key = AssetKey(list(asset.key))
        ids = self.instance.event_log_storage.get_latest_storage_id_by_partition(key, MATERIALIZATION, set(partitions))
        wanted = set(tag_keys)
        out: dict[str, dict[str, str]] = {}
        storage_ids = sorted(ids.values())
        for i in range(0, len(storage_ids), 500):
            chunk = storage_ids[i:i + 500]
            records = self.instance.fetch_materializations(AssetRecordsFilter(asset_key=key, storage_ids=chunk),
                                                           limit=len(chunk)).records
            for record in records:
                materialization = record.asset_materialization
                if materialization is not None and materialization.partition is not None:
                    out[materialization.partition] = {k: v for k, v in (materialization.tags or {}).items()
                                                      if k in wanted}
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
            tags[get_input_event_pointer_tag(parent)] = str(event.storage_id)
            tags[get_input_data_version_tag(parent)] = version or "INITIAL"
        return tags


def pending_digest(pending: dict[str, list[tuple[str, bool]]], graph: ProjectGraph) -> str:
    """Identifies one set of outstanding stamps (a sensor's run key)."""
    h = hashlib.sha1()
    for name in sorted(pending):
        h.update(f"{name}:{graph.assets[name].fingerprint}:{len(pending[name])}:{pending[name][0][0]}:"
                 f"{pending[name][-1][0]};".encode())
    return h.hexdigest()[:16]


STAMP_LIMIT = 20000  # events per run; what is left is stamped by the next run


def stamp_job(graph: ProjectGraph, partitions: dict):
    """`restamp_<env>`: write the stamps (launched by the sensor, or by hand after a change)."""
    environment = graph.environment

    @op(name=f"restamp_{environment}_partitions", out={}, required_resource_keys={"mesh"},
        description="Mark partitions whose data the current versions reuse as materialized, without recomputing.")
    def _restamp(context: OpExecutionContext):
        state = context.resources.mesh.get_context().state
        stamper = Stamper(graph, partitions, state, context.instance)
        pending = stamper.pending()
        total = sum(len(v) for v in pending.values())
        context.log.info(f"{total} partition(s) to re-stamp in {len(pending)} model(s)" if total
                         else "Every partition with data already carries its current code version")
        yield from stamper.events(pending, STAMP_LIMIT)

    @job(name=f"restamp_{environment}", tags={"mesh/environment": environment, "mesh/restamp": "true"},
         description=f"Re-stamp reused data of environment '{environment}' (no recomputation).")
    def _job():
        _restamp()

    return _job


def stamp_sensor(graph: ProjectGraph, partitions: dict, job, project_dir: str, gateway: str | None,
                 state_url: str | None, running: bool):
    """Launches the re-stamp job whenever some reused data carries an outdated code version."""
    from mesh_dagster.context import Context

    @sensor(name=f"restamp_{graph.environment}_sensor", job=job, minimum_interval_seconds=60,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description="Keeps Dagster in step with the state store: data a plan reuses (or that `mesh` computed) "
                        "shows as materialized under the current code version.")
    def _sensor(context: SensorEvaluationContext):
        confirmed = json.loads(context.cursor) if context.cursor else {}
        ctx = Context(project_dir, gateway, state_url=state_url)
        try:
            stamper = Stamper(graph, partitions, ctx.state, context.instance)
            suspects = stamper.suspects(confirmed)
            pending = stamper.pending(suspects) if suspects else {}
        finally:
            ctx.close()
        confirmed = {n: a.fingerprint for n, a in graph.assets.items()
                     if confirmed.get(n) == a.fingerprint or (n in suspects and n not in pending)}
        context.update_cursor(json.dumps(confirmed, sort_keys=True))
        if not pending:
            return SkipReason("Nothing to re-stamp")
        return RunRequest(run_key=pending_digest(pending, graph))

    return _sensor
