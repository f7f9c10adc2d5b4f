"""Models as assets: one asset, and one step, per model.

Each model is its own (one-spec) multi-asset, so every run has one step per model: Dagster itself
attributes success, failure, retries, timing and logs to the right asset, and skips the models
reading a failed one ("upstream failed") without evaluating them. The step calls
`Context.runs.materialize` for its one model, the same code a plan apply uses to evaluate, audit and
record intervals; it never moves an environment's views.

Partitioned models (incremental by time range: an interval can be recomputed alone) share the
time-window partitions definition of their interval unit, and a range backfill runs as one step
per model over the whole range (`BackfillPolicy.single_run`): a year of days is one evaluation
per model, not 365.

Every other model is an unpartitioned asset: seeds and views are built once for all time, a FULL
model is rebuilt whole each time it is materialized (its data is its parents' at that moment, so a
backfill of its parents refreshes it once), and models whose writes build on the rows before them
(`restates_full_history`: unique key, partition, unmanaged...) process every pending interval in
order: recomputing one interval alone would replay old rows over newer ones.
"""

import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    PreviewWarning,
    TableColumn,
    TableSchema,
    TimeWindowPartitionsDefinition,
    multi_asset,
)

from mesh_dagster.context import Context, ModelMaterialization, Outcome, StatementRun
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.errors import MeshError
from mesh_dagster.dagster.compat import (
    BACKFILL_TAG,
    backfill_assets,
    mark_blocked,
    mark_partitions_failed,
    run_step_keys,
)
from mesh_dagster.dagster.mapping.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.mapping.listener import DagsterLogListener
from mesh_dagster.dagster.mapping.outcomes import (
    NothingComputed,
    RangedChecks,
    check_results,
    materialization,
    step_failure,
)
from mesh_dagster.dagster.mapping.partitions import partition_tags, to_ms
from mesh_dagster.dagster.mapping.plan_check import plan_check_key, plan_check_spec, plan_result
from mesh_dagster.dagster.mapping.shown_text import shown_value
from mesh_dagster.dagster.mapping.translator import MeshTranslator
from mesh_dagster.dagster.mapping.unpartitioned import unpartitioned_runs
from mesh_dagster.dagster.restamp.restamps import is_restamp, restamp_results
from mesh_dagster.dagster.restamp.verdicts import verdict_evaluations

RESOURCE_KEY = "mesh"
SCHEDULED_TAG = "mesh/scheduled"  # runs launched by a cron schedule: they fill what is due


def step_name(asset: ModelAsset) -> str:
    """The op of a model's step: its asset key, as Dagster names allow (`sqlmesh_example__full_model`)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", "__".join(asset.key))


# Dagster (1.13) shows a check that a failed run planned but never evaluated as "Failed" /
# "Execution failed", with no result: the audit of a model whose step did not run because a model it
# reads failed (Dagster plans every check of the run's assets when the run starts, and resolves the
# ones left without a result by the run's status alone). Said where the check shows it, so it does
# not read as a failed audit, which always has its failing rows.
NO_RESULT = ("No result (\"Execution failed\") means this audit gave no verdict: its model's step did not run "
             "(a model it reads failed in that run) or failed before the audit ran; the run's log says why. "
             "A failed audit shows its failing rows.")


def check_specs(asset: ModelAsset, partitions_def: TimeWindowPartitionsDefinition | None = None
                ) -> list[AssetCheckSpec]:
    """The plan check (dagster/mapping/plan_check.py), then one check per audit, partitioned like the
    model. Partitioned checks are a preview in Dagster 1.13 (see dagster/mapping/outcomes.py for what
    a ranged run records): known and wanted, so that one warning, and only it, stays out of the code
    location's log."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec",
                                category=PreviewWarning)
        return [plan_check_spec(asset), *(
            AssetCheckSpec(
                check.check_name,
                asset=asset.asset_key,
                blocking=check.blocking,
                partitions_def=partitions_def,
                description=(f"{check.description}\n\n" if check.description else "")
                + f"Audit `{check.audit}`" + (f" ({', '.join(f'{k} := {v}' for k, v in check.args)})"
                                              if check.args else "")
                + (" — blocking: a failure stops downstream models and promotion" if check.blocking else "")
                + f"\n\n{NO_RESULT}",
                metadata={"mesh/audit_digest": check.digest},
            )
            for check in asset.checks
        )]


