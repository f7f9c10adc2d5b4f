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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from dagster import AssetCheckEvaluation, AssetMaterialization, AssetRecordsFilter, DagsterInstance

from mesh_dagster.context import Context
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.intervals import Interval, intervals_cover
from mesh_dagster.dagster.mapping.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.mapping.partitions import keys_in, partition_window, to_ms
from mesh_dagster.dagster.mapping.versions import (
    BUILT_ON,
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    input_event_pointer_tag,
    is_provenance_tag,
    version_of,
)
from mesh_dagster.dagster.restamp.verdicts import verdict_evaluations


class ServedSnapshot(Protocol):
    """What the stamper reads of a snapshot an environment's record serves (the store's record)."""

    name: str
    identifier: str  # its code version in Dagster
    version: str  # its data: the physical version
    table_name: str | None


@dataclass
class LatestEvent:
    """What the stamper needs of a partition's latest materialization."""

    tags: dict[str, str]
    built_on: dict[str, str]  # see versions.BUILT_ON
    storage_id: int | None = None

    @property
    def version(self) -> str | None:
        return version_of(self.tags.get(DATA_VERSION_TAG))


@dataclass
class Suspects:
    names: list[str]  # models that may need stamps
    tokens: dict[str, str]  # model -> what confirming it as fully stamped records (see `confirmation`)
    latest_ids: dict[str, int]  # model -> id of its latest materialization event


def confirmation(asset: ModelAsset, present: list[Interval], served: str | None) -> str:
    """Fingerprint, intervals of a model's current version and what the environment serves: while
    they stay the same, a model once found fully stamped needs no new look (unless a parent's data
    moves)."""
    intervals = hashlib.sha1(repr(sorted(present)).encode()).hexdigest()[:12]
    return f"{asset.fingerprint}:{served or '-'}:{intervals}"


