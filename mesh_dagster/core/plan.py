"""Plans: the local project compared with a target environment.

Building a plan reads the project and the state store only — never Spark — so it is fast and can
run anywhere (a laptop, a CI job, a Dagster sensor).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from mesh_dagster.core.categorizer import categorize_direct, categorize_indirect, downstream_category, text_diff
from mesh_dagster.core.dates import now_ms, to_end_ms, to_ms
from mesh_dagster.core.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.fingerprint import build_snapshots
from mesh_dagster.core.intervals import Interval, compute_missing, format_interval_range
from mesh_dagster.core.model import KindName, Model
from mesh_dagster.core.project import Project
from mesh_dagster.core.snapshot import (
    PROD,
    ChangeCategory,
    Snapshot,
    SnapshotId,
    check_environment_fits,
    normalize_environment,
    view_name,
)

# Non-incremental kinds are complete once built; their single interval spans all time.
ALL_TIME: Interval = (0, 253402300800000)  # 9999-12-31


class StateReader(Protocol):
    def get_environment(self, name: str) -> Environment | None: ...
    def get_snapshots(self, ids) -> dict[SnapshotId, Snapshot]: ...
    def get_intervals(self, keys) -> dict[tuple[str, str], list[tuple[int, int]]]: ...


@dataclass
class Backfill:
    """Work for one snapshot: its missing intervals (or a full refresh)."""

    name: str
    intervals: list[Interval]
    full_refresh: bool

    def describe(self, unit) -> str:
        return "[full refresh]" if self.full_refresh else f"[{format_interval_range(self.intervals, unit)}]"


@dataclass
class Plan:
    plan_id: str
    environment: str
    base_environment: Environment | None  # the current record of the target (None if new)
    create_from: str | None  # environment a new one is created from
    snapshots: dict[str, Snapshot]  # every model of the project, categorised
    new_snapshots: list[Snapshot]  # not in the state store yet
    added: list[str]
    removed: list[EnvironmentSnapshot]
    directly_modified: list[str]
    indirectly_modified: dict[str, list[str]]  # directly modified -> its indirectly modified children
    metadata_updated: list[str]
    previous: dict[str, Snapshot]  # snapshots being replaced, by name
    backfills: dict[str, Backfill]
    promoted: list[str]  # models that get a view in this environment
    start: int
    end: int
    execution_time: int
    include_unmodified: bool = False
    skip_backfill: bool = False
    empty_backfill: bool = False
    diffs: dict[str, str] = field(default_factory=dict)
    # What each change means relative to the base environment. A snapshot reused from the state
    # store keeps the category of the plan that created it, which compared it with another base.
    categories: dict[str, ChangeCategory] = field(default_factory=dict)

    @property
    def is_prod(self) -> bool:
        return self.environment == PROD

    @property
    def is_new_environment(self) -> bool:
        return self.base_environment is None

    @property
    def changed(self) -> list[str]:
        indirect = [c for cs in self.indirectly_modified.values() for c in cs]
        return sorted({*self.added, *self.directly_modified, *indirect, *self.metadata_updated})

    @property
    def has_changes(self) -> bool:
        return bool(self.changed or self.removed)

    @property
    def finishes_interrupted_apply(self) -> bool:
        """The environment's last apply recorded it but stopped before all its views moved."""
        return self.base_environment is not None and self.base_environment.finalized_ts is None

    @property
    def needs_apply(self) -> bool:
        """Whether applying does anything: changes, backfill, a new environment, or completing
        the views of an interrupted apply (see execution/apply.py)."""
        return self.has_changes or self.requires_backfill or self.is_new_environment or self.finishes_interrupted_apply

    @property
    def requires_backfill(self) -> bool:
        return bool(self.backfills) and not self.skip_backfill

    def category(self, name: str) -> ChangeCategory | None:
        """The category to show: relative to this plan's base for changed models."""
        return self.categories.get(name) or self.snapshots[name].change_category

    def view(self, name: str) -> str:
        return view_name(name, self.environment)

    def target_environment(self, expiration_ts: int | None = None) -> Environment:
        """The environment record this plan writes when applied."""
        return Environment(
            name=self.environment,
            snapshots=[_env_snapshot(s) for s in self.snapshots.values()],
            promoted=sorted(self.promoted),
            plan_id=self.plan_id,
            previous_plan_id=self.base_environment.plan_id if self.base_environment else None,
            start_at=str(self.start),
            end_at=str(self.end),
            expiration_ts=expiration_ts,
            created_ts=now_ms(),
        )


