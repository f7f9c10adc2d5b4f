"""Models as assets: one subsettable multi-asset per partitions definition (interval unit).

A run evaluates its selected models in DAG order in one step, with one Spark session, over the
run's whole partition range (`BackfillPolicy.single_run`): a backfill of a year of days is one
evaluation per model, not 365. The step calls `Context.materialize`, the same code a plan apply
uses to evaluate, audit and record intervals; it never moves an environment's views.

Models whose writes build on the rows before them (`restates_full_history`: unique key,
partition, unmanaged...) are one unpartitioned multi-asset instead: recomputing one of their
intervals alone would replay old rows over newer ones, so they offer no per-partition backfill,
and a materialization processes every pending interval of theirs in order, as `mesh run` does.
"""

import warnings
from collections.abc import Iterator

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    PreviewWarning,
    TimeWindowPartitionsDefinition,
    multi_asset,
)

from mesh_dagster.context import Context
from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.intervals import Interval, format_interval_range
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.outcomes import RangedChecks, RunReport, check_results
from mesh_dagster.dagster.partitions import partition_tags, to_ms
from mesh_dagster.dagster.stamps import is_restamp, restamp_results
from mesh_dagster.dagster.translator import MeshTranslator
from mesh_dagster.dagster.versions import BUILT_ON
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.materialize import ModelMaterialization, Outcome

RESOURCE_KEY = "mesh"
SCHEDULED_TAG = "mesh/scheduled"  # runs launched by a cron schedule: they fill what is due


class DagsterLogListener(ApplyListener):
    """Progress of materializations and promotions in the run's log."""

    def __init__(self, log):
        self._log = log

    def batch_done(self, name: str, index: int, count: int, description: str, seconds: float,
                   audits_passed: int, audits_failed: int) -> None:
        audits = f", audits passed {audits_passed}, failed {audits_failed}" if audits_passed or audits_failed else ""
        self._log.info(f"[{index}/{count}] {name} {description} in {seconds:.2f}s{audits}")

    def virtual_progress(self, name: str) -> None:
        self._log.info(f"View updated: {name}")

    def log(self, message: str) -> None:
        self._log.info(message)


