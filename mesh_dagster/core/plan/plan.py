"""Plans: the local project compared with a target environment.

Building a plan reads the project and the state store only — never Spark — so it is fast and can
run anywhere (a laptop, a CI job, a Dagster sensor). It goes in named steps (resolve the base,
categorize the changes, pick the promoted models, validate the time range, compute the
backfills), none of which modifies the project, the stored snapshots or the environment records
it is given: a plan can be built, shown and thrown away. The one thing written is the project's
render cache (a memo of canonical query texts, by snapshot identifier).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from mesh_dagster.core.config.names import PROD, check_environment_fits, normalize_environment, view_name
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import KindName, Model
from mesh_dagster.core.plan.backfills import (
    Backfill,
    Clearing,
    IntervalReader,
    compute_backfills,
    refuse_gaps,
    snapshot_starts,
)
from mesh_dagster.core.plan.changes import ChangeSet, categorize_changes
from mesh_dagster.core.plan.estimate import BackfillEstimate
from mesh_dagster.core.plan.forward_only import plan_forward_only
from mesh_dagster.core.plan.lint_outcome import LintOutcome
from mesh_dagster.core.plan.options import PlanOptions
from mesh_dagster.core.plan.repositories import removed_models
from mesh_dagster.core.plan.schema_changes import SchemaChange
from mesh_dagster.core.plan.selected_changes import SnapshotReader, select_plan
from mesh_dagster.core.plan.view_collisions import refuse_view_collisions
from mesh_dagster.core.project.dag import DAG
from mesh_dagster.core.project.environment_statements import Stage
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.snapshots.fingerprint import build_snapshots, uncaptured_warnings
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot, SnapshotId
from mesh_dagster.core.snapshots.statement_scope import render_in_scope
from mesh_dagster.core.snapshots.statements import EnvironmentStatements
from mesh_dagster.core.time.dates import ms_to_datetime, now_ms, to_end_ms, to_ms


class EnvironmentReader(Protocol):
    """The state store's environments (its `environments` part)."""

    def get_environment(self, name: str) -> Environment | None: ...
    def get_environments(self) -> list[Environment]: ...


class StateReader(Protocol):
    """What building a plan reads of the state store: three of its parts."""

    @property
    def environments(self) -> EnvironmentReader: ...
    @property
    def snapshots(self) -> SnapshotReader: ...
    @property
    def intervals(self) -> IntervalReader: ...


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
    forward_only: bool = False  # `--forward-only`: every change keeps its model's table
    effective_from: int | None = None  # forward-only changes recompute from here once deployed
    # Models a development environment reads from preview tables (see snapshot.PREVIEW_SUFFIX).
    previews: list[str] = field(default_factory=list)
    # Kept tables whose schema the change migrates, as judged by their policies at plan time.
    schema_changes: dict[str, SchemaChange] = field(default_factory=dict)
    allow_destructive: frozenset[str] = frozenset()  # `--allow-destructive-model`, resolved to names
    allow_additive: frozenset[str] = frozenset()
    warnings: list[str] = field(default_factory=list)
    # A restatement plan (core/plan/restatement.py): the models it recomputes, and the intervals of
    # development versions it forgets afterwards (prod only).
    restated: list[str] = field(default_factory=list)
    clearings: list[Clearing] = field(default_factory=list)
    # What it was asked for (core/plan/options.py): its review record is rebuilt from them.
    options: PlanOptions = field(default_factory=PlanOptions)
    # Stored snapshots made before captures existed, captured now: the apply stores their capture.
    recaptured: list[Snapshot] = field(default_factory=list)
    # The `before_all` / `after_all` the environment runs once applied, and those it (or, new, the
    # environment it starts from) runs now; None: recorded before plans captured them.
    statements: EnvironmentStatements = field(default_factory=EnvironmentStatements)
    base_statements: EnvironmentStatements | None = None
    linter: LintOutcome | None = None  # what the front door's lint gate found (None: no gate)
    # What its backfill will take, from earlier batches' timings (core/plan/estimate.py; None: not estimated).
    estimate: BackfillEstimate | None = None

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
    def statements_changed(self) -> bool:
        """The environment's `before_all` / `after_all` change (what it ran before capture: none)."""
        return self.statements.differs_from(self.base_statements)

    @property
    def has_changes(self) -> bool:
        return bool(self.changed or self.removed or self.statements_changed)

    @property
    def finishes_interrupted_apply(self) -> bool:
        """The environment's last apply recorded it but stopped before all its views moved."""
        return self.base_environment is not None and self.base_environment.finalized_ts is None

    @property
    def needs_apply(self) -> bool:
        """Whether applying does anything: changes, backfill, a new environment, or completing
        the views of an interrupted apply (see execution/apply/apply.py)."""
        return self.has_changes or self.requires_backfill or self.is_new_environment or self.finishes_interrupted_apply

    @property
    def requires_backfill(self) -> bool:
        return bool(self.backfills) and not self.skip_backfill

    def category(self, name: str) -> ChangeCategory | None:
        """The category to show: relative to this plan's base for changed models."""
        return self.categories.get(name) or self.snapshots[name].change_category

    def view(self, name: str) -> str:
        """What the environment shows of a model; a standalone audit has no view: its name."""
        snap = self.snapshots.get(name)
        if snap is not None and snap.model.kind.is_standalone_audit:
            return name
        if snap is None and any(r.name == name and r.kind == KindName.STANDALONE_AUDIT.value for r in self.removed):
            return name
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
            statements=self.statements,
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
    """Where `model` starts (core/time/starts.py: its own start, else inferred from its parents);
    None when nothing upstream declares one (its latest interval only, at each execution time)."""
    return project.start_ms(model.name)