def _env_snapshot(s: Snapshot) -> EnvironmentSnapshot:
    return EnvironmentSnapshot(
        name=s.name,
        identifier=s.identifier,
        version=s.version or "",
        kind=s.model.kind.name.value,
        table_name=None if s.model.kind.is_symbolic else s.table_name,
    )


def model_start_ms(model: Model, project: Project) -> int | None:
    start = model.start or project.config.model_defaults.start
    return to_ms(start) if start else None


def build_plan(
    project: Project,
    state: StateReader,
    environment: str = PROD,
    *,
    start: str | None = None,
    end: str | None = None,
    execution_time: str | int | None = None,
    create_from: str = PROD,
    include_unmodified: bool | None = None,
    skip_backfill: bool = False,
    empty_backfill: bool = False,
    allow_empty: bool = False,
) -> Plan:
    """Compare the project with `environment` (or, if new, with `create_from`) and categorise."""
    environment = normalize_environment(environment)
    check_environment_fits(environment, {model.schema_name for model in project.models.values()})
    is_prod = environment == PROD
    if is_prod and (start or end):
        raise PlanError("--start and --end can only be set for development environments, not prod")
    include_unmodified = project.config.plan.include_unmodified if include_unmodified is None else include_unmodified
    execution_ms = now_ms() if execution_time is None else to_ms(execution_time)

    target = state.get_environment(environment)
    base = target
    source_name = None
    if base is None and not is_prod:
        source_name = normalize_environment(create_from)
        base = state.get_environment(source_name)
        if base is None and source_name != PROD:
            raise PlanError(f"Cannot create environment '{environment}' from '{source_name}': it does not exist")
    base_by_name = base.snapshot_by_name() if base else {}

    local = build_snapshots(project)
    stored = state.get_snapshots([s.snapshot_id for s in local.values()])
    replaced_ids = [es.snapshot_id for name, es in base_by_name.items()
                    if name in local and es.identifier != local[name].identifier]
    previous = {sid.name: s for sid, s in state.get_snapshots(replaced_ids).items()}

    snapshots: dict[str, Snapshot] = {}
    new_snapshots: list[Snapshot] = []
    changes = _Changes()
    for name in project.dag.sorted():
        snap = local[name]
        in_base = base_by_name.get(name)
        if in_base is not None and in_base.identifier == snap.identifier:
            snapshots[name] = stored.get(snap.snapshot_id) or _recategorize_missing(snap, in_base)
            continue
        old = previous.get(name)
        existing = stored.get(snap.snapshot_id)
        if existing is None:
            snap.rendered_query = _rendered(project, snap)
        else:
            snap = existing
        category = _categorize(project, changes, snap, old)
        if existing is None:
            snap.categorize(category, old)
            snap.created_ts = now_ms()
            new_snapshots.append(snap)
        changes.record(snap, old, category, project.parents(name))
        snapshots[name] = snap
    added, direct, metadata = changes.added, changes.direct, changes.metadata
    indirect_of = changes.indirectly_modified()

    if project.cache is not None:
        project.cache.save()
    removed = [es for name, es in base_by_name.items() if name not in local]
    if not is_prod and target is None and not (added or direct or indirect_of or metadata or removed) \
            and not include_unmodified and not allow_empty:
        raise PlanError(
            f"Creating a new environment requires a change, but the project files match the "
            f"`{source_name or PROD}` environment. Make a change or use --include-unmodified."
        )

    if is_prod or include_unmodified:
        promoted = [n for n, s in snapshots.items() if not s.model.kind.is_symbolic]
    else:
        changed = {*added, *direct, *metadata, *(c for cs in indirect_of.values() for c in cs)}
        kept = set(target.promoted) if target else set()
        promoted = [n for n, s in snapshots.items() if (n in changed or n in kept) and not s.model.kind.is_symbolic]

    plan_start = _plan_start(project, snapshots, start, execution_ms)
    plan_end = to_end_ms(end) if end else execution_ms
    if plan_end > execution_ms:
        raise PlanError("The plan end cannot be in the future")
    if start and to_ms(start) > plan_end:
        raise PlanError(f"The plan start {start} is after its end")

    scope = set(snapshots) if is_prod else {*added, *direct, *metadata, *(c for cs in indirect_of.values() for c in cs)}
    backfills = compute_backfills(state, snapshots, scope, previous, order=project.dag.sorted(),
                                  default_start=project.config.model_defaults.start, start=start, end=end,
                                  execution_ms=execution_ms)

    return Plan(
        plan_id=uuid.uuid4().hex,
        environment=environment,
        base_environment=target,
        create_from=source_name,
        snapshots=snapshots,
        new_snapshots=new_snapshots,
        added=added,
        removed=removed,
        directly_modified=direct,
        indirectly_modified=indirect_of,
        metadata_updated=metadata,
        previous=previous,
        backfills=backfills,
        promoted=promoted,
        start=plan_start,
        end=plan_end,
        execution_time=execution_ms,
        include_unmodified=include_unmodified,
        skip_backfill=skip_backfill or empty_backfill,
        empty_backfill=empty_backfill,
        diffs=changes.diffs,
        categories=changes.categories,
    )