def model_asset(graph: ProjectGraph, asset: ModelAsset, partitions: dict,
                translator: MeshTranslator | None = None) -> AssetsDefinition:
    """The asset, and step, of one model; partitioned when `asset.is_partitioned`."""
    translator = translator or MeshTranslator()
    partitions_def = partitions[asset.unit] if asset.is_partitioned else None

    def _model(context: AssetExecutionContext) -> Iterator:
        mesh_context = getattr(context.resources, RESOURCE_KEY).get_context(graph.environment)
        if is_restamp(context.run.tags):  # a re-stamp run (dagster/restamp/stamps.py): computes nothing
            yield from restamp_results(context, graph, partitions, mesh_context, asset)
            return
        if not context.selected_asset_keys:  # its checks alone (the UI's "Execute" on a check): computes nothing
            yield from checks_alone(context, mesh_context, asset, partitions_def)
            return
        statements = run_statements(context, graph, mesh_context)
        if partitions_def is not None:
            yield from _partitioned_step(context, graph, asset, partitions_def, statements.before_write)
        else:
            yield from _unpartitioned_step(context, graph, asset, statements.before_write)
        try:  # the step succeeded (a failed one raised): the run's last runs its after_all
            statements.step_succeeded(asset.name)
        except MeshError as e:
            raise step_failure(asset, str(e)) from None
        if plan_check_key(asset) in context.selected_asset_check_keys:
            yield plan_result(asset)

    _model.__signature__ = _STEP_SIGNATURE  # type: ignore[attr-defined]
    return multi_asset(
        name=step_name(asset),
        specs=[translator.get_asset_spec(asset)],
        check_specs=check_specs(asset, partitions_def),
        can_subset=True,  # its checks may be run, or left out, on their own
        partitions_def=partitions_def,
        backfill_policy=BackfillPolicy.single_run() if partitions_def is not None else None,
        required_resource_keys={RESOURCE_KEY},
        op_tags={"mesh/environment": graph.environment, "mesh/model": asset.name},
        description=f"Evaluate {asset.name} into its current version's table and record its intervals.",
    )(_model)


def checks_alone(context: AssetExecutionContext, mesh_context: Context, asset: ModelAsset,
                 partitions_def: TimeWindowPartitionsDefinition | None) -> Iterator:
    """A run of a model's checks without the model: the plan check's verdict now, and the audit
    verdicts that hold on the data of its current version (the audits ran when it was computed;
    running them again would judge the same rows)."""
    if plan_check_key(asset) in context.selected_asset_check_keys:
        yield plan_result(asset)
    keys = list(context.partition_keys) if partitions_def is not None and context.has_partition_key_range else []
    yield from verdict_evaluations(mesh_context, context.instance, asset, partitions_def, keys)


def _step_signature(context: AssetExecutionContext) -> Iterator:
    """The signature of every model's step function (see `_STEP_SIGNATURE`)."""
    yield from ()


# Dagster reads a step function's signature some fifteen times while it builds the asset (inputs,
# resources, context): inspecting a new closure each time was a tenth of building the Definitions
# of 1,000 models. Every step has this one signature; `__signature__` is what `inspect` returns.
_STEP_SIGNATURE = inspect.signature(_step_signature)


def run_statements(context: AssetExecutionContext, graph: ProjectGraph, mesh_context: Context) -> StatementRun:
    """The run's `before_all` / `after_all` in the graph's environment: once per run, not per step
    (execution/intervals/statement_runs.py), `after_all` once every model step the run has succeeded."""
    steps = run_step_keys(context.instance, context.run)
    selected = context.run.asset_selection
    models = [a.name for a in graph.materializable
              if (step_name(a) in steps if steps is not None else selected is None or a.asset_key in selected)]
    return mesh_context.runs.run_statements(context.run.run_id, graph.environment, models,
                                            DagsterLogListener(context.log))


def _partitioned_step(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset,
                      partitions_def: TimeWindowPartitionsDefinition, before_write: Callable[[], None]) -> Iterator:
    """The model over the run's partition (or range): one evaluation, one result fanned out by
    Dagster to every partition; its audits as one check result per partition."""
    window = context.partition_time_window
    mesh_context = getattr(context.resources, RESOURCE_KEY).get_context(graph.environment)
    listener = DagsterLogListener(context.log)
    ranged = None if context.has_partition_key else RangedChecks.of(context, partitions_def)
    try:
        (run,) = list(mesh_context.runs.materialize([asset.name], to_ms(window.start), to_ms(window.end),
                                               graph.environment, listener=listener, before_write=before_write))
    except MeshError as e:
        raise step_failure(asset, str(e)) from None
    yield from _reported(context, graph, asset, run, ranged)


def _unpartitioned_step(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset,
                        before_write: Callable[[], None]) -> Iterator:
    """A seed or view (built once), a FULL model (rebuilt whole), or a model whose history is
    processed in order (each pending interval, oldest first); one result for the step."""
    tags = context.run.tags
    if asset.model.kind.restates_full_history and partition_tags(tags) and tags.get(SCHEDULED_TAG) != "true":
        raise step_failure(asset, _partitions_refused(asset))
    mesh_context = getattr(context.resources, RESOURCE_KEY).get_context(graph.environment)
    listener = DagsterLogListener(context.log)
    try:
        run = unpartitioned_runs(mesh_context, asset, graph.environment, listener, before_write)
    except MeshError as e:
        raise step_failure(asset, str(e)) from None
    if run is None:  # nothing due: reported with the version it keeps (never as a failure)
        yield materialization(asset, NothingComputed.UP_TO_DATE)
        yield from verdict_evaluations(mesh_context, context.instance, asset, None, [])
        return
    yield from _reported(context, graph, asset, run, None)