def build_plan(project: Project, state: StateReader, environment: str = PROD, options: PlanOptions | None = None,
               /, **keywords: Any) -> Plan:
    """Compare the project with `environment` (or, if new, with `options.create_from`) and categorise.

    `options` (core/plan/options.py), or its fields as keywords, say what the plan is asked for:
    `choices` fix the category of directly modified models (manual categorization);
    `allow_destructive`/`allow_additive` name models whose schema-change policy this plan
    overrides; `select_models` (selectors) limits the local changes the plan takes,
    `backfill_models` what a development plan computes (see selected_changes.py); `min_intervals` makes
    every model check at least that many of its latest intervals; `no_gaps` refuses a plan that
    would leave a new table version without intervals its predecessor has; `render_added=False`
    is for a plan only looked at, never applied (see `categorize_changes`). The plan keeps them
    (`Plan.options`): its review record is rebuilt from them.
    """
    opts = PlanOptions.of(options, **keywords)
    environment = _check_request(project, state, environment, opts)
    is_prod = environment == PROD
    forward_only = opts.forward_only or project.config.plan.forward_only
    execution_ms = now_ms() if opts.execution_time is None else to_ms(opts.execution_time)

    base = resolve_base(state, environment, opts.create_from)
    selection = select_plan(project, state.snapshots, base.snapshots, build_snapshots(project),
                            select=opts.select_models, backfill=opts.backfill_models, is_prod=is_prod)
    local = selection.snapshots
    stored, previous = known_snapshots(state, local, base)
    changes = categorize_changes(project, local, stored, base.snapshots, previous, forward_only=forward_only,
                                 choices=opts.choices, render_added=opts.render_added)
    if project.cache is not None:
        project.cache.save()  # the new snapshots' renderings, for the next plan
    removed = removed_models(project, state, environment, base.snapshots, local)
    include_unmodified = _include_unmodified(project, opts)
    statements = EnvironmentStatements.of_project(project)
    _require_change(base, bool(changes.changed or removed or include_unmodified or opts.allow_empty), statements)
    promoted = selection.promoted(promoted_models(changes, base.target, promote_all=is_prod or include_unmodified),
                                  changes.changed, changes.snapshots)
    start, end = opts.start, opts.end
    plan_start, plan_end = validate_range(project, changes.snapshots, start, end, execution_ms)
    fo = plan_forward_only(project, changes, previous, is_prod=is_prod, effective_from=opts.effective_from,
                           start=start, end_ms=plan_end, execution_ms=execution_ms,
                           allow_destructive=opts.allow_destructive, allow_additive=opts.allow_additive)
    backfills = plan_backfills(project, state.intervals, changes, previous, is_prod=is_prod, start=start, end=end,
                               execution_ms=execution_ms, only=selection.backfill, start_of=fo.preview_starts,
                               recompute_from=fo.recompute_from, min_intervals=opts.min_intervals)
    if opts.no_gaps:
        refuse_gaps(state.intervals, changes.snapshots, previous, backfills, execution_ms=execution_ms)
    plan = Plan(
        plan_id=uuid.uuid4().hex, environment=environment, base_environment=base.target, create_from=base.create_from,
        snapshots=changes.snapshots, new_snapshots=changes.new_snapshots, recaptured=changes.recaptured,
        added=changes.added, removed=removed, directly_modified=changes.directly_modified,
        indirectly_modified=changes.indirectly_modified, metadata_updated=changes.metadata_updated, previous=previous,
        backfills=backfills, promoted=promoted, start=plan_start, end=plan_end, execution_time=execution_ms,
        include_unmodified=include_unmodified, skip_backfill=opts.skip_backfill or opts.empty_backfill,
        empty_backfill=opts.empty_backfill, diffs=changes.diffs, categories=changes.categories,
        forward_only=forward_only, effective_from=fo.effective_ms, previews=fo.previews,
        schema_changes=fo.schema_changes, allow_destructive=opts.allow_destructive, base_statements=base.statements,
        allow_additive=opts.allow_additive, warnings=[*uncaptured_warnings(local.values()), *fo.warnings], options=opts,
        statements=statements,
    )
    check_statements(plan, project)
    return plan