def check_specs(asset: ModelAsset, partitions_def: TimeWindowPartitionsDefinition | None = None
                ) -> list[AssetCheckSpec]:
    """One check per audit, partitioned like the model's multi-asset. Partitioned checks are a
    preview in Dagster 1.13 (see outcomes.py for what a ranged run records): known and wanted, so
    that one warning, and only it, stays out of the code location's log."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec",
                                category=PreviewWarning)
        return [
            AssetCheckSpec(
                check.check_name,
                asset=asset.asset_key,
                blocking=check.blocking,
                partitions_def=partitions_def,
                description=(f"{check.description}\n\n" if check.description else "")
                + f"Audit `{check.audit}`" + (f" ({', '.join(f'{k} := {v}' for k, v in check.args)})"
                                              if check.args else "")
                + (" — blocking: a failure stops downstream models and promotion" if check.blocking else ""),
            )
            for check in asset.checks
        ]


def model_assets(graph: ProjectGraph, unit: IntervalUnit, assets: list[ModelAsset],
                 partitions: dict[IntervalUnit, TimeWindowPartitionsDefinition],
                 translator: MeshTranslator | None = None) -> AssetsDefinition:
    """The multi-asset of every model whose intervals are `unit`s.

    After its models, a run re-stamps the partitions of their *other* children that keep their
    version through the change just computed (see stamps.py), so those do not turn stale.
    """
    environment = graph.environment
    translator = translator or MeshTranslator()
    partitions_def = partitions[unit]
    by_key = {a.asset_key: a for a in assets}
    by_name = {a.name: a for a in assets}

    @multi_asset(
        name=f"{environment}__{unit.value}",
        specs=[translator.get_asset_spec(a) for a in assets],
        check_specs=[spec for a in assets for spec in check_specs(a, partitions_def)] or None,
        can_subset=True,
        partitions_def=partitions_def,
        backfill_policy=BackfillPolicy.single_run(),
        required_resource_keys={RESOURCE_KEY},
        op_tags={"mesh/environment": environment},
    )
    def _models(context: AssetExecutionContext) -> Iterator:
        if is_restamp(context.run.tags):  # a re-stamp run (stamps.py): computes nothing
            yield from restamp_results(context, graph, partitions, getattr(context.resources, RESOURCE_KEY)
                                       .get_context(), assets)
            return
        names = [by_key[k].name for k in context.selected_asset_keys]
        window = context.partition_time_window
        mesh = getattr(context.resources, RESOURCE_KEY)
        listener = DagsterLogListener(context.log)
        selected_checks = context.selected_asset_check_keys
        ranged = None if context.has_partition_key else RangedChecks.of(context, partitions_def)
        computed: set[str] = set()
        report = RunReport()
        try:
            mesh_context = mesh.get_context()
            runs = mesh_context.materialize(names, to_ms(window.start), to_ms(window.end), environment,
                                            listener=listener)
            for run in runs:
                asset = by_name[run.name]
                if report.healthy(run):
                    yield MaterializeResult(
                        asset_key=asset.asset_key,
                        data_version=DataVersion(run.snapshot.version or ""),
                        metadata={**result_metadata(run), BUILT_ON: MetadataValue.json(
                            {p.name: p.version for p in graph.parent_assets(asset)})},
                    )
                # after it: the checks point at the materialization; a failed model's audits too
                yield from check_results(asset, run, selected_checks, ranged)
                if run.outcome == Outcome.EVALUATED:
                    computed.add(run.name)
            announce_children_to_restamp(context, graph, computed, set(names))
        except MeshError as e:
            raise Failure(description=str(e)) from None
        report.raise_if_failed()

    return _models


def history_assets(graph: ProjectGraph, assets: list[ModelAsset],
                   translator: MeshTranslator | None = None) -> AssetsDefinition:
    """The unpartitioned multi-asset of the models whose intervals cannot be recomputed one by
    one: materializing one processes each of its pending (due, missing) intervals in order.

    A run for partitions (a backfill, or a partition picked in the UI) is refused with one line;
    a scheduled run carries the range of the partitioned models it also fills, and these models
    process what is pending whatever that range, after their parents of the same run.
    """
    environment = graph.environment
    translator = translator or MeshTranslator()
    by_key = {a.asset_key: a for a in assets}

    @multi_asset(
        name=f"{environment}__history",
        specs=[translator.get_asset_spec(a) for a in assets],
        check_specs=[spec for a in assets for spec in check_specs(a)] or None,
        can_subset=True,
        required_resource_keys={RESOURCE_KEY},
        op_tags={"mesh/environment": environment},
    )
    def _models(context: AssetExecutionContext) -> Iterator:
        selected = [by_key[k] for k in by_key if k in context.selected_asset_keys]  # parents first
        tags = context.run.tags
        if partition_tags(tags) and tags.get(SCHEDULED_TAG) != "true":
            raise Failure(description=_partitions_refused(selected))
        mesh = getattr(context.resources, RESOURCE_KEY)
        listener = DagsterLogListener(context.log)
        report = RunReport()
        try:
            mesh_context = mesh.get_context()
            pending = mesh_context.pending_intervals(environment, [a.name for a in selected])
            for asset in selected:
                yield from _process_pending(asset, pending.get(asset.name, []), mesh_context, environment, listener,
                                            context.selected_asset_check_keys, report)
        except MeshError as e:
            raise Failure(description=str(e)) from None
        report.raise_if_failed()

    return _models


def _partitions_refused(assets: list[ModelAsset]) -> str:
    kinds = ", ".join(f"{a.name} ({a.kind.value})" for a in assets)
    return (f"{kinds}: not materialized for partitions. Each write of these models builds on the rows written "
            "before it, so an interval cannot be recomputed alone; materialize them without a partition, which "
            "processes every pending interval in order.")


def _process_pending(asset: ModelAsset, pending: list[Interval], mesh_context: Context, environment: str,
                     listener: DagsterLogListener, selected_checks, report: RunReport) -> Iterator:
    """Materialize one model's pending intervals, oldest first; one result for all of them. A
    failure stops this model (its later intervals build on the failed one); a model reading a
    failed or blocked one of this step is blocked."""
    key = asset.asset_key
    culprit = report.culprit(asset.parents)
    if culprit is not None:
        listener.log(f"{'.'.join(asset.key)}: not evaluated, it reads {culprit}, which failed")
        report.blocked[asset.name] = culprit
        return
    runs: list[ModelMaterialization] = []
    for start, end in pending:
        for run in mesh_context.materialize([asset.name], start, end, environment, listener=listener):
            runs.append(run)
        if runs and runs[-1].error is not None:
            break
    if not runs:  # nothing due: skipped, reported with the version it keeps (never as a failure)
        yield MaterializeResult(asset_key=key, data_version=DataVersion(asset.version or ""),
                                metadata={"mesh/outcome": "up to date", "mesh/version": asset.version or ""})
        return
    combined = _combined(runs)
    checks = check_results(asset, combined, selected_checks)
    if report.healthy(combined):
        yield MaterializeResult(asset_key=key, data_version=DataVersion(combined.snapshot.version or ""),
                                metadata=result_metadata(combined), check_results=checks)
    else:
        yield from checks


def _combined(runs: list[ModelMaterialization]) -> ModelMaterialization:
    """Several materializations of one model (one per pending range) as one."""
    first, last = runs[0], runs[-1]
    windows = [r.window for r in runs if r.window is not None]
    window = (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else None
    return ModelMaterialization(
        first.name, last.snapshot, last.outcome, window, [i for r in runs for i in r.recorded],
        [a for r in runs for a in r.audited], last.error, sum(r.seconds for r in runs))


def announce_children_to_restamp(context: AssetExecutionContext, graph: ProjectGraph, computed: set[str],
                     selected: set[str]) -> None:
    """The unselected children of freshly computed models are left to the re-stamp sensor: those
    whose version and data stay valid get a ranged re-stamp run once this run has finished."""
    children = [c for c in graph.children(computed) if c not in selected]
    if children:
        context.log.info(f"Not selected, left to restamp_{graph.environment}_sensor (re-stamped if their data "
                         f"stays valid): {', '.join(children)}")


def result_metadata(run: ModelMaterialization) -> dict:
    meta: dict = {
        "mesh/outcome": run.outcome.value,
        "mesh/interval": run.describe_window(),
        "mesh/version": run.snapshot.version,
        "mesh/seconds": round(run.seconds, 3),
    }
    if not run.snapshot.model.kind.is_symbolic:
        meta["mesh/physical_table"] = run.snapshot.table_name
    if run.recorded and run.window is not None and run.recorded != [run.window]:

        meta["mesh/recorded"] = format_interval_range(run.recorded, run.snapshot.model.interval_unit)
    return meta
