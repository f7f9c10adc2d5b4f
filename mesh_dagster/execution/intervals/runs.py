"""Runs as Context's service (`ctx.runs`): an environment's intervals computed outside a plan.

`mesh run` fills what is due for every model; Dagster materializes chosen models over a window,
asks first what one materialization of a model without partitions covers and which intervals a
schedule would fill, and runs a run's `before_all` / `after_all` once per run. None of them moves
a view: a plan does that. Model names may be given as a view of any environment
(`schema__dev.model`); environment names are normalized here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from mesh_dagster.core.config.names import PROD, normalize_environment
from mesh_dagster.core.time.dates import time_range
from mesh_dagster.core.time.intervals import Interval
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.intervals.materialize import (
    ModelMaterialization,
    materialize,
    pending_intervals,
    unpartitioned_windows,
)
from mesh_dagster.execution.intervals.run import environment_snapshots, run_environment, run_scope
from mesh_dagster.execution.intervals.statement_runs import StatementRun
from mesh_dagster.execution.parts import Parts


class IntervalRuns:
    """Computes one project's due or chosen intervals into its current versions' tables."""

    def __init__(self, parts: Parts):
        self.parts = parts

    def run(self, environment: str = PROD, listener: ApplyListener | None = None, **options) -> int:
        """`mesh run`; `select` (selectors) and `auto_upstream` limit the models it processes. A
        failure is notified (`run_failed`) before it is raised."""
        environment = normalize_environment(environment)
        self.check(environment, **options)
        try:
            return run_environment(self.parts.project, self.parts.state, self.parts.engine, environment,
                                   listener=listener, **options)
        except Exception as e:
            self.parts.notifier.send("run_failed", {"environment": environment, "error": str(e) or type(e).__name__,
                                                    "actor": self.parts.user})
            raise

    def check(self, environment: str, **options) -> None:
        """Refuse what `mesh run` cannot do with these options (a reversed time range, a selector
        choosing nothing) before anything starts: Spark, or the project's warm server."""
        if options.get("start") and options.get("end"):
            time_range(options["start"], options["end"])
        if options.get("select"):
            _, snapshots = environment_snapshots(self.parts.state, normalize_environment(environment))
            run_scope(snapshots, options["select"], auto_upstream=options.get("auto_upstream", True))

    def materialize(self, models: list[str], start: int | str, end: int | str, environment: str = PROD,
                    listener: ApplyListener | None = None, execution_time: int | str | None = None,
                    before_write: Callable[[], None] | None = None) -> Iterator[ModelMaterialization]:
        """Evaluate `models` of `environment` for `[start, end)` into their current versions' tables
        and record the intervals; views do not move. A lazy iterator of `ModelMaterialization`s,
        parents first; a model that fails is reported FAILED, the models reading it BLOCKED, and
        the others are still evaluated. `before_write` runs before the first evaluation (a run's
        `before_all`: `run_statements`)."""
        return materialize(self.parts.project, self.parts.state, self._engine, normalize_environment(environment),
                           self._names(models), start, end, execution_time=execution_time, listener=listener,
                           before_write=before_write)

    def run_statements(self, run_id: str, environment: str, models: Sequence[str],
                       listener: ApplyListener) -> StatementRun:
        """The `before_all` / `after_all` of a run with one step per model (`models`: a Dagster run's),
        run once per run whichever steps call it (statement_runs.py)."""
        return StatementRun(self.parts.project, self.parts.state, self._engine, run_id,
                            normalize_environment(environment), self._names(models), listener)

    def materialization_windows(self, environment: str, model: str) -> list[Interval]:
        """What one materialization of a model without partitions processes (materialize.py)."""
        return unpartitioned_windows(self.parts.project, self.parts.state, normalize_environment(environment),
                                     self.parts.project.model_name(model), engine_factory=self._engine)

    def pending_intervals(self, environment: str = PROD, models: list[str] | None = None,
                          execution_time: int | str | None = None, listener: ApplyListener | None = None,
                          after_parents: bool = False):
        """Due, missing intervals of the current snapshots by model (what a scheduled run fills),
        less those waiting for a signal (each reported to `listener`); with `after_parents`, also
        less those a parent has not recorded yet (a model requested on its own: readiness.py)."""
        return pending_intervals(self.parts.project, self.parts.state, normalize_environment(environment),
                                 self._names(models) if models is not None else None,
                                 execution_time=execution_time, engine_factory=self._engine, listener=listener,
                                 after_parents=after_parents)

    def _names(self, models: Sequence[str]) -> list[str]:
        return [self.parts.project.model_name(m) for m in models]

    def _engine(self):
        """The engine, built when a write first needs it (Spark is not started to plan the work)."""
        return self.parts.engine