@dataclass
class _Changes:
    """What comparing the project with the base environment found, model by model (DAG order).

    `categories` say what each change means relative to the base environment (what the plan
    shows); `downstream` what each changed model passes to its children, where a breaking change
    anywhere above wins over the model's own category; `roots` the added, directly modified or
    metadata-updated models each change descends from.
    """

    added: list[str] = field(default_factory=list)
    direct: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    indirect: dict[str, set[str]] = field(default_factory=dict)  # model -> the roots it is listed under
    categories: dict[str, ChangeCategory] = field(default_factory=dict)
    downstream: dict[str, ChangeCategory] = field(default_factory=dict)
    roots: dict[str, set[str]] = field(default_factory=dict)
    diffs: dict[str, str] = field(default_factory=dict)

    def parent_categories(self, parents: list[str]) -> list[ChangeCategory]:
        return [self.downstream[p] for p in parents if p in self.downstream]

    def record(self, snap: Snapshot, old: Snapshot | None, category: ChangeCategory, parents: list[str]) -> None:
        name = snap.name
        category = _effective_category(snap, old, category)
        if category == ChangeCategory.METADATA and name in self.direct:
            self.direct.remove(name)  # its data is the base's: a metadata update after all
            self.metadata.append(name)
        self.categories[name] = category
        self.downstream[name] = downstream_category(category, self.parent_categories(parents))
        own = self.indirect.get(name, {name})
        self.roots[name] = own.union(*(self.roots[p] for p in parents if p in self.roots))

    def indirectly_modified(self) -> dict[str, list[str]]:
        """Each root with the indirectly modified models below it (a model may sit under several)."""
        out: dict[str, list[str]] = {}
        for name, roots in self.indirect.items():
            for root in sorted(roots):
                out.setdefault(root, []).append(name)
        return out


def _categorize(project: Project, changes: _Changes, snap: Snapshot, old: Snapshot | None) -> ChangeCategory:
    """Category of a changed model relative to its snapshot in the base environment (`old`)."""
    name = snap.name
    parents = project.parents(name)
    if old is None:
        changes.added.append(name)
        return ChangeCategory.BREAKING
    self_changed = (snap.fingerprint.data_hash != old.fingerprint.data_hash
                    or snap.fingerprint.metadata_hash != old.fingerprint.metadata_hash)
    direct = categorize_direct(snap, old, project.parent_schemas(name)) if self_changed else None
    if direct is not None:
        changes.direct.append(name)
        changes.diffs[name] = _diff(old, snap)
        return direct
    parent_categories = changes.parent_categories(parents)
    if parent_categories:
        changes.indirect[name] = set().union(*(changes.roots[p] for p in parents if p in changes.roots))
        return categorize_indirect(parent_categories)
    if snap.fingerprint.parent_data_hash != old.fingerprint.parent_data_hash:
        # No parent changed in this plan, yet the base built this model on other parent data (an
        # environment holding mixed versions): what changed in between is unknown, so rebuild.
        moved = {p.name for p in snap.parents if p not in old.parents}
        changes.indirect[name] = moved or {name}
        return ChangeCategory.INDIRECT_BREAKING
    changes.metadata.append(name)
    changes.diffs[name] = _diff(old, snap)
    return ChangeCategory.METADATA


def _diff(old: Snapshot, new: Snapshot) -> str:
    return text_diff(_definition_text(old.model), _definition_text(new.model), new.name)


def _effective_category(snap: Snapshot, old: Snapshot | None, category: ChangeCategory) -> ChangeCategory:
    """The category relative to the base, reconciled with the version the snapshot really has.

    When the snapshot's version is the base's own table, no data changes in this plan, whatever
    the two definitions compare as: a snapshot stored by an earlier plan keeps the version that
    plan chose (e.g. after several additive steps that, compared at once, the categorizer cannot
    prove additive), and a change called breaking whose data and parents' data hashes are the
    base's gets the base's version back.
    """
    if old is None or not old.version or snap.version != old.version or category.reuses_previous_version:
        return category
    stored = snap.change_category
    return stored if stored is not None and stored.reuses_previous_version else ChangeCategory.METADATA


def _recategorize_missing(snap: Snapshot, in_base: EnvironmentSnapshot) -> Snapshot:
    """The environment references a snapshot the store lost: rebuild its version from the record."""
    snap.version = in_base.version
    snap.change_category = ChangeCategory.BREAKING
    return snap


