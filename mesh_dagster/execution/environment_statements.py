"""Running the project's `before_all` / `after_all` statements on the engine.

Every path that writes data goes through here: a plan apply (and so a promotion, which applies a
plan), `mesh run`, and a materialization (a Dagster run). `before_all` runs before anything is
written — a failure stops there with nothing written — and `after_all` once everything else
succeeded (an apply or run that failed does not run it). Rendering is core/project/environment_statements.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.project.environment_statements import (
    EnvironmentNaming,
    Stage,
    StatementSource,
    render_environment_statements,
)
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.execution.engine import Engine
from mesh_dagster.execution.events import ApplyListener

_AFTERMATH = {
    Stage.BEFORE_ALL: "nothing was written; fix the statement and try again",
    Stage.AFTER_ALL: "everything before it completed; the after_all statements from this one on did not run",
}


def run_environment_statements(stage: Stage, project: Project, engine: Engine, environment: str,
                               promoted: Iterable[str], listener: ApplyListener, execution_time: int) -> int:
    """Render and run the `stage` entries for `environment` (whose views are those of the
    `promoted` models); returns how many statements ran."""
    config = project.config
    entries = config.statements(stage.value)
    if not entries:
        return 0
    source = StatementSource.of_config(project.path, config)
    rendered = render_environment_statements(
        stage, entries, EnvironmentNaming.of(environment, promoted), macros=project.macros,
        variables=project.variables, dialect=config.model_defaults.dialect, gateway=project.gateway,
        execution_time=ms_to_datetime(execution_time), source=source,
    )
    for index, sql in rendered:
        try:
            engine.execute(sql)
        except EngineError as e:
            raise source.error(stage, index, f"failed: {e.message} ({_AFTERMATH[stage]})") from e
    listener.log(f"{stage.value}: {len(rendered)} statement(s) run")
    return len(rendered)
