"""The virtual layer: one view per model and environment over the snapshot's physical object.

Moving an environment's views is not atomic: a view that cannot be created stops the move with
the model named (`ViewUpdateError`), and the caller knows which views moved (`moved`) so it can
put them back (`restore_views`) as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from mesh_dagster.core.config.names import view_name, view_schema
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.ports import Engine


class ViewUpdateError(EngineError):
    """A view of an environment could not be created or dropped: which model's, and why."""

    def __init__(self, model: str, view: str, reason: str):
        self.model, self.view, self.reason = model, view, reason
        super().__init__(f"the view {view} of {model} failed: {reason}")


def view_sql(snapshot: Snapshot, project: Project | None, columns: Sequence[str] | None = None) -> str:
    """Select the model's columns in query order (partition columns are stored last): `columns`,
    else those the snapshot captured when planned, else (a snapshot stored before captures) the
    project's columns of the model, else all."""
    if columns is None and snapshot.capture is not None and snapshot.capture.columns:
        columns = list(snapshot.capture.columns)
    if columns is None and project is not None and snapshot.name in project.models:
        found = project.columns(snapshot.name)
        columns = list(found) if found else None
    projection = ", ".join(f"`{c}`" for c in columns) if columns else "*"
    return f"SELECT {projection} FROM {snapshot.table_name}"


def update_views(
    engine: Engine,
    environment: str,
    promote: list[Snapshot],
    demote: list[str],
    project: Project | None,
    listener: ApplyListener,
    moved: list[str] | None = None,
) -> None:
    """Point the environment's views at `promote` and drop the views of `demote` (model names).

    Each model whose view was replaced or dropped is added to `moved`; a failure raises
    `ViewUpdateError` naming the model (its statement changed nothing: DDL is all or nothing)."""
    moved = moved if moved is not None else []
    listener.virtual_start(len(promote) + len(demote))
    for schema in sorted({view_schema(s.model.schema_name, environment) for s in promote}):
        first = next(s.name for s in promote if view_schema(s.model.schema_name, environment) == schema)
        with _step(first, schema):
            engine.catalog.create_schema(schema)
    for snap in promote:
        view = view_name(snap.name, environment)
        with _step(snap.name, view):
            engine.catalog.create_view(view, view_sql(snap, project), snap.model.column_descriptions)
        moved.append(snap.name)
        listener.virtual_progress(snap.name)
    for name in demote:
        view = view_name(name, environment)
        with _step(name, view):
            engine.catalog.drop_view(view)
        moved.append(name)
        listener.virtual_progress(name)
    listener.virtual_done(len(promote) + len(demote))


def restore_views(engine: Engine, environment: str, names: Sequence[str], served: Mapping[str, Snapshot],
                  select: Callable[[Snapshot], str]) -> None:
    """Put the views of `names` back as the environment served them: over `served`'s snapshot
    (selected by `select`), or dropped when it showed no such model."""
    for name in names:
        view = view_name(name, environment)
        snap = served.get(name)
        with _step(name, view):
            if snap is None:
                engine.catalog.drop_view(view)
            else:
                engine.catalog.create_schema(view_schema(snap.model.schema_name, environment))
                engine.catalog.create_view(view, select(snap), snap.model.column_descriptions)


@contextmanager
def _step(model: str, view: str) -> Iterator[None]:
    try:
        yield
    except Exception as e:  # noqa: BLE001 - any engine failure: the caller puts the views back
        raise ViewUpdateError(model, view, first_line(e)) from e


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def environment_views(env: Environment) -> list[str]:
    return [view_name(name, env.name) for name in env.promoted]
