"""Applying a plan: snapshot records → physical tables → backfill → virtual update.

The environment's views move last, after every backfill batch and blocking audit succeeded, so
they never point at a half-built table; a failure anywhere leaves the environment as it was.
Applies to one environment are serialised by a lock, and the environment record is only written
if nobody else changed it since the plan was built.
"""

from __future__ import annotations

from mesh_dagster.core.dates import now_ms, parse_ttl
from mesh_dagster.core.errors import ConflictingPlanError
from mesh_dagster.core.model import KindName
from mesh_dagster.core.plan import ALL_TIME, Plan
from mesh_dagster.core.project import Project
from mesh_dagster.core.snapshot import Snapshot
from mesh_dagster.execution.evaluator import SnapshotEvaluator
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.locking import environment_lock
from mesh_dagster.execution.scheduler import plan_batches, run_batches
from mesh_dagster.execution.virtual import update_views


def check_base(plan: Plan, state) -> None:
    current = state.get_environment(plan.environment)
    expected = plan.base_environment.plan_id if plan.base_environment else None
    actual = current.plan_id if current else None
    if actual != expected:
        raise ConflictingPlanError(
            f"Environment '{plan.environment}' changed (plan {actual}) after this plan was built "
            f"(based on {expected}). Re-run `mesh plan {plan.environment}`."
        )


def physical_snapshots(plan: Plan) -> list[Snapshot]:
    """Snapshots whose physical object this apply may have to create."""
    reused = {n for n, prev in plan.previous.items() if prev.version == plan.snapshots[n].version}
    names = ({s.name for s in plan.new_snapshots} - reused) | set(plan.backfills)
    return [plan.snapshots[n] for n in plan.snapshots if n in names and not plan.snapshots[n].model.kind.is_symbolic]


def changed_views(plan: Plan) -> tuple[list[Snapshot], list[str]]:
    """Views to create or replace, and model names whose views go away."""
    base = plan.base_environment
    before = base.snapshot_by_name() if base else {}
    shown_before = set(base.promoted) if base else set()
    promote = [
        plan.snapshots[n] for n in plan.promoted
        if n not in shown_before or before.get(n) is None or before[n].identifier != plan.snapshots[n].identifier
        or plan.is_new_environment
    ]
    demote = sorted(shown_before - set(plan.promoted))
    return promote, demote


def apply_plan(plan: Plan, project: Project, state, engine, listener: ApplyListener | None = None,
               owner: str | None = None) -> None:
    """Apply under the environment's lock; the plan must still be based on the environment's state."""
    with environment_lock(state, plan.environment, owner):
        apply_locked(plan, project, state, engine, listener)


def apply_locked(plan: Plan, project: Project, state, engine, listener: ApplyListener | None = None) -> None:
    """`apply_plan` for a caller that already holds the environment's lock (and built the plan under it)."""
    listener = listener or ApplyListener()
    check_base(plan, state)
    state.push_snapshots(plan.new_snapshots)
    evaluator = SnapshotEvaluator(project, engine, plan.snapshots)

    creating = physical_snapshots(plan) if (plan.new_snapshots or plan.empty_backfill) else []
    if creating:
        listener.physical_start(len(creating))
        for snap in creating:
            evaluator.create(snap)
            listener.physical_progress(snap.name)
        listener.physical_done(len(creating))
    else:
        listener.log("SKIP: No physical layer updates to perform")

    if plan.empty_backfill:
        state.add_intervals([
            (b.name, plan.snapshots[b.name].version, *(ALL_TIME if plan.snapshots[b.name].model.kind.name
                                                       in (KindName.SEED, KindName.VIEW) else interval))
            for b in plan.backfills.values() for interval in b.intervals
        ])
    elif plan.requires_backfill:
        batches = plan_batches(plan.snapshots, plan.backfills, project.dag.sorted())
        run_batches(batches, evaluator, state, plan.execution_time, listener, plan.view)
    else:
        listener.log("SKIP: No model batches to execute")

    promote, demote = changed_views(plan)
    if promote or demote:
        update_views(engine, plan.environment, promote, demote, project, listener)
    else:
        listener.log("SKIP: No virtual layer updates to perform")
    expiration = None
    if not plan.is_prod and plan.environment not in project.config.pinned_environments:
        expiration = now_ms() + parse_ttl(project.config.environment_ttl)
    state.promote_environment(plan.target_environment(expiration))
    state.finalize_environment(plan.environment, plan.plan_id)
