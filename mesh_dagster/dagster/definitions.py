"""`definitions(project_dir, environment)`: a mesh project as a Dagster code location.

Loading plans the local project against the environment (the state store only, never Spark), so
the UI shows each model with its fingerprint as code version and its change category: what a
change would recompute. Materializing partitions fills the current versions' tables; the promote
job then moves the environment's views.
"""

from __future__ import annotations

from pathlib import Path

from dagster import (
    AssetKey,
    AssetSpec,
    Definitions,
    ExecutorDefinition,
    TableColumn,
    TableSchema,
    in_process_executor,
)

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.snapshot import PROD, normalize_environment
from mesh_dagster.dagster.assets import history_assets, model_assets
from mesh_dagster.dagster.git_sensor import git_plan_job, git_sensor
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph, build_graph
from mesh_dagster.dagster.partitions import partitions_for
from mesh_dagster.dagster.promotion import promote_job
from mesh_dagster.dagster.resource import MeshResource
from mesh_dagster.dagster.restatement import restate_job
from mesh_dagster.dagster.reviews import apply_plan_job, plan_job, plan_status_sensor
from mesh_dagster.dagster.schedules import cron_schedules
from mesh_dagster.dagster.stamps import stamp_sensor


class ProjectLoadError(Exception):
    """The project cannot be loaded: the message names the file and line, like the CLI's."""


def definitions(
    project_dir: str | Path,
    environment: str = PROD,
    *,
    gateway: str | None = None,
    state_url: str | None = None,
    schedules_running: bool = False,
    restamp_sensor_running: bool = True,
    git_sensor_running: bool = False,
    plan_status_sensor_running: bool = True,
    shared_spark: bool = True,
    executor: ExecutorDefinition | None = in_process_executor,
) -> Definitions:
    """The project's models as assets of `environment`, with its promote job, re-stamp
    sensor, plan and apply_plan jobs, and (for prod) one schedule per cron and, when config.yaml
    has a `git:` section, the git push sensor and its `git_plan` job (stopped by default).

    Runs execute in process by default: one Spark session per run, models in DAG order. With the
    local default connection, runs use the project's shared Spark Connect server (`shared_spark`),
    started on demand, so concurrent runs and `mesh` commands share one warehouse.
    """
    project_dir = str(Path(project_dir).resolve())
    environment = normalize_environment(environment)
    loaded = _load_graph(project_dir, environment, gateway, state_url)
    if isinstance(loaded, MeshError):  # raised here so the code location shows no frames of ours below this
        raise ProjectLoadError(f"Cannot load the mesh project {project_dir}: {loaded}") from None
    graph = loaded

    partitions = {unit: partitions_for(unit, graph.partitions_start(unit)) for unit in graph.by_unit()}
    assets: list = [model_assets(graph, unit, members, partitions) for unit, members in graph.by_unit().items()]
    if graph.unpartitioned:
        assets.append(history_assets(graph, graph.unpartitioned))
    assets += [external_spec(a) for a in graph.assets.values() if a.is_external]

    jobs = [promote_job(environment), restate_job(environment), plan_job(environment), apply_plan_job(environment)]
    sensors = [stamp_sensor(graph, partitions, project_dir, gateway, state_url, restamp_sensor_running),
               plan_status_sensor(environment, project_dir, gateway, state_url, plan_status_sensor_running)]
    schedules = cron_schedules(graph, project_dir, gateway, state_url, schedules_running) \
        if environment == PROD else []
    if environment == PROD and graph.watches_git:
        git_job = git_plan_job()
        jobs.append(git_job)
        sensors.append(git_sensor(project_dir, gateway, state_url, git_job, git_sensor_running))
    return Definitions(
        assets=assets,
        jobs=jobs,
        schedules=schedules,
        sensors=sensors,
        resources={"mesh": MeshResource(project_dir=project_dir, gateway=gateway, state_url=state_url,
                                         shared_spark=shared_spark)},
        executor=executor,
    )


def _load_graph(project_dir: str, environment: str, gateway: str | None,
                state_url: str | None) -> ProjectGraph | MeshError:
    """Plan the project against the environment; a broken project is returned as its error."""
    from mesh_dagster.context import Context

    context = Context(project_dir, gateway, state_url=state_url)
    try:
        return build_graph(context.project, context.plan(environment, allow_empty=True))
    except MeshError as e:
        return e
    finally:
        context.close()


def external_spec(asset: ModelAsset) -> AssetSpec:
    """External tables are shown (lineage, columns) but never materialized by us."""
    metadata: dict = {"mesh/kind": "EXTERNAL", "dagster/table_name": asset.name}
    if asset.columns:
        metadata["dagster/column_schema"] = TableSchema(
            columns=[TableColumn(name=c, type=t or "unknown") for c, t in asset.columns.items()])
    return AssetSpec(
        key=AssetKey(list(asset.key)),
        description=asset.model.description or f"External table `{asset.name}`",
        group_name="external",
        metadata=metadata,
        kinds={"spark"},
    )
