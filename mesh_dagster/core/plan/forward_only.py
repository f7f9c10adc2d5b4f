"""Forward-only changes in a plan: which changes keep their tables, what previews development
environments read instead, what `--effective-from` recomputes, and what the kept tables' schemas
must become (judged by their policies, core/plan/schema_changes.py).

Prod keeps a forward-only model's table and migrates its schema; a development environment cannot
write there, so it reads the change (and every model below it) from preview tables filled over a
preview range: `--start`, else each model's last complete interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.changes import ChangeSet
from mesh_dagster.core.plan.schema_changes import SchemaChange, plan_schema_changes
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot
from mesh_dagster.core.time.cron import cron_floor_ms, cron_prev_ms
from mesh_dagster.core.time.dates import to_ms


@dataclass(frozen=True)
class ForwardOnlyStep:
    """What the plan takes from its forward-only changes."""

    effective_ms: int | None
    schema_changes: dict[str, SchemaChange]
    previews: list[str]
    preview_starts: dict[str, int]
    recompute_from: dict[str, int]
    warnings: list[str]


def plan_forward_only(project: Project, changes: ChangeSet, previous: dict[str, Snapshot], *, is_prod: bool,
                      effective_from: str | None, start: str | None, end_ms: int, execution_ms: int,
                      allow_destructive: frozenset[str], allow_additive: frozenset[str]) -> ForwardOnlyStep:
    """Judge the kept tables' schema changes, swap the development environment's previews into
    `changes.snapshots`, and work out what `--effective-from` recomputes in prod."""
    forward = forward_only_changes(changes)
    effective_ms = validate_effective_from(effective_from, forward, execution_ms)
    schema_changes = plan_schema_changes(project, changes.snapshots, previous, forward,
                                         allow_destructive=allow_destructive, allow_additive=allow_additive)
    previews = [] if is_prod else preview_models(changes, forward)
    for name in previews:
        changes.snapshots[name] = changes.snapshots[name].preview()
    warnings = [w for change in schema_changes.values() for w in change.verdict.warnings]
    warnings += kept_below_breaking(changes, forward) if is_prod else []
    recompute, skipped = effective_recomputes(changes, forward, effective_ms) if is_prod else ({}, [])
    warnings += [f"--effective-from does not apply to {name}: its history is not recomputed per interval"
                 for name in skipped]
    return ForwardOnlyStep(effective_ms, schema_changes, previews, preview_starts(changes, previews, start, end_ms),
                           recompute, warnings)


def forward_only_changes(changes: ChangeSet) -> list[str]:
    """Models whose change keeps their table (forward-only, relative to the base), DAG order."""
    return [n for n, c in changes.categories.items() if keeps_table(c, changes.snapshots[n])]


def keeps_table(category: ChangeCategory | None, snapshot: Snapshot) -> bool:
    """Whether a change (`category`, relative to the base) keeps the model's table: a forward-only
    change, or a forward-only model below a breaking change. SQLMesh shows the latter as
    INDIRECT_BREAKING, yet keeps its table (and previews it in development), as for a direct one:
    a forward-only model's history (an SCD type 2 table's above all) is never rebuilt."""
    if snapshot.change_category != ChangeCategory.FORWARD_ONLY:
        return False
    return category == ChangeCategory.FORWARD_ONLY or (category == ChangeCategory.INDIRECT_BREAKING
                                                       and snapshot.model.forward_only)


def kept_below_breaking(changes: ChangeSet, forward: list[str]) -> list[str]:
    """Warnings for the forward-only models a breaking change above keeps (prod): their history
    stays as it was computed; only intervals processed from now on read the new parent data."""
    return [f"{name} is forward-only: it keeps its table, whose rows were computed from the data before the "
            f"breaking change above it; the new data reaches it from its next intervals on (as in SQLMesh)"
            for name in forward if changes.categories[name] == ChangeCategory.INDIRECT_BREAKING]


def validate_effective_from(effective_from: str | None, forward: list[str], execution_ms: int) -> int | None:
    """`--effective-from`: only for a plan with forward-only changes, and not in the future."""
    if effective_from is None:
        return None
    if not forward:
        raise PlanError("--effective-from only applies to forward-only changes, and this plan has none "
                        "(plan with --forward-only, or change a model whose kind sets forward_only true)")
    effective_ms = to_ms(effective_from)
    if effective_ms > execution_ms:
        raise PlanError(f"--effective-from {effective_from} is in the future")
    return effective_ms


def effective_recomputes(changes: ChangeSet, forward: list[str], effective_ms: int | None
                         ) -> tuple[dict[str, int], list[str]]:
    """When each forward-only model recomputes from (its interval containing `effective_ms`), and
    the models it cannot apply to (histories that are not recomputed interval by interval)."""
    if effective_ms is None:
        return {}, []
    recompute: dict[str, int] = {}
    skipped: list[str] = []
    for name in forward:
        model = changes.snapshots[name].model
        if model.kind.restates_full_history or model.disable_restatement or not model.kind.is_incremental:
            skipped.append(name)
        else:
            recompute[name] = model.interval_unit.floor(effective_ms)
    return recompute, skipped


def preview_models(changes: ChangeSet, forward: list[str]) -> list[str]:
    """The models a development environment must read from previews: its forward-only changes
    (prod keeps their tables, so the environment cannot write its rows there) and every model
    below them that holds data or is a view (else it would show rows built on prod's old rows,
    or, as SQLMesh on Spark does, nothing at all)."""
    previewed: set[str] = set(forward)
    for name, snap in changes.snapshots.items():  # parents first
        if name in previewed or snap.model.kind.is_symbolic:
            continue
        if any(p.name in previewed for p in snap.parents):
            previewed.add(name)
    return [n for n in changes.snapshots if n in previewed]


def preview_starts(changes: ChangeSet, previews: list[str], start: str | None, end_ms: int) -> dict[str, int]:
    """Where each preview starts: the plan's --start, else the model's last complete interval."""
    if start is not None:
        return {name: to_ms(start) for name in previews}
    out = {}
    for name in previews:
        model = changes.snapshots[name].model
        out[name] = cron_prev_ms(model.cron, cron_floor_ms(model.cron, end_ms, model.cron_tz), model.cron_tz)
    return out