def _check_request(project: Project, state: StateReader, environment: str, opts: PlanOptions) -> str:
    """The environment's name as stored, once it and the options make a plan that can be built."""
    if opts.min_intervals < 0:
        raise PlanError(f"--min-intervals must be 0 or more, got {opts.min_intervals}")
    environment = normalize_environment(environment)
    check_environment_fits(environment, {model.schema_name for model in project.models.values()})
    refuse_view_collisions(environment, project.models.values(), state.environments.get_environment)
    if environment == PROD and (opts.start or opts.end):
        raise PlanError("--start and --end can only be set for development environments, not prod")
    return environment


def _require_change(base: Base, changed: bool, statements: EnvironmentStatements) -> None:
    """A new development environment is made for a change (`changed`: of a model, or asked for): one
    the project's files — models and statements — would make identical to its source is refused."""
    if base.create_from is not None and not changed and not statements.differs_from(base.statements):
        raise PlanError(
            f"Creating a new environment requires a change, but the project files match the "
            f"`{base.create_from}` environment. Make a change or use --include-unmodified."
        )


def _include_unmodified(project: Project, opts: PlanOptions) -> bool:
    configured = project.config.plan.include_unmodified
    return configured if opts.include_unmodified is None else opts.include_unmodified


@dataclass(frozen=True)
class Base:
    """What a plan compares the project with."""

    target: Environment | None  # the environment's current record (None if new)
    create_from: str | None  # the environment a new development environment starts from
    snapshots: dict[str, EnvironmentSnapshot]  # by model: the target's, else `create_from`'s (if any)
    statements: EnvironmentStatements | None = None  # what that record runs (None: none captured)


def resolve_base(state: StateReader, environment: str, create_from: str = PROD) -> Base:
    """The environment's own record, or for a new development environment the one it starts from.

    A new prod compares with nothing; a new environment may start from an empty prod, but not from
    another development environment that does not exist (a typo would otherwise plan everything).
    """
    target = state.environments.get_environment(environment)
    if target is not None or environment == PROD:
        return Base(target, None, target.snapshot_by_name() if target else {}, target.statements if target else None)
    source = normalize_environment(create_from)
    record = state.environments.get_environment(source)
    if record is None and source != PROD:
        raise PlanError(f"Cannot create environment '{environment}' from '{source}': it does not exist")
    return Base(None, source, record.snapshot_by_name() if record else {}, record.statements if record else None)


