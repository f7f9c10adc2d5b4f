"""The virtual layer: one view per model and environment over the snapshot's physical object."""

from __future__ import annotations

from mesh_dagster.core.environment import Environment
from mesh_dagster.core.project import Project
from mesh_dagster.core.snapshot import Snapshot, view_name, view_schema
from mesh_dagster.execution.engine import Engine
from mesh_dagster.execution.events import ApplyListener


def view_sql(snapshot: Snapshot, project: Project | None) -> str:
    """Select the model's columns in query order (partition columns are stored last)."""
    columns = project.columns(snapshot.name) if project is not None and snapshot.name in project.models else None
    projection = ", ".join(f"`{c}`" for c in columns) if columns else "*"
    return f"SELECT {projection} FROM {snapshot.table_name}"


def update_views(
    engine: Engine,
    environment: str,
    promote: list[Snapshot],
    demote: list[str],
    project: Project | None,
    listener: ApplyListener,
) -> None:
    """Point the environment's views at `promote` and drop the views of `demote` (model names)."""
    listener.virtual_start(len(promote) + len(demote))
    for schema in sorted({view_schema(s.model.schema_name, environment) for s in promote}):
        engine.create_schema(schema)
    for snap in promote:
        engine.create_view(view_name(snap.name, environment), view_sql(snap, project), snap.model.column_descriptions)
        listener.virtual_progress(snap.name)
    for name in demote:
        engine.drop_view(view_name(name, environment))
        listener.virtual_progress(name)
    listener.virtual_done(len(promote) + len(demote))


def environment_views(env: Environment) -> list[str]:
    return [view_name(name, env.name) for name in env.promoted]
