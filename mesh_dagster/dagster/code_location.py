"""`definitions(project_dir, environment)`: a mesh project as a Dagster code location.

Loading plans the local project against the environment (the state store only, never Spark), so
the UI shows each model with its fingerprint as code version and its change category: what a
change would recompute. Materializing partitions fills the current versions' tables; the promote
job then moves the environment's views. How each model looks in Dagster (key, group, tags, kinds,
owners, description, metadata, partitions, automation) is the `MeshTranslator`'s to say.

Runs execute in process by default: one Spark session per run, models in DAG order, a step running once
the models it reads are materialized even if another model failed. With the local default connection,
runs use the project's shared Spark Connect server (`shared_spark`), started on demand, so concurrent
runs and `mesh` commands share one warehouse. A dagster-pyspark `PySparkResource` (`pyspark`) gives
runs' Spark settings, merged with the gateway's connection (`_spark_config`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    Definitions,
    ExecutorDefinition,
    JobDefinition,
    TimeWindowPartitionsDefinition,
)

from mesh_dagster.context import Context
from mesh_dagster.core.config.memory import fewer_collections
from mesh_dagster.core.config.names import PROD, normalize_environment
from mesh_dagster.core.config.spark_settings import setting_text
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.dagster.assets import model_asset
from mesh_dagster.dagster.jobs.automation import automation_sensor
from mesh_dagster.dagster.jobs.git_sensor import git_plan_job, git_sensor
from mesh_dagster.dagster.jobs.promotion import promote_job
from mesh_dagster.dagster.jobs.restatement import restate_job
from mesh_dagster.dagster.jobs.reviews import WAITING, apply_plan_job, plan_job, plan_status_sensor, review_plan_job
from mesh_dagster.dagster.jobs.schedules import cron_schedules
from mesh_dagster.dagster.mapping.due import DueIntervals
from mesh_dagster.dagster.mapping.graph import ProjectGraph, ServedVersion, build_graph
from mesh_dagster.dagster.mapping.outcomes import RUN_EXECUTOR
from mesh_dagster.dagster.mapping.partitions import partition_format
from mesh_dagster.dagster.mapping.pending import note_pending
from mesh_dagster.dagster.mapping.shown_text import ShownError
from mesh_dagster.dagster.mapping.translator import MeshTranslator
from mesh_dagster.dagster.resource import PYSPARK_SOURCE, MeshResource
from mesh_dagster.dagster.restamp.restamps import stamp_sensor

# Dagster 1.13 warns about its own beta `owners` parameter whenever it copies a sensor (binding
# resources, on every load and run launch) even though we pass no owners: noise for our users.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition.__init__`",
                        category=BetaWarning)

if TYPE_CHECKING:
    from dagster_pyspark import PySparkResource  # imported by the user who passes one: it loads pyspark

    from mesh_dagster.core.plan.plan import Plan


class ProjectLoadError(ShownError):
    """The project cannot be loaded: the message names the file and line, like the CLI's, and the
    text it quotes is escaped (the code location's error shows it)."""


@fewer_collections()  # loading allocates millions of objects: see core/config/memory.py
def definitions(
    project_dir: str | Path,
    environment: str | Sequence[str] = PROD,
    *,
    gateway: str | None = None,
    state_url: str | None = None,
    schedules_running: bool = False, automation_running: bool = False,
    restamp_sensor_running: bool = True,
    git_sensor_running: bool = False,
    plan_status_sensor_running: bool = True,
    shared_spark: bool = True,
    executor: ExecutorDefinition | None = RUN_EXECUTOR,
    translator: MeshTranslator | None = None,
    follow_deployed: bool = True, pyspark: PySparkResource | None = None,
    repos: Sequence[str | Path] = (),
) -> Definitions:
    """The project's models as assets of `environment`, with its promote job, re-stamp sensor, plan and
    apply_plan jobs, and (for prod) one schedule per cron, the sensor of its automation conditions and,
    with a `git:` section in config.yaml, the git push sensor and its `git_plan` job (all stopped by default).
    Several environments (`["prod", "dev"]`) make one code location holding each one's assets and jobs
    (names carry the environment; external tables, the same in all, appear once).

    With a `git:` section in config.yaml, an environment whose served plan was made from a pushed commit
    (the git sensor's) is shown from that commit's files (`follow_deployed`), not this working tree's:
    what it serves, with no pending revert of what was deployed.
    A multi-repo project (`repos`: its other repositories' folders) shows every repository's models.
    """
    project_dir = str(Path(project_dir).resolve())
    others = tuple(str(Path(repo).resolve()) for repo in repos)
    environments = _environments(project_dir, environment)
    translator = translator or MeshTranslator()
    spark_config = _spark_config(project_dir, gateway, state_url, pyspark)  # refused before anything is written
    sources, git_poll = _deployed_sources(project_dir, environments, gateway, state_url, follow_deployed, others)
    loaded = _load_graphs(project_dir, environments, gateway, state_url, translator, sources, others)
    if isinstance(loaded, MeshError):  # raised here so the code location shows no frames of ours below this
        raise ProjectLoadError(f"Cannot load the mesh project {project_dir}: {loaded}") from None

    assets: list[AssetsDefinition | AssetSpec] = []
    jobs: list = []
    sensors: list = []
    schedules: list = []
    external_keys: set[tuple[str, ...]] = set()
    for graph in loaded:
        environment = graph.environment
        folder, home = sources.get(environment, project_dir), project_dir if environment in sources else None
        DueIntervals.attach(graph, folder, gateway, state_url, home, others)  # what automation conditions ask
        partitions = _partitions(graph, translator)
        assets += (environment_assets := _environment_assets(graph, partitions, translator, external_keys))
        jobs += _environment_jobs(graph)
        sensors += [stamp_sensor(graph, partitions, project_dir, gateway, state_url, restamp_sensor_running, others),
                    plan_status_sensor(graph, project_dir, gateway, state_url, plan_status_sensor_running, others),
                    *automation_sensor(environment, environment_assets, automation_running)]
        if environment == PROD:
            schedules += cron_schedules(graph, folder, gateway, state_url, schedules_running, home, others)
            if git_poll is not None:
                jobs, sensors = _with_git(jobs, sensors, project_dir, gateway, state_url, git_sensor_running, git_poll)
    resource = _resource(project_dir, gateway, state_url, shared_spark, tuple(sorted(sources.items())), spark_config,
                         others)
    return Definitions(assets=assets, jobs=jobs, schedules=schedules, sensors=sensors, resources={"mesh": resource},
                       executor=executor)


def _environment_jobs(graph: ProjectGraph) -> list[JobDefinition]:
    """The environment's jobs: promote, restate, plan and apply, and a protected one's review job."""
    environment = graph.environment
    jobs = [promote_job(environment), restate_job(environment), plan_job(environment),
            apply_plan_job(environment, graph.waiting)]
    if graph.protected:
        jobs.append(review_plan_job(environment, [r for r in graph.waiting if r.status.value == "pending"]))
    return jobs


def _with_git(jobs: list, sensors: list, project_dir: str, gateway: str | None, state_url: str | None,
              running: bool, interval_s: int) -> tuple[list, list]:
    """`jobs` and `sensors` with the `git_plan` job and the git push sensor launching it (prod, with
    a `git:` section in config.yaml), looking every `interval_s` seconds."""
    git_job = git_plan_job()
    return [*jobs, git_job], [*sensors, git_sensor(project_dir, gateway, state_url, git_job, running, interval_s)]


def _environments(project_dir: str, environment: str | Sequence[str]) -> list[str]:
    """The environments asked for, normalized, each once, in their order; at least one."""
    environments = [environment] if isinstance(environment, str) else list(environment)
    if not environments:
        raise ProjectLoadError(f"Cannot load the mesh project {project_dir}: no environment given")
    return list(dict.fromkeys(normalize_environment(e) for e in environments))


def _environment_assets(graph: ProjectGraph, partitions: dict[IntervalUnit, TimeWindowPartitionsDefinition],
                        translator: MeshTranslator, external_keys: set[tuple[str, ...]]
                        ) -> list[AssetsDefinition | AssetSpec]:
    """The environment's models as assets, then the external tables not shown yet (`external_keys`:
    those of the environments before it; the same in all, each appears once)."""
    out: list[AssetsDefinition | AssetSpec] = [model_asset(graph, asset, partitions, translator)
                                                for asset in graph.materializable]
    for asset in graph.assets.values():
        if asset.is_external and asset.key not in external_keys:
            external_keys.add(asset.key)
            out.append(translator.get_asset_spec(asset))
    return out


@cache
def _resource(project_dir: str, gateway: str | None, state_url: str | None, shared_spark: bool,
              sources: tuple[tuple[str, str], ...] = (), spark_config: tuple[tuple[str, str], ...] = (),
              repos: tuple[str, ...] = ()) -> MeshResource:
    """One resource object per project and connection: Dagster merges the Definitions of several
    components (a prod one and a dev one, say) only if their `mesh` resources are the same object."""
    return MeshResource(project_dir=project_dir, gateway=gateway, state_url=state_url, shared_spark=shared_spark,
                        sources=dict(sources), spark_config=dict(spark_config), repos=list(repos))


def _spark_config(project_dir: str, gateway: str | None, state_url: str | None,
                  pyspark: PySparkResource | None) -> tuple[tuple[str, str], ...]:
    """The PySparkResource's settings (`spark.master`, `spark.jars.packages`, any key), checked against
    the gateway's connection at load, not mid-run: a key both set differently is refused in one line, as
    is, on the embedded default's shared Spark server, one that applies only when Spark starts
    (core/config/spark_settings.py). Python models' `context.spark` is the session with them."""
    if pyspark is None:
        return ()
    settings: dict[str, Any] = dict(pyspark.spark_config or {})
    context = Context(project_dir, gateway, state_url=state_url, spark_config=settings,
                      spark_config_source=PYSPARK_SOURCE)
    try:
        context.connection  # noqa: B018 - refuses what cannot merge
    except MeshError as e:  # raised here so the code location shows no frames of ours below this
        raise ProjectLoadError(f"Cannot load the mesh project {project_dir}: {e}") from None
    finally:
        context.close()
    return tuple(sorted((str(k), setting_text(v)) for k, v in settings.items()))


def _deployed_sources(project_dir: str, environments: list[str], gateway: str | None, state_url: str | None,
                      follow: bool, repos: tuple[str, ...] = ()) -> tuple[dict[str, str], int | None]:
    """Environment -> the files of the commit a git push deployed to it (execution/plans/deployed.py),
    and the seconds between the git sensor's looks (`git.poll_interval_s` of this project's
    config.yaml, not a deployed commit's); None without a `git:` section, which a multi-repo project
    (`repos`) cannot have yet."""
    context = Context(project_dir, gateway, state_url=state_url)
    try:
        try:
            git = context.config.git
        except MeshError:  # a broken project: loading it says why, with its file and line
            return {}, None
        if git is None:
            return {}, None
        if repos:
            raise ProjectLoadError(f"Cannot load the mesh project {project_dir}: config.yaml `git:` watches one "
                                   "repository, and this project has several: plans of pushed commits are for projects "
                                   "of one repository (remove `git:`, or plan with `mesh -p ... plan`)")
        out: dict[str, str] = {}
        for environment in environments if follow else []:
            try:
                source = context.deployed_project(environment)
            except MeshError as e:  # raised here so the code location shows no frames of ours below this
                raise ProjectLoadError(f"Cannot load the commit '{environment}' serves (config.yaml `git:`): "
                                       f"{e}") from None
            if source is not None:
                out[environment] = str(source)
        return out, git.poll_interval_s
    finally:
        context.close()


def _load_graphs(project_dir: str, environments: list[str], gateway: str | None, state_url: str | None,
                 translator: MeshTranslator, sources: dict[str, str],
                 repos: tuple[str, ...] = ()) -> list[ProjectGraph] | MeshError:
    """Plan each environment's project against it (one load per folder: the project's, or a deployed
    commit's); a broken project is returned as its error.

    The plans are never applied, so new snapshots are not rendered to their canonical text (what
    a stored snapshot keeps for later categorization): the largest cost of a first load."""
    graphs: dict[str, ProjectGraph] = {}
    for folder in dict.fromkeys(sources.get(e, project_dir) for e in environments):
        found = _folder_graphs(folder, [e for e in environments if sources.get(e, project_dir) == folder], gateway,
                               state_url, translator, None if folder == project_dir else project_dir, repos)
        if isinstance(found, MeshError):
            return found
        graphs.update({g.environment: g for g in found})
    return [graphs[e] for e in environments]


def _folder_graphs(folder: str, environments: list[str], gateway: str | None, state_url: str | None,
                   translator: MeshTranslator, home: str | None,
                   repos: tuple[str, ...]) -> list[ProjectGraph] | MeshError:
    context = Context(folder, gateway, state_url=state_url, home=home, repos=repos)
    try:
        plans = [context.plans.plan(environment, allow_empty=True, render_added=False) for environment in environments]
        for plan in plans:  # what mesh ui's watch looks at to reload the location when these counts change
            note_pending(home or folder, plan.environment, [(name, plan.snapshots[name].version or "")
                                                            for name in plan.backfills])
        present = context.state.intervals.get_intervals(list({(s.name, s.version) for p in plans
                                                               for s in p.snapshots.values() if s.version}))
        graphs = [build_graph(context.project, plan, translator, context.audit_digests(plan), present,
                              _served(context, plan), context.column_lineage) for plan in plans]
        for graph in graphs:  # what the review and apply jobs offer to pick from
            graph.waiting = context.plan_records(graph.environment, list(WAITING))
            graph.protected = context.config.protection(graph.environment) is not None
            graph.sensor_interval_s = context.config.dagster.sensor_interval_s
        return graphs
    except MeshError as e:
        return e
    finally:
        context.close()


def _served(context: Context, plan: Plan) -> dict[str, ServedVersion]:
    """What the environment's views show of the models it serves in another version than the plan's:
    the stored snapshot's columns and column lineage (their asset shows what a query of the environment
    returns, until promotion; one state read for both)."""
    env = context.state.environments.served_environment(plan.environment)
    if env is None:
        return {}
    ids = [s.snapshot_id for s in env.snapshots
           if s.name in plan.snapshots and plan.snapshots[s.name].version not in (None, s.version)]
    found = context.state.snapshots.get_snapshots(ids) if ids else {}
    out: dict[str, ServedVersion] = {}
    for sid in ids:
        snap = found.get(sid)
        capture = snap.capture if snap is not None else None
        out[sid.name] = ServedVersion() if capture is None else \
            ServedVersion(columns=capture.columns or None, lineage=capture.lineage)
    return out


def _partitions(graph: ProjectGraph, translator: MeshTranslator) -> dict[IntervalUnit, TimeWindowPartitionsDefinition]:
    """The translator's partitions definition of each interval unit, checked against the intervals:
    runs, schedules and re-stamps turn partition keys into intervals and back with these rules."""
    out: dict[IntervalUnit, TimeWindowPartitionsDefinition] = {}
    for unit in graph.by_unit():
        partitions = translator.get_partitions_def(unit, graph.partitions_start(unit))
        expected = (unit.cron_expression, partition_format(unit), "UTC")
        if not isinstance(partitions, TimeWindowPartitionsDefinition) or \
                (partitions.cron_schedule, partitions.fmt, partitions.timezone) != expected:
            raise ProjectLoadError(
                f"{type(translator).__name__}.get_partitions_def({unit.value!r}) must return a "
                f"TimeWindowPartitionsDefinition with cron_schedule {expected[0]!r}, fmt {expected[1]!r} and "
                f"timezone 'UTC' (the boundaries of {unit.value} intervals); got {partitions!r}")
        out[unit] = partitions
    return out
