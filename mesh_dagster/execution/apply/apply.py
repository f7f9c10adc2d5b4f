"""Applying a plan: snapshot records → physical tables → backfill → record → views → finalize.

Everything runs under the environment's lock, and every step checks the lock's lease first (the
listener's progress events are the checkpoints inside the physical and backfill steps), so a
process that lost the lock — paused past its lease, or cut off from the state store — stops
before it could change what another holder is changing:

1. The plan must still be based on the environment's record, and the stored snapshots it reuses
   must still exist (the janitor may have deleted them after the plan was built).
2. New snapshots are recorded, physical tables created, missing intervals backfilled. A table the
   environment serves that is gone while its history is recorded is rebuilt: its intervals are
   forgotten and backfilled (execution/intervals/physical_check.py).
3. The environment is recorded — the optimistic check and the lock check in one transaction —
   *before* any view moves: a plan that lost a race fails here with nothing visible changed.
   Before it, the versions the views would show are checked against the audit verdicts that hold
   on them (execution/evaluate/verdicts.py): a failed blocking one stops the apply (before the backfill for
   the models it does not recompute, after it for the others, whose audits it just ran again).
4. The views move. 5. The environment is finalized.

A view that fails in 4 (named with its model: `VirtualUpdateError`) takes the apply back: the
views it moved are put back as the environment served them and its record returns to the last
finalized one (`revert_environment`), so the environment serves what it served before the plan;
a retry once the project is fixed starts from there. A crash between 3 and 5 leaves the
environment recorded but unfinalized, its views partly moved. The store keeps the records it
replaced (`replaced_environment`) until it is finalized, the last finalized one among them
(`served_environment`) is what `mesh run` evaluates meanwhile, and the next apply of the
environment, even one without changes (`Plan.needs_apply`), re-creates every view of its record and
drops the views of the replaced records' models it no longer shows; meanwhile the janitor keeps the
replaced snapshots' tables, which those views may still read.

Signals (execution/intervals/readiness.py) are asked before anything is written. The intervals they hold
back, and those of their children, are left out of the backfill, like intervals whose cron has not
fired yet: the ready rest is computed and recorded, the environment moves, and `mesh run` computes
the waiting intervals once their signals pass (what waits is logged). Except when moving would hide
data: a waiting model with no data at all yet, or waiting intervals that the version it replaces
has (the environment shows them today). Then the apply stops before step 3 (`SignalsPendingError`,
naming them): the environment keeps its record and views, as an interrupted apply leaves them, and
`mesh plan` run again once the signals pass computes only what is still missing, then moves the
views. A signal that raises stops the apply before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mesh_dagster.core.errors import ConflictingPlanError, MeshError, PlanError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill, owed_upstream
from mesh_dagster.core.plan.explanation import changed_views, physical_snapshots
from mesh_dagster.core.plan.forward_only import keeps_table
from mesh_dagster.core.plan.plan import Plan, snapshot_order
from mesh_dagster.core.project.environment_statements import Stage
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.capture import captured_content
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import now_ms, parse_ttl
from mesh_dagster.core.time.intervals import intersect_intervals
from mesh_dagster.execution.apply.virtual import ViewUpdateError, first_line, restore_views, update_views, view_sql
from mesh_dagster.execution.apply.virtual_statements import run_virtual_update_statements
from mesh_dagster.execution.evaluate.environment_statements import run_environment_statements
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.evaluate.migration import MigrationJournal, migrate_table
from mesh_dagster.execution.evaluate.verdicts import RecordingEvaluator, refuse_failed_audits
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.intervals.physical_check import rebuild_missing
from mesh_dagster.execution.intervals.readiness import Readiness, SignalsPendingError, Wait, check_readiness
from mesh_dagster.execution.intervals.scheduler import clear_history, plan_batches, run_batches, upstream_of
from mesh_dagster.execution.intervals.tasks import run_tasks
from mesh_dagster.execution.locking import environment_lock, table_lock
from mesh_dagster.execution.ports import Engine, State
from mesh_dagster.state.store import Lease, LockLostError


def check_base(plan: Plan, state: State) -> None:
    current = state.environments.get_environment(plan.environment)
    expected = plan.base_environment.plan_id if plan.base_environment else None
    actual = current.plan_id if current else None
    if actual != expected:
        raise ConflictingPlanError(
            f"Environment '{plan.environment}' changed (plan {actual}) after this plan was built "
            f"(based on {expected}). Re-run `mesh plan {plan.environment}`."
        )


def check_snapshots_kept(plan: Plan, state: State) -> None:
    """The stored snapshots the plan reuses must still exist: if the janitor deleted one after the
    plan was built, its table and intervals are gone too, and the plan's backfill would miss them.

    Snapshots the environment's record (unchanged, see `check_base`) or, for a new environment,
    its source's current record references are exempt: the janitor never deletes those, so if one
    is missing the store lost it before the plan was built, and the plan rebuilt it from the record.
    """
    new = {s.snapshot_id for s in plan.new_snapshots}
    base = plan.base_environment or (state.environments.get_environment(plan.create_from) if plan.create_from else None)
    kept_by_base = {s.snapshot_id for s in base.snapshots} if base else set()
    reused = {s.snapshot_id for s in [*plan.snapshots.values(), *plan.previous.values()]} - new - kept_by_base
    missing = sorted(reused - state.snapshots.snapshots_exist(reused))
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        names = ", ".join(sid.name for sid in missing[:5]) + more
        raise ConflictingPlanError(
            f"Snapshots this plan reuses were deleted from the state store after it was built (by the janitor?): "
            f"{names}. Nothing was changed; re-run `mesh plan {plan.environment}`."
        )


class VirtualUpdateError(PlanError):
    """A view could not be moved: the apply was taken back (see the module docstring)."""


_HELD: ContextVar[dict[str, Lease] | None] = ContextVar("mesh_environment_locks", default=None)


@contextmanager
def environment_held(state: State, environment: str, owner: str | None = None,
                     timeout_s: float = 600) -> Iterator[Lease]:
    """Hold `environment`'s lock, or reuse the lease this caller already holds on it: a recorded
    plan's status moves under the same lock as its apply (execution/plans/records.py), so a `running`
    record whose environment nobody live holds is one whose apply is gone."""
    held = _HELD.get() or {}
    if environment in held and not held[environment].lost:
        yield held[environment]
        return
    with environment_lock(state, environment, owner, timeout_s) as lease:
        token = _HELD.set({**held, environment: lease})
        try:
            yield lease
        finally:
            _HELD.reset(token)


def apply_plan(plan: Plan, project: Project, state: State, engine: Engine, listener: ApplyListener | None = None,
               owner: str | None = None) -> None:
    """Apply under the environment's lock; the plan must still be based on the environment's state."""
    with environment_held(state, plan.environment, owner) as lease:
        apply_locked(plan, project, state, engine, listener, lease=lease)


def apply_locked(plan: Plan, project: Project, state: State, engine: Engine, listener: ApplyListener | None = None, *,
                 lease: Lease) -> None:
    """`apply_plan` for a caller that already holds the environment's lock (and its `lease`)."""
    guarded = _LeaseGuard(listener or ApplyListener(), lease)
    recorded = False
    try:
        lease.check()
        check_base(plan, state)
        check_snapshots_kept(plan, state)
        plan = rebuild_missing(plan, state, engine, guarded)  # tables gone while their history is recorded
        readiness = backfill_readiness(plan, project, state, engine, guarded)  # before anything is written
        # data a blocking audit failed on is never served; what the backfill recomputes is audited again
        refuse_failed_audits(state, plan, project.audits, set(plan.promoted) - set(readiness.backfills),
                             applying=True)
        run_environment_statements(Stage.BEFORE_ALL, project, engine, plan.target_environment(), guarded,
                                   plan.execution_time)
        state.snapshots.push_snapshots(plan.new_snapshots, plan.recaptured,
                                   captured_content(project, [*plan.new_snapshots, *plan.recaptured]))
        _build(plan, project, state, engine, guarded, readiness.backfills)
        hiding = hiding_waits(plan, state, readiness)
        if hiding:  # the ready part is recorded; the environment stays as it was
            raise SignalsPendingError(plan.environment, hiding, plan.view)
        refuse_failed_audits(state, plan, project.audits, plan.promoted, applying=True)  # with the backfill's verdicts
        if plan.clearings:  # after the backfill: nobody sees a hole while it runs
            state.intervals.remove_intervals([(c.name, c.version, *c.interval) for c in plan.clearings])
        replaced = state.environments.replaced_environment(plan.environment)
        served = state.environments.served_environment(plan.environment)
        state.environments.promote_environment(target_environment(plan, project), lease=lease)
        recorded = True
        _move_views(plan, project, state, engine, guarded, (replaced, served), lease)
        state.environments.finalize_environment(plan.environment, plan.plan_id, lease=lease)
        run_environment_statements(Stage.AFTER_ALL, project, engine, plan.target_environment(), guarded,
                                   plan.execution_time)
    except LockLostError as e:
        raise LockLostError(_lost_message(plan, str(e), recorded)) from e


