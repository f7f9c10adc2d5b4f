"""Materializing models of an environment for a time range, outside of a plan apply.

This is what a Dagster partition materialization does (and what any front door may call): the
*current* snapshots of the named models — the local project categorised against the environment,
exactly the snapshots `mesh plan <env>` would apply — are pushed to the state store, evaluated
into their physical tables for `[start, end)`, audited batch by batch, and their intervals are
recorded. The environment's views never move here: promotion does that, once nothing is missing.
A requested interval a model's signal says is not ready is refused before anything is written, and
`pending_intervals` (what a Dagster schedule tick requests) leaves out what waits for a signal.

Results are yielded model by model, parents first, as they finish, so a caller can report each
one while the next runs. A model that fails (its query, its Python code, a blocking audit, a parent
it reads lacking data) is reported as FAILED and its remaining intervals are not recorded; the
models reading it (directly or through EMBEDDED ones) are reported as BLOCKED without being
evaluated, and every other model is still evaluated; so is a model whose table is gone while its
history is recorded, before anything is written (execution/intervals/physical_check.py). Errors of the whole
run (the state store, a signal refusing the range) still end the iteration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.errors import MeshError, StateError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill, compute_backfills
from mesh_dagster.core.plan.plan import Plan, build_plan, model_start_ms
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.capture import captured_content
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import now_ms, to_end_ms, to_ms
from mesh_dagster.core.time.intervals import Interval, format_interval_range, intervals_cover, subtract_intervals
from mesh_dagster.execution.evaluate.evaluator import AuditResult, SnapshotEvaluator
from mesh_dagster.execution.evaluate.verdicts import RecordingEvaluator
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.intervals.physical_check import MissingTable, check_tables
from mesh_dagster.execution.intervals.readiness import check_readiness, require_ready
from mesh_dagster.execution.intervals.scheduler import execute_batches, plan_batches
from mesh_dagster.execution.locking import snapshots_in_use
from mesh_dagster.execution.ports import Engine, State


class Outcome(str, Enum):
    EVALUATED = "evaluated"  # queries ran and the intervals were recorded (or an audit blocked them)
    REUSED = "reused"  # a seed or view already built for this version: nothing to redo
    EMPTY = "empty"  # the range lies outside the model's start/end: nothing to compute
    FAILED = "failed"  # its evaluation or a blocking audit failed: see `error`
    BLOCKED = "blocked"  # not evaluated: a model it reads failed (or was blocked) in this run


@dataclass
class ModelMaterialization:
    """What materializing one model did."""

    name: str
    snapshot: Snapshot
    outcome: Outcome
    window: Interval | None  # the part of the requested range inside the model's lifetime
    recorded: list[Interval] = field(default_factory=list)  # intervals added to the state store
    audited: list[tuple[Interval, list[AuditResult]]] = field(default_factory=list)  # per batch: its audits
    error: MeshError | None = None  # why it failed (an `AuditError` for a blocking audit)
    seconds: float = 0.0
    blocked_by: str | None = None  # BLOCKED: the failed model it reads (through any blocked ones)

    @property
    def succeeded(self) -> bool:
        return self.error is None and self.outcome != Outcome.BLOCKED

    @property
    def audits(self) -> list[AuditResult]:
        """Every audit result, batch after batch (each batch runs the model's audits in order)."""
        return [a for _, results in self.audited for a in results]

    def describe_window(self) -> str:
        if self.window is None:
            return "empty"
        if self.window == ALL_TIME:
            return "all time"
        return format_interval_range([self.window], self.snapshot.model.interval_unit)


def current_plan(project: Project, state: State, environment: str, execution_time: int | None = None) -> Plan:
    """The plan `mesh plan <environment>` would build now; its snapshots are the current ones."""
    return build_plan(project, state, environment, execution_time=execution_time, allow_empty=True)


def model_window(snapshot: Snapshot, project: Project, start: int, end: int) -> Interval | None:
    """`[start, end)` clipped to the model's own start and end (None when nothing is left).

    A model with a lookback also recomputes the `lookback` intervals before the range, as a
    backfill of that range would.
    """
    model = snapshot.model
    if model.kind.is_timeless:
        return ALL_TIME
    window = _clip_to_lifetime(snapshot, project, (start, end))
    if window is None or not model.lookback:
        return window
    unit = model.interval_unit
    earlier = unit.shift(unit.floor(window[0]), -model.lookback)
    first = model_start_ms(model, project)
    return (earlier if first is None else max(earlier, unit.floor(first))), window[1]


def _clip_to_lifetime(snapshot: Snapshot, project: Project, interval: Interval) -> Interval | None:
    """`interval` clipped to the model's own start and end (the model has no data outside them)."""
    model = snapshot.model
    first = model_start_ms(model, project)
    low = interval[0] if first is None else max(interval[0], model.interval_unit.floor(first))
    high = interval[1] if model.end is None else min(interval[1], to_end_ms(model.end))
    return (low, high) if low < high else None


def materialize(
    project: Project,
    state: State,
    engine_factory: Callable[[], Engine],
    environment: str,
    names: list[str],
    start: int | str,
    end: int | str,
    *,
    execution_time: int | str | None = None,
    listener: ApplyListener | None = None,
    before_write: Callable[[], None] | None = None,
) -> Iterator[ModelMaterialization]:
    """Evaluate `names` of `environment` for `[start, end)`; yields one result per model.

    Lazy: nothing happens until iterated. Spark is only started when something is evaluated.
    The janitor keeps away meanwhile: the snapshots pushed here belong to no environment yet.
    `before_write` is called once, before the first evaluation: the caller's run runs the
    environment's `before_all` there (execution/intervals/statement_runs.py), and its `after_all` once the run's
    last model succeeded.
    """
    with snapshots_in_use(state):
        yield from _materialize(project, state, engine_factory, environment, names, start, end,
                                execution_time=execution_time, listener=listener, before_write=before_write)


def _materialize(
    project: Project,
    state: State,
    engine_factory: Callable[[], Engine],
    environment: str,
    names: list[str],
    start: int | str,
    end: int | str,
    *,
    execution_time: int | str | None,
    listener: ApplyListener | None,
    before_write: Callable[[], None] | None,
) -> Iterator[ModelMaterialization]:
    listener = listener or ApplyListener()
    start_ms, end_ms = to_ms(start), to_ms(end)
    execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
    plan, windows = _prepare(project, state, engine_factory, environment, names, (start_ms, end_ms), execution_ms)
    snapshots = plan.snapshots
    evaluator: SnapshotEvaluator | None = None
    missing: dict[str, MissingTable] = {}  # models whose table is gone while their history is recorded
    failed: dict[str, str] = {}  # a failed or blocked model -> the failed model behind it
    for name, (window, reused) in windows.items():
        skipped = _not_evaluated(snapshots[name], snapshots, window, reused, failed, listener, environment)
        if skipped is not None:
            yield skipped
            continue
        assert window is not None  # an empty window is not evaluated
        if evaluator is None:
            evaluator = RecordingEvaluator(project, engine_factory(), snapshots, state=state, source="materialize")
            evaluated = [snapshots[n] for n, (w, r) in windows.items() if w and not r]
            missing = {m.snapshot.name: m for m in check_tables(state, evaluator.engine, evaluated, listener)}
            if before_write is not None:
                before_write()
        result = _evaluate_reporting(evaluator, snapshots[name], window, (start_ms, end_ms), state, execution_ms,
                                     listener, environment, missing.get(name))
        if result.error is not None:
            failed[name] = name
        yield result


def _prepare(project: Project, state: State, engine_factory: Callable[[], Engine], environment: str,
             names: list[str], requested: Interval,
             execution_ms: int) -> tuple[Plan, dict[str, tuple[Interval | None, bool]]]:
    """Before anything is written: the current plan, each named model's window (parents first) and
    whether it is reused; requested intervals a signal says are not ready are refused. The plan's
    new snapshots are then pushed, as an apply does first: later plans see these versions."""
    plan = current_plan(project, state, environment, execution_ms)
    snapshots = plan.snapshots
    _check_names(names, snapshots)
    wanted = set(names)
    windows = {name: _window_to_compute(snapshots[name], project, state, *requested)
               for name in project.dag.sorted() if name in wanted}
    for name, (window, reused) in windows.items():
        if window is not None and not reused:
            require_ready(project.signals, snapshots[name], window, execution_ms,
                          spark=lambda: engine_factory().session.spark, view=view_name(name, environment))
    state.snapshots.push_snapshots(plan.new_snapshots, plan.recaptured,
                                   captured_content(project, [*plan.new_snapshots, *plan.recaptured]))
    return plan, windows


def _not_evaluated(snap: Snapshot, snapshots: dict[str, Snapshot], window: Interval | None, reused: bool,
                   failed: dict[str, str], listener: ApplyListener,
                   environment: str) -> ModelMaterialization | None:
    """The result of a model that is not evaluated (it reads a failed one, its window is empty, or it
    is already built), or None when it is to be evaluated. A blocked model joins `failed`."""
    name = snap.name
    culprit = next((failed[p] for p in _read_models(snap, snapshots) if p in failed), None)
    if culprit is not None:
        failed[name] = culprit
        listener.log(f"{view_name(name, environment)}: not evaluated, it reads "
                     f"{view_name(culprit, environment)}, which failed")
        return ModelMaterialization(name, snap, Outcome.BLOCKED, window, blocked_by=culprit)
    if window is None:
        listener.log(f"{view_name(name, environment)}: nothing to do before the model's start or after its end")
        return ModelMaterialization(name, snap, Outcome.EMPTY, None)
    if reused:
        return ModelMaterialization(name, snap, Outcome.REUSED, window)
    return None


def _evaluate_reporting(evaluator: SnapshotEvaluator, snap: Snapshot, window: Interval, requested: Interval,
                        state: State, execution_ms: int, listener: ApplyListener, environment: str,
                        missing: MissingTable | None = None) -> ModelMaterialization:
    """`_evaluate`, with a failure of the model (not of the state store) as a FAILED result, logged;
    a model whose table is `missing` fails before anything is written."""
    began = time.perf_counter()
    try:
        if missing is not None:
            raise missing.refusal(view_name(snap.name, environment), environment)
        result = _evaluate(evaluator, snap, window, requested, state, execution_ms, listener, environment)
    except StateError:
        raise  # the state store is gone: nothing more can be recorded for anyone
    except MeshError as e:
        result = ModelMaterialization(snap.name, snap, Outcome.FAILED, window, error=e,
                                      seconds=time.perf_counter() - began)
    if result.error is not None:
        result.outcome = Outcome.FAILED
        listener.log(f"{view_name(snap.name, environment)} failed: {result.error}")
    return result


def _window_to_compute(snap: Snapshot, project: Project, state: State, start_ms: int,
                       end_ms: int) -> tuple[Interval | None, bool]:
    """The model's window for the requested range, and whether it is a timeless model already
    built for this version (nothing to redo)."""
    window = model_window(snap, project, start_ms, end_ms)
    reused = window == ALL_TIME and intervals_cover(
        state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, []), ALL_TIME)
    return window, reused


