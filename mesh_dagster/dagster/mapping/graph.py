"""The project as Dagster sees it: one `ModelAsset` per model, computed once at load time.

Everything here is plain data taken from the plan of the local project against the location's
environment (no Spark; of Dagster only the asset keys, which `MeshTranslator.get_asset_key`
gives), so specs, the stamping sensor and schedules all read the same keys, fingerprints and
versions that the asset definitions show.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dagster import AssetKey

from mesh_dagster.context import Lineage, interval_count
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.models.model import Audit, Model
from mesh_dagster.core.plan.plan import Plan, model_start_ms
from mesh_dagster.core.plan.review import PlanRecord
from mesh_dagster.core.project.audits import is_blocking
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import now_ms, to_end_ms
from mesh_dagster.dagster.mapping.model_asset import ADDED, UNCHANGED, AssetChange, AuditCheck, ModelAsset
from mesh_dagster.dagster.mapping.translator import MeshTranslator

__all__ = ["ADDED", "UNCHANGED", "AuditCheck", "ModelAsset", "ProjectGraph", "ServedVersion", "audit_checks",
           "build_graph"]


@dataclass(frozen=True)
class ServedVersion:
    """A model the environment serves in another version than the plan's: what its stored snapshot
    says its views return (None: not stored with it). Its asset shows these, not the working tree's:
    a query of the environment returns them until the plan is applied."""

    columns: dict[str, str | None] | None = None
    lineage: Mapping[str, Sequence[Sequence[str]]] | None = None  # {column: [(model, column), ...]}


@dataclass
class ProjectGraph:
    environment: str
    assets: dict[str, ModelAsset]  # by model name, parents first
    watches_git: bool = False  # config.yaml has a `git:` section (dagster/jobs/git_sensor.py)
    # The environment's recorded plans waiting for a review or an apply (newest first) and whether it
    # is protected: what the review and apply jobs offer to pick from (dagster/jobs/reviews.py).
    waiting: list[PlanRecord] = field(default_factory=list)
    protected: bool = False
    sensor_interval_s: int = 30  # config.yaml `dagster: sensor_interval_s`: how often its sensors look

    @property
    def materializable(self) -> list[ModelAsset]:
        return [a for a in self.assets.values() if not a.is_external]

    def parent_assets(self, asset: ModelAsset) -> list[ModelAsset]:
        """The parents whose data this model reads from a versioned table or view (not external ones)."""
        return [self.assets[p] for p in asset.parents if not self.assets[p].is_external and self.assets[p].version]

    def children(self, names: set[str]) -> list[str]:
        """Models reading any of `names`, in DAG order."""
        return [a.name for a in self.assets.values() if names.intersection(a.parents)]

    @property
    def partitioned(self) -> list[ModelAsset]:
        return [a for a in self.materializable if a.is_partitioned]

    @property
    def unpartitioned(self) -> list[ModelAsset]:
        """The models whose history is processed in order, never per partition (parents first)."""
        return [a for a in self.materializable if not a.is_partitioned]

    def by_unit(self) -> dict[IntervalUnit, list[ModelAsset]]:
        """The partitioned models by interval unit (one partitions definition each)."""
        groups: dict[IntervalUnit, list[ModelAsset]] = {}
        for asset in self.partitioned:
            groups.setdefault(asset.unit, []).append(asset)
        return groups

    def partitions_start(self, unit: IntervalUnit) -> int:
        """The earliest start of the models sharing this unit; a model treats earlier partitions as empty.

        Without any start, the interval before the current one (what a plan would compute first).
        """
        starts = [a.start_ms for a in self.by_unit().get(unit, []) if a.start_ms is not None]
        if starts:
            return unit.floor(min(starts))
        return unit.start_of(unit.index_of(now_ms()) - 1)


def build_graph(project: Project, plan: Plan, translator: MeshTranslator | None = None,
                digests: dict[str, list[str]] | None = None,
                present: dict[tuple[str, str], list[tuple[int, int]]] | None = None,
                served: dict[str, ServedVersion] | None = None,
                lineage: Callable[[str], Lineage | None] | None = None) -> ProjectGraph:
    """The models as assets of the plan's environment, keyed by `translator.get_asset_key`;
    `digests`: each model's audit definitions (Context.audit_digests), the checks' identities;
    `present`: the intervals each `(model, version)` holds (what a change reuses); `served`: the
    columns and column lineage of the version the environment serves, for models it serves in
    another version; `lineage`: a model's column lineage in this project (Context.column_lineage);
    either lineage is mapped onto this graph's keys."""
    translator = translator or MeshTranslator()
    column_cache = ColumnCache(project, lineage)
    served = served or {}
    added, changed = set(plan.added), set(plan.changed)
    taken: dict[tuple[str, ...], str] = {}
    assets: dict[str, ModelAsset] = {}
    for name in project.dag.sorted():
        if project.models[name].kind.is_inlined or project.models[name].kind.is_standalone_audit:
            continue  # standalone audits run in plans and `mesh run` only: not assets (README)
        parents = [p for p in sorted(_asset_parents(project, name)) if p in assets]
        asset = _model_asset(project, plan, name, _change(plan, name, added, changed), parents, column_cache,
                             (digests or {}).get(name, []), present or {}, served.get(name))
        asset.deps = [assets[p].key for p in parents]
        asset.key = tuple(translator.get_asset_key(asset).path)
        if asset.key in taken:
            raise MeshError(f"Models {taken[asset.key]} and {name} have the same asset key "
                            f"{'/'.join(asset.key)}: the translator must give each model its own key")
        taken[asset.key] = name
        asset.dep_keys = [assets[p].asset_key for p in parents]
        asset.column_deps = _column_deps(_shown_lineage(column_cache, name, plan.snapshots[name].identifier,
                                                        served.get(name)), assets)
        assets[name] = asset
    column_cache.save()
    return ProjectGraph(plan.environment, assets, watches_git=project.config.git is not None)