def backfill_readiness(plan: Plan, project: Project, state: State, engine: Engine,
                       listener: ApplyListener) -> Readiness:
    """The plan's backfill cut down to what its models' signals and parents say is ready
    (execution/intervals/readiness.py): a parent the plan does not compute (a development plan's unchanged
    model) may still owe an interval prod's run has not written. What waits is reported to the
    listener. An empty backfill (`--empty-backfill`) computes nothing, so it asks no signal."""
    if not plan.requires_backfill or plan.empty_backfill:
        return Readiness(dict(plan.backfills))
    order = snapshot_order(plan.snapshots)
    owed = owed_upstream(state.intervals, plan.snapshots, plan.backfills, order=order, execution_ms=plan.execution_time)
    readiness = check_readiness(project.signals, plan.snapshots, plan.backfills, order,
                                plan.execution_time, spark=lambda: engine.session.spark, owed=owed)
    readiness.report(listener, plan.view)
    return readiness


def hiding_waits(plan: Plan, state: State, readiness: Readiness) -> list[Wait]:
    """The waits the environment cannot move over: a model whose new version has no data at all,
    or intervals the version it replaces has (its view shows them today)."""
    if not readiness.waits:
        return []
    names = readiness.waiting
    replaced = {n: p for n in names if (p := plan.previous.get(n)) is not None and p.version
                and p.version != plan.snapshots[n].version}
    present = state.intervals.get_intervals([plan.snapshots[n].interval_key for n in names]
                                  + [p.interval_key for p in replaced.values()])
    hiding = []
    for wait in readiness.waits:
        if not present.get(plan.snapshots[wait.name].interval_key):
            hiding.append(wait)
            continue
        shown = present.get(replaced[wait.name].interval_key, []) if wait.name in replaced else []
        lost = intersect_intervals(wait.intervals, shown)
        if lost:
            hiding.append(Wait(wait.name, lost, wait.reason, wait.unit))
    return hiding