def _check_names(names: list[str], snapshots: dict[str, Snapshot]) -> None:
    unknown = sorted(n for n in names if n not in snapshots)
    if unknown:
        raise MeshError(f"Unknown model(s): {', '.join(unknown)}")
    symbolic = sorted(n for n in names if snapshots[n].model.kind.is_symbolic)
    if symbolic:
        kinds = ", ".join(f"{n} ({snapshots[n].model.kind.name.value})" for n in symbolic)
        raise MeshError(f"Cannot materialize {kinds}: these kinds have no physical table")


def _evaluate(evaluator: SnapshotEvaluator, snap: Snapshot, window: Interval, requested: Interval, state: State,
              execution_ms: int, listener: ApplyListener, environment: str) -> ModelMaterialization:
    """Evaluate, audit and record each batch of one model, like a backfill does."""
    began = time.perf_counter()
    _check_parents(evaluator, snap, requested if window == ALL_TIME else window, state, environment)
    _check_past(evaluator.project, snap, window, state, environment)
    model = snap.model
    full = not model.kind.is_incremental
    batches = plan_batches({snap.name: snap}, {snap.name: Backfill(snap.name, [window], full)}, [snap.name])
    result = ModelMaterialization(snap.name, snap, Outcome.EVALUATED, window)
    for batch in execute_batches(batches, evaluator, state, execution_ms, listener,
                                 lambda n: view_name(n, environment), concurrent_tasks=model.batch_concurrency):
        result.audited.append((batch.interval or window, batch.audits))
        if batch.error is not None:
            result.error = batch.error
            break
        assert batch.recorded is not None  # only a failed batch records nothing
        result.recorded.append(batch.recorded)
    result.seconds = time.perf_counter() - began
    return result