class Stamper:
    """Finds the partitions to re-stamp for one environment's assets and builds their events."""

    def __init__(self, graph: ProjectGraph, partitions: dict, context: Context, instance: DagsterInstance):
        self.graph = graph
        self.partitions = partitions  # IntervalUnit -> TimeWindowPartitionsDefinition
        self.context = context  # the project's: where the intervals the tables hold are recorded
        self.instance = instance
        # model -> partition -> physical version of its latest event, including stamps emitted here
        self._versions: dict[str, dict[str, str | None]] = {}
        self._served: dict[str, str] | None = None
        self._served_snapshots: dict[str, ServedSnapshot] | None = None
        self._served_intervals: dict[tuple[str, str], list[Interval]] = {}  # see `_served_present`
        self._restamped_whole: set[str] = set()
        self.whole_ids: dict[str, int] = {}  # model without partitions -> its latest event's id, read by `whole`

    @property
    def served(self) -> dict[str, str]:
        """Model -> the version (physical table) the environment's views serve: its finalized
        record; nothing for an environment that does not exist (yet)."""
        if self._served is None:
            self._served = {name: snap.version for name, snap in self.served_snapshots.items()}
        return self._served

    @property
    def served_snapshots(self) -> dict[str, ServedSnapshot]:
        """Model -> the snapshot the environment's finalized record serves (its code version is its
        identifier, its data the version's table)."""
        if self._served_snapshots is None:
            env = self.context.state.environments.served_environment(self.graph.environment)
            self._served_snapshots = {s.name: s for s in env.snapshots} if env is not None else {}
        return self._served_snapshots

    def serves(self, asset: ModelAsset) -> bool:
        """Whether the environment's views show the data of the model's current version: only then
        are its partitions stamped with the current code version. A change keeping the version
        (metadata, indirect non-breaking: the plan reuses the table the views already show) is
        stamped at once; a new version only once the environment serves it (promotion), whoever
        computed its data meanwhile: before, the environment shows the pending change."""
        return asset.version is not None and self.served.get(asset.name) == asset.version

    def whole(self) -> list[str]:
        """The models without partitions to stamp now: served at their current version, which holds
        data (a seed or view: built), while their latest materialization carries another code
        version or was built on a parent version the parent's newer data has since replaced."""
        models = [a for a in self.graph.unpartitioned if self.serves(a)]
        present = self._present(models)
        latest = self._latest_whole(models + self._parents_of(models))
        out = []
        self.whole_ids = {name: event.storage_id for name, event in latest.items() if event.storage_id is not None}
        for asset in models:
            have = present.get((asset.name, asset.version or ""), [])
            if not (intervals_cover(have, ALL_TIME) if asset.is_timeless else bool(have)):
                continue
            event = latest.get(asset.name)
            moved = [p for p in self.graph.parent_assets(asset) if event is not None and p.name in latest
                     and event.built_on.get(p.name, latest[p.name].version) != latest[p.name].version]
            if event is None or event.tags.get(CODE_VERSION_TAG) != asset.fingerprint or moved:
                out.append(asset.name)
        return out

    def whole_built_on(self, asset: ModelAsset) -> dict[str, str]:
        """The parent versions a stamp of a model without partitions stands on: those of the
        parents' latest materializations (what Dagster's provenance points at)."""
        latest = self._latest_whole(self.graph.parent_assets(asset))
        return {name: version for name, event in latest.items() if (version := event.version)}

    # -- what Dagster shows of a model whose current version the environment does not serve -------

    def shown_otherwise(self, names: Sequence[str]) -> dict[str, list[str | None]]:
        """Model -> the partitions (`[None]`: the asset, without partitions) of a model whose current
        version the environment does not serve, where Dagster shows something else than what it
        serves: the data of a version the environment does not serve, or nothing at all.

        The first come from runs of this code location: they computed the model's current version
        (materializing never moves views) and Dagster wrote the run's code version, calling them
        fresh, while a query of the environment returns the version it serves. The second come from
        a change made before Dagster saw the served data (an edit, then `mesh ui`): the served
        partitions would read missing. Both are stamped with what the environment serves
        (`served_events`), which reads stale until the environment is promoted. `names`: the
        partitioned models to look at (`suspects`); every model without partitions is looked at
        (one query)."""
        out: dict[str, list[str | None]] = {}
        unserved = [a for a in self.graph.materializable if a.version and not self.serves(a)]
        partitioned = [a for a in unserved if a.is_partitioned and a.name in names]
        present = self._present(partitioned)
        for asset in partitioned:
            computed, _ = self._candidates(asset, present.get((asset.name, asset.version or ""), []))
            served = self.served_snapshots.get(asset.name)
            version = served.version if served is not None else None
            shown = self._candidates(asset, self._served_present(asset, served))[0]
            latest = self._latest(asset, sorted({*computed, *shown}))
            keys: list[str | None] = [k for k in computed if k in latest
                                      and latest[k].tags.get(CODE_VERSION_TAG) == asset.fingerprint]
            keys += [k for k in shown if k not in keys and (k not in latest or latest[k].version != version)]
            if keys:
                out[asset.name] = keys
        latest_whole = self._latest_whole([a for a in unserved if not a.is_partitioned])
        for asset in (a for a in unserved if not a.is_partitioned):
            event, served = latest_whole.get(asset.name), self.served_snapshots.get(asset.name)
            ours = event is not None and event.tags.get(CODE_VERSION_TAG) == asset.fingerprint
            unshown = served is not None and (event is None or event.version != served.version) \
                and bool(self._served_keys(asset, served, [None]))
            if ours or unshown:
                out[asset.name] = [None]
        return out

    def served_events(self, found: dict[str, list[str | None]]
                      ) -> list[AssetMaterialization | AssetCheckEvaluation]:
        """One runless materialization per partition of `found` (see `shown_otherwise`) saying what
        the environment serves there: the latest earlier event of the version it serves, again
        (its code version, data version and provenance, as Dagster wrote them), or, never recorded
        in Dagster, that version's identifier and data version; where the served version holds no
        data, only its code version, claiming no data. Either way the partition reads stale, the
        model's current code version being another, until the environment serves it. After them,
        the audit verdicts that hold on the served data, as its checks' results (verdicts.py)."""
        out: list[AssetMaterialization | AssetCheckEvaluation] = []
        checks: list[AssetCheckEvaluation] = []
        for name, keys in found.items():
            asset = self.graph.assets[name]
            served = self.served_snapshots.get(name)
            holds = self._served_keys(asset, served, keys)
            earlier = self._events_of_version(asset, [k for k in keys if k in holds], served.version) \
                if served is not None else {}
            for key in keys:
                event = earlier.get(key)
                if event is not None:
                    tags = {k: v for k, v in event.tags.items() if is_provenance_tag(k)}
                elif served is not None and key in holds:
                    tags = {CODE_VERSION_TAG: served.identifier, DATA_VERSION_TAG: served.version,
                            DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}
                else:
                    tags = {CODE_VERSION_TAG: served.identifier if served is not None else "none"}
                out.append(self._served_event(asset, key, served, tags, key in holds))
            if served is not None and holds:
                pdef = self.partitions[asset.unit] if asset.is_partitioned else None
                checks += verdict_evaluations(self.context, self.instance, asset, pdef,
                                           [k for k in keys if k is not None and k in holds], version=served.version)
        return [*out, *checks]

    def _served_event(self, asset: ModelAsset, key: str | None, served: ServedSnapshot | None,
                      tags: dict[str, str], holds: bool) -> AssetMaterialization:
        env = self.graph.environment
        data = served if holds else None  # what the partition shows, if the served version holds data there
        what = f"version {data.version} ({data.table_name})" if data is not None else "no data here"
        return AssetMaterialization(
            asset_key=asset.asset_key, partition=key, tags=tags,
            description=f"'{env}' serves {what}: version {asset.version}, computed by a run of this code location, "
                        f"is not served until promote_{env} points the views at it",
            metadata={"mesh/outcome": "served", "mesh/version": data.version if data is not None else "",
                      "mesh/physical_table": (data.table_name or "") if data is not None else "",
                      "mesh/not_served": asset.version or ""})

    def _served_keys(self, asset: ModelAsset, served: ServedSnapshot | None,
                     keys: list[str | None]) -> set[str | None]:
        """The keys of `keys` (None: the whole asset) whose data the served version holds."""
        present = self._served_present(asset, served)
        if not asset.is_partitioned:
            return {None} if (intervals_cover(present, ALL_TIME) if asset.is_timeless else bool(present)) else set()
        covered = set(self._candidates(asset, present)[0])
        return {k for k in keys if k in covered}

    def _served_present(self, asset: ModelAsset, served: ServedSnapshot | None) -> list[Interval]:
        """The intervals the served version holds (read once: `shown_otherwise`, then `served_events`)."""
        if served is None or not served.version:
            return []
        key = (asset.name, served.version)
        if key not in self._served_intervals:
            self._served_intervals[key] = self.context.state.intervals.get_intervals([key]).get(key, [])
        return self._served_intervals[key]

    def _events_of_version(self, asset: ModelAsset, keys: list[str | None], version: str,
                           pages: int = 5) -> dict[str | None, LatestEvent]:
        """Each key's latest materialization of data `version` (newest first, at most `pages`
        pages of 1000 events: beyond them the stamp says what it knows without provenance)."""
        wanted = set(keys)
        partitions = sorted(k for k in wanted if k is not None) or None
        out: dict[str | None, LatestEvent] = {}
        cursor = None
        for _ in range(pages):
            if not wanted - set(out):
                break
            result = self.instance.fetch_materializations(
                AssetRecordsFilter(asset_key=asset.asset_key, asset_partitions=partitions), limit=1000, cursor=cursor)
            for record in result.records:
                m = record.asset_materialization
                if m is None or m.partition not in wanted or m.partition in out:
                    continue
                if version_of((m.tags or {}).get(DATA_VERSION_TAG)) == version:
                    out[m.partition] = LatestEvent(dict(m.tags or {}), {})
            if not result.has_more:
                break
            cursor = result.cursor
        return out

    def _parents_of(self, models: list[ModelAsset]) -> list[ModelAsset]:
        return list({p.name: p for a in models for p in self.graph.parent_assets(a)}.values())

    def _latest_whole(self, models: list[ModelAsset]) -> dict[str, LatestEvent]:
        names = {a.asset_key: a.name for a in models}
        out: dict[str, LatestEvent] = {}
        for record in self.instance.get_asset_records(list(names)) if names else []:
            event = record.asset_entry.last_materialization_record
            materialization = event.asset_materialization if event is not None else None
            if materialization is not None:
                built_on = materialization.metadata.get(BUILT_ON)
                out[names[record.asset_entry.asset_key]] = LatestEvent(
                    dict(materialization.tags or {}),
                    dict(built_on.value) if built_on is not None and isinstance(built_on.value, dict) else {},
                    event.storage_id if event is not None else None)
        return out

    def pending(self, names: list[str] | None = None, whole: Sequence[str] = ()) -> dict[str, list[tuple[str, bool]]]:
        """Model name -> (partition key, holds data) to stamp now, models in DAG order; `whole`: the
        models without partitions stamped in the same run (`whole()`), before their children.

        A model's stamps count as written for the models after it (a re-stamp run yields parents
        first), so a child kept through its parent's change is found behind it in the same pass."""
        self._restamped_whole = set(whole)
        if names is not None and whole:  # their children's provenance must point at the new stamps
            names = list(dict.fromkeys([*names, *self.graph.children(set(whole))]))
        models = self._models(names)
        present = self._present(models)
        out: dict[str, list[tuple[str, bool]]] = {}
        for asset in models:
            todo = self._todo(asset, present)
            if todo:
                out[asset.name] = todo
                self._versions.setdefault(asset.name, {}).update({k: asset.version or "" for k, _ in todo})
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
        """Partitioned models the environment serves at their current version (see `serves`); the
        others have no partitions to stamp (see ModelAsset.is_partitioned, `whole`)."""
        return [a for a in self.graph.partitioned if (names is None or a.name in names) and self.serves(a)]

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
        behind = set(self._behind(asset, stamped, latest)) | set(self._unlinked(asset, stamped, latest))
        return todo + [(k, k in holds_data) for k in stamped if k in behind]

    def _unlinked(self, asset: ModelAsset, keys: list[str], latest: dict[str, LatestEvent]) -> list[str]:
        """Partitions whose provenance does not point at the latest materialization of a parent
        without partitions (a seed built, or re-stamped, after them) although that materialization
        is of the version they were built on: re-stamped, so Dagster sees them built on it."""
        parents = [p for p in self.graph.parent_assets(asset) if not p.is_partitioned]
        events = self._latest_whole(parents) if parents and keys else {}
        out: set[str] = set()
        for parent in parents:
            if parent.name in self._restamped_whole:  # stamped in the same run, first: point at that
                return list(keys)
            event = events.get(parent.name)
            if event is None or event.version != parent.version:
                continue  # nothing to point at, or new data: Dagster's own judgement
            tag = input_event_pointer_tag(parent.asset_key.to_user_string())
            out |= {k for k in keys if latest[k].tags.get(tag) != str(event.storage_id)}
        return [k for k in keys if k in out]

    def suspects(self, confirmed: dict[str, str], seen: dict[str, int]) -> Suspects:
        """Models that may need stamps. Cheap — the state's intervals and one query for the latest
        event ids, nothing per partition — so a sensor can ask every minute.

        A model is suspect when its fingerprint and intervals are not those last confirmed as
        fully stamped (a change, or data computed outside Dagster, e.g. by `mesh run`), when a
        parent has new events since `seen` (its data may have moved to a new version), or when the
        environment does not serve its current version and it has new events (a run in this code
        location materialized that version: see `shown_otherwise`)."""
        models = self.graph.partitioned
        latest_ids = self._latest_ids(models)
        moved = {name for name, storage_id in latest_ids.items() if storage_id > seen.get(name, -1)}
        present = self._present(models)
        tokens = {a.name: confirmation(a, present.get((a.name, a.version or ""), []), self.served.get(a.name))
                  for a in models}
        names = [a.name for a in models if confirmed.get(a.name) != tokens[a.name] or moved.intersection(a.parents)
                 or (a.name in moved and not self.serves(a))]  # a run here computed a version it does not serve
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
        return self.context.state.intervals.get_intervals([(a.name, a.version) for a in models if a.version])

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