def _build(plan: Plan, project: Project, state: State, engine: Engine, listener: ApplyListener,
           backfills: dict[str, Backfill]) -> None:
    """Physical tables and backfill of `backfills` (the plan's, less what waits for signals):
    nothing an environment shows yet."""
    evaluator = RecordingEvaluator(project, engine, plan.snapshots, allow_destructive=plan.allow_destructive,
                                   allow_additive=plan.allow_additive, state=state, source="apply")
    creating = physical_snapshots(plan) if (plan.new_snapshots or plan.empty_backfill) else []
    if creating:
        listener.physical_start(len(creating))
        create_physical(creating, evaluator, listener, project.concurrent_tasks)
        listener.physical_done(len(creating))
    else:
        listener.log("SKIP: No physical layer updates to perform")
    migrate_kept_tables(plan, state, evaluator, listener)

    if plan.empty_backfill:
        state.intervals.add_intervals([
            (*plan.snapshots[b.name].interval_key,
             *(ALL_TIME if plan.snapshots[b.name].model.kind.is_timeless else interval))
            for b in plan.backfills.values() for interval in b.intervals
        ])
    elif plan.requires_backfill and backfills:
        for backfill in backfills.values():
            if backfill.clear:
                clear_history(state, evaluator, plan.snapshots[backfill.name], backfill.intervals)
        batches = plan_batches(plan.snapshots, backfills, snapshot_order(plan.snapshots))
        run_batches(batches, evaluator, state, plan.execution_time, listener, plan.view,
                    concurrent_tasks=project.concurrent_tasks)
    else:
        listener.log("SKIP: No model batches to execute")


