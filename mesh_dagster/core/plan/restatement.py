"""Restatement plans: recompute a range of some models, and everything below them, as they are.

A restatement changes no definition: it works on the environment's own snapshots (local edits are
not part of it), recomputes the selected models and all their descendants over the range — each
widened to whole intervals of its own unit, and never past what the environment has processed —
and, in prod, afterwards forgets the same range for the other versions of those models that
development environments read, so the next `mesh run` there refills them from the new data.

Kinds whose history cannot be recomputed interval by interval are rebuilt whole; models that
protect their history (`disable_restatement`), seeds, and (in development environments) models
whose table prod uses are skipped with a warning.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from mesh_dagster.core.config.names import PROD, normalize_environment
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill, Clearing
from mesh_dagster.core.plan.plan import Plan, StateReader, snapshot_order
from mesh_dagster.core.plan.selectors import ModelIndex, select_models
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.snapshots.statements import EnvironmentStatements
from mesh_dagster.core.time.intervals import Interval, intersect_intervals, merge_intervals


def build_restatement(state: StateReader, environment: str, selectors: Sequence[str], *,
                      start_ms: int | None, end_ms: int | None, execution_ms: int) -> Plan:
    """The plan that restates the models `selectors` choose among the environment's (selector
    syntax, core/plan/selectors.py), and their descendants."""
    environment = normalize_environment(environment)
    env = state.environments.get_environment(environment)
    if env is None:
        raise PlanError(f"Cannot restate in '{environment}': the environment does not exist")
    snapshots = _environment_snapshots(state, env)
    chosen = select_models(selectors, ModelIndex.of_snapshots(snapshots), flag=f"--restate-model (in '{environment}')")
    order = snapshot_order(snapshots)
    restated = _with_descendants(chosen, snapshots, order)
    prod = state.environments.get_environment(PROD) if environment != PROD else None
    prod_versions = {(s.name, s.version) for s in prod.snapshots} if prod else set()
    low = start_ms if start_ms is not None else 0
    high = end_ms if end_ms is not None else execution_ms
    if high <= low:
        raise PlanError("The restatement range is empty: its start is not before its end")
    present = state.intervals.get_intervals([snapshots[n].interval_key for n in restated if _has_table(snapshots[n])])

    backfills: dict[str, Backfill] = {}
    warnings: list[str] = []
    for name in restated:
        snap = snapshots[name]
        skip = _skip_reason(snap, environment, prod_versions)
        if skip:
            if name in chosen or not snap.model.kind.is_symbolic:
                warnings.append(f"{name} is not restated: {skip}")
            continue
        backfill, note = _restated_range(snap, present.get(snap.interval_key, []), low, high)
        if note:
            warnings.append(note)
        if backfill is not None:
            backfills[name] = backfill
    clearings = _dev_clearings(state, environment, snapshots, backfills) if environment == PROD else []
    return Plan(
        plan_id=uuid.uuid4().hex, environment=environment, base_environment=env, create_from=None,
        snapshots={n: snapshots[n] for n in order}, new_snapshots=[], added=[], removed=[], directly_modified=[],
        indirectly_modified={}, metadata_updated=[], previous={}, backfills=backfills, promoted=list(env.promoted),
        start=low, end=high, execution_time=execution_ms, warnings=warnings, restated=sorted(backfills),
        clearings=clearings, statements=env.statements or EnvironmentStatements(), base_statements=env.statements,
    )


def _environment_snapshots(state: StateReader, env: Environment) -> dict[str, Snapshot]:
    """The environment's snapshots as it records them (a preview's own table, in development)."""
    stored = state.snapshots.get_snapshots([s.snapshot_id for s in env.snapshots])
    recorded = {s.snapshot_id: s for s in env.snapshots}
    missing = sorted(sid.name for sid in recorded if sid not in stored)
    if missing:
        raise PlanError(f"The state store lost snapshots of '{env.name}' ({', '.join(missing)}): re-plan it first")
    return {sid.name: snap.as_recorded(recorded[sid].version) for sid, snap in stored.items()}


def _with_descendants(chosen: set[str], snapshots: dict[str, Snapshot], order: list[str]) -> list[str]:
    out = set(chosen)
    for name in order:
        if any(p.name in out for p in snapshots[name].parents if p.name in snapshots):
            out.add(name)
    return [n for n in order if n in out]


def _has_table(snap: Snapshot) -> bool:
    return not snap.model.kind.is_symbolic


def _skip_reason(snap: Snapshot, environment: str, prod_versions: set[tuple[str, str]]) -> str | None:
    model = snap.model
    if model.kind.is_symbolic:
        return "it has no table (only the models below it are recomputed)"
    if not model.kind.has_query:
        return "a seed is reloaded from its file, never restated"
    if model.disable_restatement:
        return "its kind sets disable_restatement"
    if environment != PROD and (snap.name, snap.version or "") in prod_versions:
        return f"its table is the one prod uses: restate it in prod instead (`mesh plan --restate-model {snap.name}`)"
    return None


def _restated_range(snap: Snapshot, present: list[Interval], low: int, high: int) -> tuple[Backfill | None, str | None]:
    """What restating `[low, high)` recomputes for one model: its processed intervals in that range,
    widened to whole intervals of its unit; a kind built whole is rebuilt, a history-keeping one
    that cannot be recomputed interval by interval is rebuilt over all its processed history."""
    model = snap.model
    if model.kind.is_timeless or not model.kind.is_incremental and not model.kind.restates_full_history:
        return Backfill(snap.name, [ALL_TIME], True), None
    if not present:
        return None, None
    if model.kind.restates_full_history:
        note = f"{snap.name}: its history cannot be recomputed interval by interval, so all of it is rebuilt"
        return Backfill(snap.name, merge_intervals(present), False, clear=True), note
    unit = model.interval_unit
    widened = (unit.floor(low), unit.ceil(high))
    inside = intersect_intervals(present, [widened])
    return (Backfill(snap.name, inside, False) if inside else None), None


def _dev_clearings(state: StateReader, environment: str, snapshots: dict[str, Snapshot],
                   backfills: dict[str, Backfill]) -> list[Clearing]:
    """For a prod restatement: the same intervals of the other versions of the restated models that
    development environments read (recomputing prod's table does not reach those)."""
    out: list[Clearing] = []
    seen: set[tuple[str, str]] = set()
    for env in state.environments.get_environments():
        if env.name == environment:
            continue
        for es in env.snapshots:
            backfill = backfills.get(es.name)
            if backfill is None or es.version == snapshots[es.name].version or (es.name, es.version) in seen:
                # (models only development environments have are not restated by prod: left alone)
                continue
            seen.add((es.name, es.version))
            out += [Clearing(es.name, es.version, interval) for interval in backfill.intervals]
    return out
