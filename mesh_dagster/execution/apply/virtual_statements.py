"""A model's `ON_VIRTUAL_UPDATE_BEGIN; ... ON_VIRTUAL_UPDATE_END;` statements, run as SQLMesh runs
them: once the model's view has been created or updated in an environment (typically GRANTs on it).

They render at the `promoting` stage: `@this_model` (and Jinja's `this_model`) is the environment's
view of the model, and the names of models resolve to that environment's views, not to physical
tables. A statement that fails stops the apply before the environment is finalized (the views have
moved: applying again moves them again and runs the statements again), naming the model and its file.
"""

from __future__ import annotations

from collections.abc import Sequence

from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.sql.renderer import render_statements
from mesh_dagster.execution.apply.virtual import first_line
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.ports import Engine


class VirtualUpdateStatementError(EngineError):
    """An `on_virtual_update` statement failed: which model's, where it is written, and why."""


def run_virtual_update_statements(plan: Plan, project: Project, engine: Engine, promoted: Sequence[Snapshot],
                                  listener: ApplyListener) -> None:
    """Run the statements of every model in `promoted` (those whose view was just created or updated)."""
    having = [s for s in promoted if s.model.on_virtual_update]
    if not having:
        return
    evaluator = SnapshotEvaluator(project, engine, plan.snapshots)
    views = {name: view_name(name, plan.environment) for name in plan.snapshots}
    for snap in having:
        ctx = evaluator.render_context(snap, execution_time=plan.execution_time, stage="promoting")
        ctx.this_model = views[snap.name]
        ctx.table_mapping = dict(views)
        try:
            for sql in render_statements(snap.model.on_virtual_update, snap.model, ctx, evaluator.macros(snap)):
                engine.session.execute(sql)
        except Exception as e:  # noqa: BLE001 - Spark's or the renderer's: the model and its file are named
            where = f" ({snap.model.path})" if snap.model.path else ""
            raise VirtualUpdateStatementError(
                f"ON_VIRTUAL_UPDATE statement of {snap.name}{where} failed on its view {views[snap.name]}: "
                f"{first_line(e)}") from e
        listener.log(f"Ran the ON_VIRTUAL_UPDATE statements of {snap.name} on {views[snap.name]}")