def migrate_kept_tables(plan: Plan, state: State, evaluator: SnapshotEvaluator, listener: ApplyListener) -> None:
    """Migrate the schema of the tables forward-only changes keep, before any write or view reads
    them (a view selecting a column the table lacks would fail). Development environments preview
    forward-only changes in tables of their own: only tables this environment writes are touched.

    Each under its table's lock, journaled (a copy with casts swaps the table: engine/swaps.py). A
    table another write left journaled (a killed run's) is migrated by its next batch instead, once
    the scheduler has finished that write: the journal holds one write per table."""
    kept = [s for n, s in plan.snapshots.items()
            if keeps_table(plan.category(n), s) and not s.is_preview and not s.model.kind.is_symbolic]
    for snap in kept:
        with table_lock(state, snap.table_name) as lease:
            if state.journal.pending_write(snap.table_name) is not None:
                listener.log(f"Schema of {snap.table_name} is checked by its next batch, which first finishes the "
                             "write an interrupted run left")
                continue
            journal = MigrationJournal(state, snap, lease)
            evaluator.create(snap, journal)
            kind = snap.model.kind
            if kind.is_materialized and kind.has_query and not kind.is_incremental:  # rebuilt whole from its query
                _fit_rebuilt_table(snap, evaluator, listener, journal)
            journal.close()
        listener.log(f"Schema of {snap.table_name} checked for {snap.name}'s forward-only change")
    for warning in evaluator.warnings:
        listener.log(f"WARNING: {warning}")


def _fit_rebuilt_table(snap: Snapshot, evaluator: SnapshotEvaluator, listener: ApplyListener,
                       journal: MigrationJournal) -> None:
    """A FULL model under a forward-only change keeps its table until its next run rebuilds it,
    and the evaluator migrates only the tables of incremental kinds: the table takes the new
    query's columns now (its rows read NULL for the new ones), or its view could not select them."""
    migration = migrate_table(evaluator.engine, snap, evaluator.render(snap, stage="creating"),
                              allow_destructive=snap.name in evaluator.allow_destructive,
                              allow_additive=snap.name in evaluator.allow_additive, journal=journal,
                              changing=lambda: evaluator.shapes.changing(snap))
    for warning in migration.warnings if migration is not None else []:
        listener.log(f"WARNING: {warning}")


def create_physical(creating: list[Snapshot], evaluator: SnapshotEvaluator, listener: ApplyListener,
                    concurrent_tasks: int) -> None:
    """Create physical objects, up to `concurrent_tasks` at once: a table is created from its
    query's analysis, which needs the tables it reads, so it waits for those created here."""
    def created(snap: Snapshot, _: None) -> bool:
        listener.physical_progress(snap.name)
        return True

    run_tasks(creating, key=lambda s: s.name, work=evaluator.create, done=created,
              waits_for=upstream_of({s.name for s in creating}, evaluator.snapshots), limit=concurrent_tasks)


def target_environment(plan: Plan, project: Project) -> Environment:
    """The record the apply writes. A plan finishing its own unfinished apply (a resumed plan
    record) keeps the lineage of that apply: it follows the record its first attempt replaced."""
    target = plan.target_environment(_expiration(plan, project))
    base = plan.base_environment
    if base is not None and base.plan_id == plan.plan_id:
        target = target.model_copy(update={"previous_plan_id": base.previous_plan_id})
    return target


def _move_views(plan: Plan, project: Project, state: State, engine: Engine, listener: ApplyListener,
                before: tuple[Environment | None, Environment | None], lease: Lease) -> None:
    """Move the views (`before`: what the environment's views may show besides its record, and
    the record it serves); a view that fails takes the apply back (`_put_back`)."""
    replaced, served = before
    promote, demote = changed_views(plan, replaced)
    if not (promote or demote):
        listener.log("SKIP: No virtual layer updates to perform")
        return
    lease.check()
    columns = _served_columns(plan, engine, served, promote, demote)
    moved: list[str] = []
    try:
        update_views(engine, plan.environment, promote, demote, project, listener, moved)
    except ViewUpdateError as e:
        raise _put_back(plan, project, state, engine, served, columns, moved, lease, e) from e
    run_virtual_update_statements(plan, project, engine, promote, listener)