def _shown_lineage(column_cache: ColumnCache, name: str, identifier: str, served: ServedVersion | None
                   ) -> Mapping[str, Sequence[Sequence[str]]] | None:
    """The lineage of the version the environment serves: the stored snapshot's when it serves
    another than the plan's (none when it was stored without), never the working tree's then;
    else the project's, by the plan's snapshot (`identifier`) in the cache."""
    if served is None:
        return column_cache.lineage(name, identifier)
    return served.lineage if column_cache.has_lineage else None


def _column_deps(found: Mapping[str, Sequence[Sequence[str]]] | None, assets: dict[str, ModelAsset]
                 ) -> dict[str, list[tuple[AssetKey, str]]] | None:
    """Column lineage by the upstream models' asset keys in this graph (parents come first): an
    environment's assets point at the same environment's assets. Tables that are no asset drop out."""
    if found is None:
        return None
    return {column: [(assets[table].asset_key, upstream) for table, upstream in refs if table in assets]
            for column, refs in found.items()}


def _change(plan: Plan, name: str, added: set[str], changed: set[str]) -> AssetChange:
    """The model's change as the plan judged it against this environment (as `mesh plan` shows it)."""
    if name in added:
        return ADDED
    if name in changed and (category := plan.category(name)) is not None:
        return category
    return UNCHANGED


def _model_asset(project: Project, plan: Plan, name: str, change: AssetChange, parents: list[str],
                 column_cache: ColumnCache, digests: list[str], present: dict[tuple[str, str], list[tuple[int, int]]],
                 served: ServedVersion | None) -> ModelAsset:
    """One model as an asset of the plan's environment, its key and dependencies not set yet."""
    model = project.models[name]
    snap = plan.snapshots[name]
    served_columns = served.columns if served is not None else None
    asset = ModelAsset(
        name=name,
        key=(),
        model=model,
        fingerprint=snap.identifier,
        version=snap.version,
        table=None if model.kind.is_symbolic else snap.table_name,
        change=change,
        parents=parents,
        checks=[] if model.kind.is_external else audit_checks(model, project.audits, digests),
        start_ms=None if model.kind.is_external else model_start_ms(model, project),
        end_ms=to_end_ms(model.end) if model.end else None,
        columns=served_columns or column_cache.columns(project, name, snap.identifier),
        environment=plan.environment,
        recompute=interval_count(model, plan.backfills[name].intervals) if name in plan.backfills else 0,
        reuse=interval_count(model, present.get((name, snap.version or ""), [])),
    )
    if served_columns:
        asset.pending_columns = column_cache.columns(project, name, snap.identifier)
    return asset


