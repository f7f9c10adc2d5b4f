"""Changes: every model of the project compared with its snapshot in a plan's base environment.

Models are compared parents first, so a change's effect on its children (a breaking change
anywhere above wins) is known when the children are reached. Nothing given is modified: new
snapshots are copies of the local ones, categorised; snapshots from the state store are kept as
stored (they carry the category of the plan that created them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.plan.categorizer import categorize_direct, categorize_indirect, downstream_category, text_diff
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.environment import EnvironmentSnapshot
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot, SnapshotId
from mesh_dagster.core.sql.renderer import RenderContext, release_parsed, render_query
from mesh_dagster.core.time.dates import now_ms


@dataclass(frozen=True)
class ChangeSet:
    """What comparing the project with a base environment found."""

    snapshots: dict[str, Snapshot]  # every model, categorised, parents first
    new_snapshots: list[Snapshot]  # not in the state store yet
    added: list[str]
    directly_modified: list[str]
    indirectly_modified: dict[str, list[str]]  # directly modified -> its indirectly modified children
    metadata_updated: list[str]
    diffs: dict[str, str]
    categories: dict[str, ChangeCategory]  # relative to the base, for every changed model
    # Stored snapshots made before captures existed, with the capture made now (same fingerprint).
    recaptured: list[Snapshot] = field(default_factory=list)

    @property
    def changed(self) -> set[str]:
        indirect = (c for cs in self.indirectly_modified.values() for c in cs)
        return {*self.added, *self.directly_modified, *self.metadata_updated, *indirect}


def categorize_changes(
    project: Project,
    local: dict[str, Snapshot],
    stored: dict[SnapshotId, Snapshot],
    base: dict[str, EnvironmentSnapshot],
    previous: dict[str, Snapshot],
    *,
    forward_only: bool = False,
    choices: Mapping[str, ChangeCategory] | None = None,
    render_added: bool = True,
) -> ChangeSet:
    """Compare each local snapshot with the base's (`base`, loaded in `previous` when it differs).

    A snapshot the base already references is kept as stored (read from the table the base
    records for it: a preview, in a development environment); one the state store knows from an
    earlier plan is reused with its version; any other is new, categorised here — forward-only
    when the plan or the model says so, or as the user chose (`choices`, by model name). `local`
    is in DAG order, parents first (as `build_snapshots` and `selection.take_selected_changes` give
    it), and a model's parents are its snapshot's: a plan limited by --select-model holds models the
    project no longer defines, and definitions the environment has in place of the project's.
    `render_added=False` leaves a new snapshot with nothing to compare against unrendered (a plan
    that is only looked at, never applied, e.g. Dagster's at load: rendering is its largest cost).
    """
    snapshots: dict[str, Snapshot] = {}
    new_snapshots: list[Snapshot] = []
    recaptured: list[Snapshot] = []
    tally = _Tally(forward_only=forward_only, choices=dict(choices or {}))
    for name, snap in local.items():
        in_base = base.get(name)
        if in_base is not None and in_base.identifier == snap.identifier:
            kept = _captured(stored.get(snap.snapshot_id), snap, recaptured) or _recategorize_missing(snap, in_base)
            snapshots[name] = kept.as_recorded(in_base.version)
            continue
        old = previous.get(name)
        existing = _captured(stored.get(snap.snapshot_id), snap, recaptured)
        if existing is None:
            snap, category = _new_snapshot(project, snap, old, tally, render_added)
            new_snapshots.append(snap)
        else:
            snap = existing
            category = tally.categorize(project, snap, old, decide=False)
        tally.record(snap, old, category, _parent_names(snap))
        snapshots[name] = snap
    release_parsed()  # every rendering is done: the trees the load kept for them go
    tally.check()
    return ChangeSet(
        snapshots=snapshots,
        new_snapshots=new_snapshots,
        recaptured=recaptured,
        added=tally.added,
        directly_modified=tally.direct,
        indirectly_modified=tally.indirectly_modified(),
        metadata_updated=tally.metadata,
        diffs=tally.diffs,
        categories=tally.categories,
    )


def _new_snapshot(project: Project, snap: Snapshot, old: Snapshot | None, tally: _Tally,
                  render_added: bool) -> tuple[Snapshot, ChangeCategory]:
    """A snapshot the state store does not know, as the plan creates it: a copy of the local one,
    rendered (unless `render_added` is off and nothing is compared with it), categorised against
    `old`, stamped with its creation time; and its category."""
    # A definition taken from the environment (see selected_changes.py) keeps its stored rendering.
    if render_added or old is not None:
        snap = snap.model_copy(update={"rendered_query": snap.rendered_query or _rendered(project, snap)})
    else:
        snap = snap.model_copy()
    category = tally.categorize(project, snap, old, decide=True)
    snap.categorize(ChangeCategory.FORWARD_ONLY if snap.name in tally.kept else category, old)
    snap.created_ts = now_ms()
    return snap, category


@dataclass
class _Tally:
    """What the comparison found so far, model by model (DAG order).

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
    roots: dict[str, set[str]] = field(default_factory=dict)  # filled on demand: see `roots_of`
    own_roots: dict[str, set[str]] = field(default_factory=dict)  # recorded models
    record_order: dict[str, int] = field(default_factory=dict)  # DAG order of the recorded models
    recorded_parents: dict[str, list[str]] = field(default_factory=dict)
    diffs: dict[str, str] = field(default_factory=dict)
    forward_only: bool = False  # the whole plan is forward-only (`--forward-only`)
    choices: dict[str, ChangeCategory] = field(default_factory=dict)  # the user's categories, by model
    refusals: list[str] = field(default_factory=list)  # why this set of changes cannot be planned
    # Forward-only models below a breaking change, as SQLMesh plans them: shown INDIRECT_BREAKING,
    # yet they keep their table like a direct forward-only change (prod: no rebuild, the history
    # stays and later intervals read the new parent data; development: a preview).
    kept: set[str] = field(default_factory=set)

    def parent_categories(self, parents: list[str]) -> list[ChangeCategory]:
        return [self.downstream[p] for p in parents if p in self.downstream]

    def categorize(self, project: Project, snap: Snapshot, old: Snapshot | None, *, decide: bool) -> ChangeCategory:
        """Category of a changed model relative to its snapshot in the base environment (`old`).

        `decide`: the snapshot is new, so forward-only and the user's choices apply to it (a
        stored one keeps the version an earlier plan chose for it)."""
        name = snap.name
        parents = _parent_names(snap)
        if old is None:
            self.added.append(name)
            return ChangeCategory.BREAKING
        self_changed = (snap.fingerprint.data_hash != old.fingerprint.data_hash
                        or snap.fingerprint.metadata_hash != old.fingerprint.metadata_hash)
        direct = categorize_direct(snap, old, project.parent_schemas(name)) if self_changed else None
        if direct is not None:
            self.direct.append(name)
            self.diffs[name] = _diff(old, snap)
            return self._decide(snap, old, direct) if decide else direct
        parent_categories = self.parent_categories(parents)
        if parent_categories:
            self.indirect[name] = set().union(*(self.roots_of(p) for p in parents if p in self.own_roots))
            category = categorize_indirect(parent_categories)
            if category == ChangeCategory.INDIRECT_BREAKING and snap.model.forward_only and decide \
                    and _cannot_be_forward_only(snap, old) is None:
                self.kept.add(name)  # SQLMesh: indirectly breaking, and forward-only (see `kept`)
            return category
        if snap.fingerprint.parent_data_hash != old.fingerprint.parent_data_hash:
            # No parent changed in this plan, yet the base built this model on other parent data (an
            # environment holding mixed versions): what changed in between is unknown, so rebuild.
            moved = {p.name for p in snap.parents if p not in old.parents}
            self.indirect[name] = moved or {name}
            return ChangeCategory.INDIRECT_BREAKING
        self.metadata.append(name)
        self.diffs[name] = _diff(old, snap)
        return ChangeCategory.METADATA

    def _decide(self, snap: Snapshot, old: Snapshot, computed: ChangeCategory) -> ChangeCategory:
        """The category of a new, directly modified snapshot: the user's choice, else forward-only
        when the plan or the model asks for it and the change can keep the table, else `computed`."""
        name, model = snap.name, snap.model
        reason = _cannot_be_forward_only(snap, old)
        choice = self.choices.get(name)
        if choice is not None:
            if choice == ChangeCategory.FORWARD_ONLY and reason:
                self.refusals.append(f"{name} cannot be forward-only: {reason}")
            elif model.forward_only and choice != ChangeCategory.FORWARD_ONLY and not reason:
                self.refusals.append(f"{name} is a forward-only model: it cannot be categorized {choice.label}")
            return choice
        if self.forward_only or model.forward_only:
            if reason is None:
                return ChangeCategory.FORWARD_ONLY
            if self.forward_only:
                self.refusals.append(f"{name} cannot be forward-only: {reason}")
        return computed

    def check(self) -> None:
        """Refuse a set of changes that cannot be planned together, naming every reason."""
        if self.refusals:
            raise PlanError("This plan cannot be built:\n  " + "\n  ".join(self.refusals))

    def record(self, snap: Snapshot, old: Snapshot | None, category: ChangeCategory, parents: list[str]) -> None:
        name = snap.name
        category = _effective_category(snap, old, category)
        if category == ChangeCategory.METADATA and name in self.direct:
            self.direct.remove(name)  # its data is the base's: a metadata update after all
            self.metadata.append(name)
        self.categories[name] = category
        self.downstream[name] = downstream_category(category, self.parent_categories(parents))
        self.record_order[name] = len(self.record_order)
        self.own_roots[name] = self.indirect.get(name, {name})
        self.recorded_parents[name] = parents

    def roots_of(self, name: str) -> set[str]:
        """The roots a recorded model descends from (its own, and its recorded parents' roots).

        Computed when an indirectly modified child asks, not at each record: a plan adding every
        model (a first plan) would otherwise union every model's ancestors, quadratic in size."""
        if name in self.roots:
            return self.roots[name]
        missing: set[str] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current in missing or current in self.roots or current not in self.own_roots:
                continue
            missing.add(current)
            stack.extend(self.recorded_parents[current])
        for current in sorted(missing, key=self.record_order.__getitem__):  # parents first
            self.roots[current] = self.own_roots[current].union(
                *(self.roots[p] for p in self.recorded_parents[current] if p in self.own_roots))
        return self.roots[name]

    def indirectly_modified(self) -> dict[str, list[str]]:
        """Each root with the indirectly modified models below it (a model may sit under several)."""
        out: dict[str, list[str]] = {}
        for name, roots in self.indirect.items():
            for root in sorted(roots):
                out.setdefault(root, []).append(name)
        return out


def _cannot_be_forward_only(snap: Snapshot, old: Snapshot) -> str | None:
    """Why a change must rebuild the model's table, if it must: a kept table holds the old kind's
    rows, a seed's rows are its file, and a view holds no rows to keep."""
    model = snap.model
    if model.kind.name != old.model.kind.name:
        return f"its kind changes ({old.model.kind.name.value} -> {model.kind.name.value})"
    if not model.kind.is_materialized or not model.kind.has_query:
        return f"{model.kind.name.value} models have no history to keep"
    return None


def _parent_names(snap: Snapshot) -> list[str]:
    return [p.name for p in snap.parents]


def _diff(old: Snapshot, new: Snapshot) -> str:
    return text_diff(_definition_text(old.model) + _audit_text(old), _definition_text(new.model) + _audit_text(new),
                     new.name)


def _audit_text(snap: Snapshot) -> str:
    """A standalone audit's query (its node holds none: the audit it runs was captured)."""
    audit = snap.capture.audits.get(snap.name) if snap.capture is not None else None
    if not snap.model.kind.is_standalone_audit or audit is None:
        return ""
    return "\n" + audit.query.strip() + "\n"


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
    if stored == ChangeCategory.FORWARD_ONLY and category == ChangeCategory.INDIRECT_BREAKING \
            and snap.model.forward_only:
        return category  # a forward-only model below a breaking change keeps its table (see `_Tally.kept`)
    return stored if stored is not None and stored.reuses_previous_version else ChangeCategory.METADATA


def _captured(stored: Snapshot | None, local: Snapshot, recaptured: list[Snapshot]) -> Snapshot | None:
    """A stored snapshot made before captures existed gets the capture made now for the same
    fingerprint (the inputs it covers are the same), and is listed to be stored with it."""
    if stored is None or stored.capture is not None or local.capture is None:
        return stored
    stored = stored.model_copy(update={"capture": local.capture})
    recaptured.append(stored)
    return stored


def _recategorize_missing(snap: Snapshot, in_base: EnvironmentSnapshot) -> Snapshot:
    """The environment references a snapshot the store lost: rebuild its version from the record."""
    return snap.model_copy(update={"version": in_base.version, "change_category": ChangeCategory.BREAKING})


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
    repo = project.repo_of(model.name)
    ctx = RenderContext(variables=repo.variables, schemas=project.parent_schemas(model.name),
                        embedded={p: project.models[p] for p in project.parents(model.name)
                                  if project.models[p].kind.is_inlined})
    # Canonical text: comments and formatting do not count as changes. The tree is this call's own
    # (render_query's contract): no copy, which cost more than the generation itself.
    return render_query(model, ctx, repo.macros).sql(dialect="spark", comments=False, copy=False)


def _definition_text(model: Model) -> str:
    """What plans diff: the model's properties and its query (a Python model's code), as written."""
    audit = model.kind.is_standalone_audit
    props = [f"  name {model.name}", "  standalone true" if audit else f"  kind {model.kind.name.value}"]
    if model.time_column:
        props.append(f"  time_column {model.time_column}")
    for key in ("cron", "start", "end", "owner", "description", "storage_format", "stamp"):
        value = getattr(model, key)
        if value:
            props.append(f"  {key} {value}")
    for key in ("grain", "tags", "partitioned_by"):
        value = getattr(model, key)
        if value:
            props.append(f"  {key} ({', '.join(value)})")
    if model.audits and not audit:
        props.append(f"  audits ({', '.join(a.name for a in model.audits)})")
    if model.columns:
        props.append(f"  columns ({', '.join(f'{c} {t}' for c, t in model.columns.items())})")
    block = "AUDIT" if audit else "MODEL"
    text = f"{block} (\n" + ",\n".join(props) + "\n);\n"
    statements = [*model.macro_definitions, *model.pre_statements]
    if statements:
        text += "\n" + ";\n".join(statements) + ";\n"
    if model.query:
        text += "\n" + model.query.strip() + "\n"
    if model.python is not None:
        text += "\n" + model.python.source()
    if model.post_statements:
        text += ";\n" + ";\n".join(model.post_statements) + "\n"
    if model.on_virtual_update:
        text += "\nON_VIRTUAL_UPDATE_BEGIN;\n" + ";\n".join(model.on_virtual_update) + ";\nON_VIRTUAL_UPDATE_END;\n"
    return text