def _reported(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset, run: ModelMaterialization,
              ranged: RangedChecks | None) -> Iterator:
    """The model's result, then its audits (they point at it); a failed model's audits alone,
    then the step's failure: its partitions show failed, and Dagster skips the models reading it."""
    if run.error is None:
        yield materialization(asset, run, column_schema=_table_schema(context, asset, run),
                              built_on={p.name: p.version for p in graph.parent_assets(asset)})
    yield from check_results(asset, run, context.selected_asset_check_keys, ranged)
    if run.error is None and not run.audited:  # nothing audited here (already built): the verdicts that hold
        mesh_context = getattr(context.resources, RESOURCE_KEY).get_context(graph.environment)
        partitions_def = ranged.partitions_def if ranged is not None else None
        yield from verdict_evaluations(mesh_context, context.instance, asset, partitions_def,
                                    list(ranged.keys) if ranged is not None else [])
    if run.error is not None:
        if ranged is not None or context.has_partition_key:  # its partitions show failed (compat.py)
            mark_partitions_failed(context.instance, context.run.run_id, context.run.job_name, step_name(asset),
                                   asset.asset_key, list(context.partition_keys))
            block_backfill_children(context, graph, asset)
        raise step_failure(asset, str(run.error))
    if run.outcome == Outcome.EVALUATED:
        announce_children(context, graph, asset)


def _table_schema(context: AssetExecutionContext, asset: ModelAsset, run: ModelMaterialization) -> Any:
    """The table's columns as Spark typed them, when the model's query left a type unknown (an
    aggregate, a UDF): read from the table just written, so the asset's Columns show real types."""
    if run.outcome != Outcome.EVALUATED or not asset.columns or all(asset.columns.values()) or not asset.table:
        return None
    try:
        types = getattr(context.resources, RESOURCE_KEY).get_context(asset.environment).engine.catalog.columns(
            run.snapshot.table_name)
    except MeshError as e:  # the asset keeps the types its query declared; the log says why
        context.log.warning(printable(
            f"{asset.name}: its column types were not read from {run.snapshot.table_name}: {e}"))
        return None
    descriptions = asset.model.column_descriptions
    return shown_value(TableSchema(columns=[
        TableColumn(name=c, type=t, description=descriptions.get(c)) for c, t in types.items()]))


def _partitions_refused(asset: ModelAsset) -> str:
    return (f"not materialized for partitions ({asset.kind.value}): each write builds on the rows written "
            "before it, so an interval cannot be recomputed alone; materialize it without a partition, which "
            "processes every pending interval in order.")


def announce_children(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset) -> None:
    """Says what becomes of the children of a freshly computed model that this run does not
    materialize: those its backfill holds, the backfill materializes in a run of their own after it
    (Dagster runs a backfill's models without partitions apart from its ranges); the others are
    left to the re-stamp sensor, which re-stamps those whose version and data stay valid."""
    later, left = _children_apart(context, graph, asset)
    if later:
        context.log.info(f"Materialized by backfill {context.run.tags[BACKFILL_TAG]} in a run after this one (Dagster "
                         f"runs models without partitions apart from a partition range): {', '.join(later)}")
    if left:
        context.log.info(f"Not in this run, left to restamp_{graph.environment}_sensor (re-stamped if their data "
                         f"stays valid): {', '.join(left)}")


def block_backfill_children(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset) -> None:
    """A failed model's step in a backfill: the models below it the backfill holds but runs apart
    (without partitions) will never be launched. They are marked as this run's (compat.mark_blocked),
    so each shows failed, blocked by this run, whose log says why."""
    later, _ = _children_apart(context, graph, asset, below=True)
    blocked = [graph.assets[name] for name in later if not graph.assets[name].is_partitioned]
    if blocked and mark_blocked(context.instance, context.run.run_id, context.run.job_name, step_name(asset),
                                [b.asset_key for b in blocked]):
        context.log.info(f"Blocked by this failure (backfill {context.run.tags[BACKFILL_TAG]} will not run them): "
                         f"{', '.join(b.name for b in blocked)}")


def _children_apart(context: AssetExecutionContext, graph: ProjectGraph, asset: ModelAsset,
                    below: bool = False) -> tuple[list[str], list[str]]:
    """(the children of `asset` not in this run that its backfill holds, the others); `below`:
    every model below it, not only its children."""
    selected = {tuple(k.path) for k in (context.run.asset_selection or ())}
    found: set[str] = set()
    frontier = {asset.name}
    while frontier:
        frontier = set(graph.children(frontier)) - found
        found |= frontier
        if not below:
            break
    apart = [c for c in graph.assets if c in found and graph.assets[c].key not in selected]  # DAG order
    held = backfill_assets(context.instance, context.run) if apart else None
    later = [c for c in apart if held is not None and graph.assets[c].asset_key in held]
    return later, [c for c in apart if c not in later]
