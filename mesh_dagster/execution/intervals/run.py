"""`mesh run`: process the intervals whose cron is due, for the snapshots of an environment.

Nothing is compared with the local project: the environment's own snapshots are evaluated, and
its views do not move. Those of the plan it serves: while an apply is unfinished (stopped or
killed before its views all moved), the last finalized record's, never the unfinished plan's.
`--select-model` selects among the environment's models (not the project's), and adds what they
read unless told not to: a model is only current once its parents are.
"""

from __future__ import annotations

from collections.abc import Sequence

from mesh_dagster.core.config.names import normalize_environment, view_name
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.backfills import compute_backfills, owed_upstream
from mesh_dagster.core.plan.plan import snapshot_order
from mesh_dagster.core.plan.selectors import ModelIndex, select_models
from mesh_dagster.core.project.environment_statements import Stage
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import now_ms, to_ms
from mesh_dagster.execution.evaluate.environment_statements import run_environment_statements
from mesh_dagster.execution.evaluate.verdicts import RecordingEvaluator
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.intervals.physical_check import refuse_missing
from mesh_dagster.execution.intervals.readiness import check_readiness
from mesh_dagster.execution.intervals.scheduler import plan_batches, run_batches
from mesh_dagster.execution.locking import snapshots_in_use
from mesh_dagster.execution.ports import Engine, State


def environment_snapshots(state: State, environment: str, listener: ApplyListener | None = None):
    env = state.environments.get_environment(environment)
    if env is None:
        raise PlanError(f"Environment '{environment}' does not exist. Run `mesh plan {environment}` first.")
    if env.finalized_ts is None:
        served = state.environments.served_environment(environment)
        if served is None:
            raise PlanError(f"Environment '{environment}' has no finished plan: the apply of plan {env.plan_id} did "
                            f"not finish, and nothing is run from it. Run `mesh plan {environment}` to complete it.")
        if listener is not None:
            listener.log(f"The apply of plan {env.plan_id} to '{environment}' did not finish: running the snapshots "
                         f"of plan {served.plan_id}, which it serves")
        env = served
    stored = state.snapshots.get_snapshots([s.snapshot_id for s in env.snapshots])
    return env, {s.name: s for s in stored.values()}


def run_environment(project: Project, state: State, engine: Engine, environment: str = "prod", *,
                    execution_time: str | int | None = None, ignore_cron: bool = False,
                    start: str | None = None, end: str | None = None,
                    select: Sequence[str] | None = None, auto_upstream: bool = True,
                    listener: ApplyListener | None = None) -> int:
    """Evaluate every due, missing interval whose signals say it is ready; returns the number of
    batches executed. Intervals that wait for a signal (and those of their children) are reported
    to the listener and left missing: a later run computes them once ready.

    `select` (selectors) limits the run to the models it selects and, with `auto_upstream`,
    everything upstream of them. A table of theirs that is gone while its history is recorded
    stops the run before anything is written (execution/intervals/physical_check.py): rebuilding a history
    is a plan's decision.
    """
    with snapshots_in_use(state):  # the janitor keeps away from what this run writes
        listener = listener or ApplyListener()
        environment = normalize_environment(environment)
        execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
        env, snapshots = environment_snapshots(state, environment, listener)
        order = snapshot_order(snapshots)
        scope = run_scope(snapshots, select, auto_upstream=auto_upstream) if select else set(snapshots)
        backfills = compute_backfills(state.intervals, snapshots, scope, {}, order=order,
                                      start=start, end=end, execution_ms=execution_ms,
                                      ignore_cron=ignore_cron, end_bounded=False)
        def shown(name: str) -> str:  # a standalone audit has no view: its name
            return name if snapshots[name].model.kind.is_standalone_audit else view_name(name, environment)

        refuse_missing(state, engine, [snapshots[n] for n in scope], environment, listener, shown)
        owed = owed_upstream(state.intervals, snapshots, backfills, order=order, execution_ms=execution_ms)
        readiness = check_readiness(project.signals, snapshots, backfills, order, execution_ms,
                                    spark=lambda: engine.session.spark, owed=owed)
        readiness.report(listener, shown)
        batches = plan_batches(snapshots, readiness.backfills, order)
        if not batches:
            listener.log("Nothing to run: every due interval waits (for a signal, or for upstream data)"
                         if readiness.waits else "All intervals are up to date: nothing to run")
            return 0
        run_environment_statements(Stage.BEFORE_ALL, project, engine, env, listener, execution_ms)
        evaluator = RecordingEvaluator(project, engine, snapshots, state=state, source="run")
        run_batches(batches, evaluator, state, execution_ms, listener, shown,
                    concurrent_tasks=project.concurrent_tasks)
        run_environment_statements(Stage.AFTER_ALL, project, engine, env, listener, execution_ms)
        return len(batches)


def run_scope(snapshots: dict[str, Snapshot], selectors: Sequence[str], *, auto_upstream: bool = True) -> set[str]:
    """The environment's models `selectors` select, and (with `auto_upstream`) their upstream."""
    index = ModelIndex.of_snapshots(snapshots)
    selected = select_models(selectors, index, flag="--select-model")
    return index.with_upstream(selected) if auto_upstream else selected