def _check_parents(evaluator: SnapshotEvaluator, snap: Snapshot, need: Interval, state: State,
                   environment: str) -> None:
    """A child reads its parents' current versions: each must exist and hold the data of the range
    the child computes (within the parent's own start and end). Otherwise the child's interval
    would be recorded over missing rows and never recomputed; say what to materialize first."""
    parents = [p for p in _data_parents(evaluator, snap) if not p.model.kind.is_external]
    child = view_name(snap.name, environment)
    for parent in parents:
        if not evaluator.engine.catalog.table_exists(parent.table_name):
            raise MeshError(
                f"Cannot materialize {child}: it reads {parent.name}, whose current version ({parent.table_name}) "
                f"has not been built yet. Materialize {view_name(parent.name, environment)} first (or both in one run)."
            )
    present = state.intervals.get_intervals([p.interval_key for p in parents])
    for parent in parents:
        wanted = need if parent.model.kind.is_timeless else _clip_to_lifetime(parent, evaluator.project, need)
        missing = subtract_intervals([wanted], present.get(parent.interval_key, [])) if wanted else []
        if missing:
            unit = parent.model.interval_unit
            raise MeshError(
                f"Cannot materialize {child} for {format_interval_range([need], snap.model.interval_unit)}: "
                f"it reads {parent.name}, whose current version has no data for "
                f"{format_interval_range(missing, unit)}. Materialize {view_name(parent.name, environment)} for "
                f"those partitions first (or both in one run)."
            )