class ColumnCache:
    """Output columns by snapshot identifier, kept in `.mesh/cache/`: inferring them renders every
    query, the largest part of loading a big project. The identifier covers the model and its
    parents' data; the project cache's salt covers macros, variables and versions."""

    FILE = "dagster_columns.json"

    def __init__(self, project: Project, lineage: Callable[[str], Lineage | None] | None = None):
        self.path = project.mesh_dir / "cache" / self.FILE
        self.salt = project.cache.salt if project.cache is not None else None
        self.entries: dict[str, dict[str, str | None] | None] = {}
        # Column lineage as {column: [[model, column], ...]} (None: unknown), by snapshot identifier.
        self.lineages: dict[str, dict[str, Sequence[Sequence[str]]] | None] = {}
        self._lineage = lineage
        self.dirty = False
        if self.salt is None:
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("salt") == self.salt and isinstance(data.get("columns"), dict):
            self.entries = data["columns"]
            if isinstance(data.get("lineage"), dict):
                self.lineages = data["lineage"]

    def columns(self, project: Project, name: str, identifier: str) -> dict[str, str | None] | None:
        if identifier in self.entries:
            return self.entries[identifier]
        try:
            found = project.columns(name)
        except MeshError:  # shown when the model runs; the asset just lists no columns
            return None
        self.entries[identifier] = found
        self.dirty = True
        return found

    @property
    def has_lineage(self) -> bool:
        """Whether lineage was asked for (a `lineage` function given): without, assets show none."""
        return self._lineage is not None

    def lineage(self, name: str, identifier: str) -> dict[str, Sequence[Sequence[str]]] | None:
        """The model's column lineage as {column: [(model, column), ...]} (None without a `lineage`
        function, or when not known): as computed, or as the cache file keeps it (lists)."""
        if self._lineage is None:
            return None
        if identifier not in self.lineages:
            try:
                found = self._lineage(name)
            except MeshError:  # shown when the model runs; the asset just shows no lineage
                found = None
            self.lineages[identifier] = found  # type: ignore[assignment]  # its refs are (model, column) tuples
            self.dirty = True
        return self.lineages[identifier]

    def save(self) -> None:
        """Atomically, and only if a salt names the cache; a cache that cannot be written is none."""
        if not self.dirty or self.salt is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".dagster_columns.")
            with os.fdopen(fd, "w") as f:
                # One string, not `json.dump`: writing to a file uses json's Python encoder, not its C one
                f.write(json.dumps({"salt": self.salt, "columns": self.entries, "lineage": self.lineages}))
            os.replace(tmp, self.path)
        except OSError:
            pass


def _asset_parents(project: Project, name: str) -> set[str]:
    """Parents, looking through EMBEDDED models (they are inlined, not assets)."""
    out: set[str] = set()
    for parent in project.parents(name):
        if project.models[parent].kind.is_inlined:
            out |= _asset_parents(project, parent)
        else:
            out.add(parent)
    return out


def audit_checks(model: Model, audits: dict[str, Audit], digests: list[str] | None = None) -> list[AuditCheck]:
    """The model's audits as checks; the text their descriptions show (the audit's own description,
    its arguments) is escaped as all user text Dagster shows is (shown_text.py)."""
    checks: list[AuditCheck] = []
    seen: dict[str, int] = {}
    for i, ref in enumerate(model.audits):
        base = re.sub(r"[^A-Za-z0-9_]", "_", ref.name)
        seen[base] = seen.get(base, 0) + 1
        check_name = base if seen[base] == 1 else f"{base}_{seen[base]}"
        audit = audits.get(ref.name)
        args = tuple(sorted((name, printable(value)) for name, value in ref.args.items()))
        description = audit.description if audit is not None else None
        checks.append(AuditCheck(check_name, ref.name, is_blocking(ref, audits), args,
                                 printable(description) if description is not None else None,
                                 digests[i] if digests and i < len(digests) else ""))
    return checks


