"""`before_all` / `after_all` once per run made of many steps (a Dagster run), not once per step.

A Dagster run has one step per model (dagster/assets.py), each materializing its model, in the run's
process or in processes of their own (a multiprocess executor), retried or not. The environment's
statements belong to the run, as they belong to an apply or a `mesh run`: `before_all` runs before
the run writes anything — by the first step about to write, any other step waiting for it — and
`after_all` once, when the last of the run's model steps succeeded (and only if something was written:
`before_all` ran). So:

- a run whose step fails for good never runs `after_all`, as an apply or `mesh run` that failed;
- a failed `before_all` fails every step about to write, each with its message, and nothing is
  written; re-executing the run (a new run) runs it again;
- a retried step that succeeds counts once; a step process killed while running a stage leaves it
  to the next step (its lock's holder is gone), which runs it again from the first statement.

Which steps a run has is the front door's to say (Dagster's execution plan). Each decision — read
the run's marks (state/statement_runs.py), maybe run a stage, write its mark — is made under one
lock per run and environment in the state store, so two steps never both run a stage.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.project.environment_statements import EnvironmentStatementError, Stage
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.execution.evaluate.environment_statements import run_environment_statements
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.locking import LEASE_S, TABLE_WAIT_S, holder_is_dead, lock_owner
from mesh_dagster.execution.ports import Engine, State

_STEP = "step:"


class StatementRun:
    """One run's `before_all` / `after_all` in one environment, whichever of its steps call here."""

    def __init__(self, project: Project, state: State, engine: Callable[[], Engine], run_id: str,
                 environment: str, models: Collection[str], listener: ApplyListener):
        self.project = project
        self.state = state
        self.engine = engine
        self.run_key = f"{run_id}/{environment}"
        self.environment = environment
        self.models = frozenset(models)  # the run's model steps
        self.listener = listener

    def before_write(self) -> None:
        """Run `before_all`, unless a step of this run already did; if it failed there, fail alike."""
        with self._deciding() as marks:
            if Stage.BEFORE_ALL.value not in marks:
                self.state.statement_runs.forget_old()
                self._run(Stage.BEFORE_ALL)
            elif marks[Stage.BEFORE_ALL.value] is not None:
                raise EnvironmentStatementError(f"Not run: this run's before_all failed in an earlier step, and "
                                                f"nothing may be written without it: {marks[Stage.BEFORE_ALL.value]}")

    def step_succeeded(self, model: str) -> None:
        """Mark `model`'s step done; the run's last one runs `after_all` (if `before_all` ran)."""
        with self._deciding() as marks:
            self.state.statement_runs.mark(self.run_key, f"{_STEP}{model}")
            done = {mark.removeprefix(_STEP) for mark in marks if mark.startswith(_STEP)} | {model}
            ran = Stage.BEFORE_ALL.value in marks and marks[Stage.BEFORE_ALL.value] is None
            if ran and Stage.AFTER_ALL.value not in marks and self.models <= done:
                self._run(Stage.AFTER_ALL)

    @contextmanager
    def _deciding(self) -> Iterator[dict[str, str | None]]:
        """The run's marks, read under its lock, held while the caller decides and acts on them."""
        with self.state.locks.lock(f"statements:{self.run_key}", lock_owner("mesh run statements"),
                                   timeout_s=TABLE_WAIT_S, lease_s=LEASE_S, holder_is_dead=holder_is_dead):
            yield self.state.statement_runs.marks(self.run_key)

    def _run(self, stage: Stage) -> None:
        """Run `stage` with what the environment serves, and mark it (with why, if it failed)."""
        env = self.state.environments.served_environment(self.environment)
        try:
            if env is not None:
                run_environment_statements(stage, self.project, self.engine(), env, self.listener, now_ms())
        except MeshError as e:
            self.state.statement_runs.mark(self.run_key, stage.value, str(e))
            raise
        self.state.statement_runs.mark(self.run_key, stage.value)