def _served_columns(plan: Plan, engine: Engine, served: Environment | None, promote: list[Snapshot],
                    demote: list[str]) -> dict[str, list[str]]:
    """The columns of the views about to show another snapshot, as they are now: a view put back
    over a snapshot the project no longer defines selects these (the project knows only its own)."""
    shown = {s.name: s for s in served.snapshots if s.name in served.promoted} if served else {}
    leaving = [s.name for s in promote if s.name in shown and shown[s.name].identifier != s.identifier]
    out: dict[str, list[str]] = {}
    for name in [*leaving, *(n for n in demote if n in shown)]:
        try:
            out[name] = list(engine.catalog.columns(plan.view(name)))
        except Exception:  # noqa: BLE001 - unreadable (or gone): put back selecting every column
            continue
    return out


def _put_back(plan: Plan, project: Project, state: State, engine: Engine, served: Environment | None,
              columns: dict[str, list[str]], moved: list[str], lease: Lease, error: ViewUpdateError) -> PlanError:
    """Put the views `moved` back as `served` showed them and the record back to `served`; the
    error to raise, saying where the environment stands."""
    env = plan.environment
    undo_failed = _restore_views(plan, project, state, engine, served, columns, moved, lease)
    settled_before = plan.base_environment is None or plan.base_environment.finalized_ts is not None
    restored = undo_failed is None and settled_before
    what = f"Plan {plan.plan_id} was not applied to '{env}': {error}."
    try:
        state.environments.revert_environment(env, plan.plan_id, views_restored=restored, lease=lease)
    except MeshError as e:
        return VirtualUpdateError(f"{what} Its record could not be taken back ({first_line(e)}): `mesh run` "
                                  f"runs the last finished plan meanwhile; the next `mesh plan {env}` completes or "
                                  "replaces this one.")
    if restored:
        now = f"'{env}' is back on plan {served.plan_id} and its views were put back" if served else \
            f"'{env}' was not created (the views made so far were dropped)"
    else:
        why = f"putting its views back failed ({undo_failed})" if undo_failed else \
            "its views were already half-moved by an earlier apply"
        serves = f"'{env}' serves plan {served.plan_id} again (`mesh run` runs it)" if served else \
            f"'{env}' has no finished plan to serve"
        now = f"{serves}, but {why}: the next `mesh plan {env}` re-creates them"
    return VirtualUpdateError(f"{what} {now}. Fix the cause and re-run `mesh plan {env}`.")


def _restore_views(plan: Plan, project: Project, state: State, engine: Engine, served: Environment | None,
                   columns: dict[str, list[str]], moved: list[str], lease: Lease) -> str | None:
    """Point the views `moved` back at `served`'s snapshots (or drop them); why not, if that fails."""
    try:
        lease.check()
        wanted = [s.snapshot_id for s in served.snapshots if s.name in served.promoted] if served else []
        snapshots = {s.name: s for s in state.snapshots.get_snapshots(wanted).values()}

        def select(snap: Snapshot) -> str:
            own = plan.snapshots.get(snap.name)
            if own is not None and own.identifier == snap.identifier:  # the project's own snapshot
                return view_sql(snap, project)
            return view_sql(snap, None, columns.get(snap.name))

        restore_views(engine, plan.environment, moved, snapshots, select)
    except Exception as e:  # noqa: BLE001 - the record then says the views are unsettled
        return first_line(e)
    return None


def _expiration(plan: Plan, project: Project) -> int | None:
    if plan.is_prod or plan.environment in project.config.pinned_environments:
        return None
    return now_ms() + parse_ttl(project.config.environment_ttl)


def _lost_message(plan: Plan, reason: str, recorded: bool) -> str:
    env = plan.environment
    if not recorded:
        return (f"{reason} while applying plan {plan.plan_id}: stopped before recording '{env}', so its record "
                f"and views are unchanged (tables built so far are kept). Re-run `mesh plan {env}`.")
    return (f"{reason} while moving the views of '{env}': its record is written but not finalized; the next "
            f"`mesh plan {env}` completes its views.")


class _LeaseGuard(ApplyListener):
    """Forwards progress events, then checks the lease: each event marks the end of one step
    (a table created, a batch recorded, a view moved), so a lost lock stops the next one."""

    def __init__(self, inner: ApplyListener, lease: Lease):
        self._inner = inner
        self._lease = lease

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_"):
            return object.__getattribute__(self, name)
        method = getattr(self._inner, name)
        if not callable(method):
            return method

        def forward(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self._lease.check()
            return result

        return forward