def _rendered(project: Project, snapshot: Snapshot) -> str | None:
    """The canonical rendering of a new snapshot (cached by identifier: it determines the text)."""
    cache = project.cache
    if cache is not None:
        hit, sql = cache.rendered(snapshot.identifier)
        if hit:
            return sql
    sql = _render_canonical(project, snapshot.model)
    if cache is not None:
        cache.put_rendered(snapshot.identifier, sql)
    return sql


def _render_canonical(project: Project, model: Model) -> str | None:
    if model.query is None:
        return None
    from mesh_dagster.core.renderer import RenderContext, render_query

    ctx = RenderContext(variables=project.variables, schemas=project.parent_schemas(model.name),
                        embedded={p: project.models[p] for p in project.parents(model.name)
                                  if project.models[p].kind.name == KindName.EMBEDDED})
    # Canonical text: comments and formatting do not count as changes.
    return render_query(model, ctx, project.macros).sql(dialect="spark", comments=False)


def _definition_text(model: Model) -> str:
    """What plans diff: the model's properties and its query, as written."""
    props = [f"  name {model.name}", f"  kind {model.kind.name.value}"]
    if model.kind.time_column:
        props.append(f"  time_column {model.kind.time_column}")
    for key in ("cron", "start", "end", "owner", "description", "storage_format", "stamp"):
        value = getattr(model, key)
        if value:
            props.append(f"  {key} {value}")
    for key in ("grain", "tags", "partitioned_by"):
        value = getattr(model, key)
        if value:
            props.append(f"  {key} ({', '.join(value)})")
    if model.audits:
        props.append(f"  audits ({', '.join(a.name for a in model.audits)})")
    if model.columns:
        props.append(f"  columns ({', '.join(f'{c} {t}' for c, t in model.columns.items())})")
    text = "MODEL (\n" + ",\n".join(props) + "\n);\n"
    statements = [*model.macro_definitions, *model.pre_statements]
    if statements:
        text += "\n" + ";\n".join(statements) + ";\n"
    if model.query:
        text += "\n" + model.query.strip() + "\n"
    if model.post_statements:
        text += ";\n" + ";\n".join(model.post_statements) + "\n"
    return text


def _plan_start(project: Project, snapshots: dict[str, Snapshot], start: str | None, execution_ms: int) -> int:
    if start:
        return to_ms(start)
    starts = [s for snap in snapshots.values() if (s := model_start_ms(snap.model, project)) is not None]
    return min(starts) if starts else execution_ms


def compute_backfills(
    state: StateReader,
    snapshots: dict[str, Snapshot],
    scope: set[str],
    previous: dict[str, Snapshot],
    *,
    order: list[str],
    default_start: str | None,
    start: str | None,
    end: str | None,
    execution_ms: int,
    ignore_cron: bool = False,
    end_bounded: bool = True,
) -> dict[str, Backfill]:
    """Missing intervals of the snapshots in `scope` (in DAG order)."""
    candidates = [snapshots[n] for n in order if n in scope and not snapshots[n].model.kind.is_symbolic]
    keys = [s.interval_key for s in candidates]
    prev_keys = [p.interval_key for p in previous.values() if p.version]
    intervals = state.get_intervals(keys + prev_keys) if candidates else {}
    backfills: dict[str, Backfill] = {}
    for snap in candidates:
        model = snap.model
        present = intervals.get(snap.interval_key, [])
        if model.kind.is_timeless:
            if not present:
                backfills[snap.name] = Backfill(snap.name, [ALL_TIME], True)
            continue
        bound = None
        prev = previous.get(snap.name)
        if end_bounded and prev is not None and prev.version and prev.version != snap.version:
            prev_present = intervals.get(prev.interval_key, [])
            bound = max((e for _, e in prev_present), default=None)
        missing = compute_missing(
            cron=model.cron,
            model_start=model.start or default_start,
            model_end=model.end,
            plan_start=start,
            plan_end=end,
            execution_time=execution_ms,
            present=present,
            lookback=model.kind.lookback,
            end_bounded_by=bound,
            ignore_cron=ignore_cron,
            merged=True,
        )
        if missing:
            backfills[snap.name] = Backfill(snap.name, missing, not model.kind.is_incremental)
    return backfills


def snapshot_order(snapshots: dict[str, Snapshot]) -> list[str]:
    """Parents before children, from the snapshots' own parent lists (no project needed)."""
    from mesh_dagster.core.dag import DAG

    return DAG({n: [p.name for p in s.parents if p.name in snapshots] for n, s in snapshots.items()}).sorted()
