"""Running an environment's `before_all` / `after_all` statements on the engine.

Every path that writes data goes through here: a plan apply (and so a promotion, which applies a
plan), `mesh run`, and a Dagster run (execution/intervals/statement_runs.py: once per run, not per step).
What runs is what the environment's record holds — the statements its plan captured
(core/snapshots/statements.py), never config.yaml as it is now — rendered for the environment and
checked to reach only its own objects (core/snapshots/statement_scope.py) before any of them runs.
`before_all` runs before anything is written — a failure stops there with nothing written — and
`after_all` once everything else succeeded (an apply or run that failed does not run it).

An environment recorded before plans captured statements runs none: the next `mesh plan` shows the
project's as a change, and once applied they run.
"""

from __future__ import annotations

from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.project.environment_statements import Stage
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.statement_scope import render_in_scope
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.ports import Engine

_AFTERMATH = {
    Stage.BEFORE_ALL: "nothing was written; fix the statement and try again",
    Stage.AFTER_ALL: "everything before it completed; the after_all statements from this one on did not run",
}


def run_environment_statements(stage: Stage, project: Project, engine: Engine, env: Environment,
                               listener: ApplyListener, execution_time: int) -> int:
    """Render and run the `stage` statements `env` (the environment's record, or the one an apply
    writes) holds; returns how many statements ran. `project` is where they run: its folder (what
    the captured macros' `__file__` names) and gateway."""
    planned = env.statements
    if planned is None:
        if stage == Stage.BEFORE_ALL and (project.config.before_all or project.config.after_all):
            listener.log(f"'{env.name}' was planned before plans captured before_all/after_all: none run until "
                         f"`mesh plan {env.name}` captures config.yaml's for review")
        return 0
    if not planned.entries(stage):
        return 0
    rendered = render_in_scope(planned, stage, env, root=project.path, gateway=project.gateway,
                               execution_time=ms_to_datetime(execution_time))
    source = planned.source()
    for index, sql in rendered:
        try:
            engine.session.execute(sql)
        except EngineError as e:
            raise source.error(stage, index, f"failed: {e.message} ({_AFTERMATH[stage]})") from e
    listener.log(f"{stage.value}: {len(rendered)} statement(s) run")
    return len(rendered)