def check_statements(plan: Plan, project: Project) -> None:
    """Render the plan's `before_all` / `after_all` for its environment at its execution time, as its
    apply will: an entry that does not render, or that reaches outside the environment
    (core/snapshots/statement_scope.py), refuses the plan before anything is recorded. Not for a plan
    only looked at (`render_added=False`: it renders no more than it must), nor for a project without
    statements: nothing renders, and the environment record it would render them for costs
    thousands of objects in a large project."""
    if not plan.options.render_added or plan.statements.is_empty:
        return
    target = plan.target_environment()
    for stage in Stage:
        render_in_scope(plan.statements, stage, target, root=project.path, gateway=project.gateway,
                        execution_time=ms_to_datetime(plan.execution_time))


def known_snapshots(
    state: StateReader, local: dict[str, Snapshot], base: Base
) -> tuple[dict[SnapshotId, Snapshot], dict[str, Snapshot]]:
    """The local snapshots the state store already holds, and the base's snapshots that local
    ones replace (by model name)."""
    stored = state.snapshots.get_snapshots([s.snapshot_id for s in local.values()])
    replaced = [es.snapshot_id for name, es in base.snapshots.items()
                if name in local and es.identifier != local[name].identifier]
    return stored, {sid.name: s for sid, s in state.snapshots.get_snapshots(replaced).items()}


def promoted_models(changes: ChangeSet, target: Environment | None, *, promote_all: bool) -> list[str]:
    """The models that get a view in the environment, in DAG order.

    All of them in prod or with --include-unmodified; otherwise a development environment shows
    what it changes, plus what it already showed. Symbolic kinds (EMBEDDED, EXTERNAL) never get one.
    """
    shown = changes.changed | set(target.promoted if target else ())
    return [n for n, s in changes.snapshots.items()
            if not s.model.kind.is_symbolic and (promote_all or n in shown)]


def validate_range(
    project: Project, snapshots: dict[str, Snapshot], start: str | None, end: str | None, execution_ms: int
) -> tuple[int, int]:
    """The plan's start and end (ms): as given, else from the earliest model start to the
    execution time. Refuses an end in the future (intervals not over yet would be recorded as
    done) and a start after the end."""
    if start:
        first = to_ms(start)
    else:
        first = min((s for s in snapshot_starts(snapshots, execution_ms).values() if s is not None),
                    default=execution_ms)
    last = to_end_ms(end) if end else execution_ms
    if last > execution_ms:
        raise PlanError("The plan end cannot be in the future")
    if start and first > last:
        raise PlanError(f"The plan start {start} is after its end")
    return first, last


def plan_backfills(
    project: Project,
    log: IntervalReader,
    changes: ChangeSet,
    previous: dict[str, Snapshot],
    *,
    is_prod: bool,
    start: str | None,
    end: str | None,
    execution_ms: int,
    start_of: dict[str, int] | None = None,
    recompute_from: dict[str, int] | None = None,
    only: set[str] | None = None,
    min_intervals: int = 0,
) -> dict[str, Backfill]:
    """The intervals to compute before the environment may use its snapshots.

    Prod fills in every model's gaps; a development environment only its changed models' (the
    others are the base's snapshots, which it reads as they are), or those of `only` (what
    --backfill-model selects, upstream included).
    """
    scope = only if only is not None else set(changes.snapshots) if is_prod else changes.changed
    return compute_backfills(log, changes.snapshots, scope, previous, order=project.dag.sorted(),
                             start=start, end=end,
                             execution_ms=execution_ms, start_of=start_of, recompute_from=recompute_from,
                             min_intervals=min_intervals)


def snapshot_order(snapshots: dict[str, Snapshot]) -> list[str]:
    """Parents before children, from the snapshots' own parent lists (no project needed)."""
    return DAG({n: [p.name for p in s.parents if p.name in snapshots] for n, s in snapshots.items()}).sorted()