def _check_past(project: Project, snap: Snapshot, window: Interval, state: State, environment: str) -> None:
    """A model that builds on its past (it reads its own table, or folds each batch into a history)
    computes an interval only once the interval before it is recorded: otherwise it would compute
    from a table missing that interval, and stay wrong once the interval is filled in later."""
    if not snap.depends_on_past or window == ALL_TIME:
        return
    unit = snap.model.interval_unit
    begin = unit.floor(window[0])
    first = model_start_ms(snap.model, project)
    present = state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, [])
    if (begin <= unit.floor(first)) if first is not None else not present:
        return  # its first interval: nothing before it
    previous = (unit.shift(begin, -1), begin)
    if not intervals_cover(present, previous):
        name = view_name(snap.name, environment)
        raise MeshError(
            f"Cannot materialize {name} for {format_interval_range([window], unit)}: it builds on its previous "
            f"intervals, and {format_interval_range([previous], unit)} is not done yet. Materialize {name} from its "
            "first missing partition on (its partitions run in order).")


def _read_models(snap: Snapshot, snapshots: dict[str, Snapshot]) -> list[str]:
    """The models `snap`'s query reads: its parents, and what its EMBEDDED parents read (they are
    inlined into it)."""
    out: list[str] = []
    for parent in snap.parents:
        out.append(parent.name)
        inner = snapshots.get(parent.name)
        if inner is not None and inner.model.kind.is_inlined:
            out += _read_models(inner, snapshots)
    return out


def _data_parents(evaluator: SnapshotEvaluator, snap: Snapshot) -> list[Snapshot]:
    """Parents with a physical object, looking through EMBEDDED ones (they are inlined)."""
    return [p for p in evaluator.sources(snap) if not p.model.kind.is_inlined]


def pending_intervals(project: Project, state: State, environment: str, names: list[str] | None = None, *,
                      execution_time: int | str | None = None,
                      engine_factory: Callable[[], Engine] | None = None,
                      listener: ApplyListener | None = None, after_parents: bool = False) -> dict[str, list[Interval]]:
    """Due, missing intervals of the current snapshots whose signals say they are ready (what
    `mesh run` would process), by model. What waits is reported to `listener`. `engine_factory`
    gives signals that take `spark` their session (Spark starts only for them). `after_parents`:
    leave out the intervals a parent has not recorded yet, even those it computes now (readiness.py)."""
    execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
    plan = current_plan(project, state, environment, execution_ms)
    scope = set(plan.snapshots) if names is None else set(names)
    order = project.dag.sorted()
    backfills = compute_backfills(state.intervals, plan.snapshots, scope, {}, order=order,
                                  start=None, end=None,
                                  execution_ms=execution_ms, end_bounded=False)
    spark = (lambda: engine_factory().session.spark) if engine_factory is not None else None
    readiness = check_readiness(project.signals, plan.snapshots, backfills, order, execution_ms, spark=spark,
                                after_parents=after_parents)
    readiness.report(listener or ApplyListener(), lambda n: view_name(n, environment))
    return {name: bf.intervals for name, bf in readiness.backfills.items()}


def unpartitioned_windows(project: Project, state: State, environment: str, name: str, *,
                          execution_time: int | str | None = None,
                          engine_factory: Callable[[], Engine] | None = None) -> list[Interval]:
    """The ranges one materialization of a model without partitions processes, in order.

    A seed or view: all time (built once; nothing to redo when built). A FULL model: one range
    from its first recorded or due interval to its last, so it is rebuilt whole from its parents
    as they are now — a backfill of its parents refreshes it once, even when no interval of its
    own is due. A model whose writes build on its history: each pending (due, missing) range,
    oldest first. Nothing (an empty list) when there is nothing to do."""
    snap = current_plan(project, state, environment,
                        to_ms(execution_time) if execution_time is not None else None).snapshots[name]
    model = snap.model
    if model.kind.is_timeless:
        return [ALL_TIME]
    pending = pending_intervals(project, state, environment, [name], execution_time=execution_time,
                                engine_factory=engine_factory).get(name, [])
    if model.kind.is_incremental:
        return pending
    spans = pending + state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, [])
    return [(min(s for s, _ in spans), max(e for _, e in spans))] if spans else []
