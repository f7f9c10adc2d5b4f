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

import re
from collections.abc import Iterator

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableSchema,
    TimeWindowPartitionsDefinition,
    multi_asset,
)

from mesh_dagster.context import Context
from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.core.dates import ms_to_datetime
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.intervals import Interval, format_interval_range
from mesh_dagster.core.model import Model
from mesh_dagster.dagster.graph import ModelAsset, ProjectGraph
from mesh_dagster.dagster.partitions import partition_tags, to_ms
from mesh_dagster.dagster.stamps import is_restamp, restamp_results
from mesh_dagster.dagster.versions import BUILT_ON
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.materialize import ModelMaterialization, Outcome

RESOURCE_KEY = "mesh"
TAG_KEY_LIMIT = 63
_NOT_IN_TAG_KEYS = re.compile(r"[^A-Za-z0-9_.-]")
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


def asset_spec(asset: ModelAsset) -> AssetSpec:
    model = asset.model
    return AssetSpec(
        key=AssetKey(list(asset.key)),
        deps=[AssetKey(list(d)) for d in asset.deps],
        description=model.description or f"{model.kind.name.value} model `{model.name}` ({model.where()})",
        metadata=spec_metadata(asset),
        group_name=asset.group,
        code_version=asset.fingerprint,
        kinds=asset_kinds(model),
        tags=asset_tags(model),
        owners=[model.owner] if model.owner and "@" in model.owner else None,
        skippable=True,
    )


def asset_kinds(model: Model) -> set[str]:
    """The kinds the UI shows as icons: the engine, the model kind and, for a Python model, python
    (Dagster shows up to three)."""
    return {"spark", model.kind.name.value.lower(), *(["python"] if model.is_python else [])}


def asset_tags(model: Model) -> dict[str, str]:
    """The model's tags as labels (key = the tag, value empty) to filter assets by, plus its kind."""
    tags = {key: "" for key in (tag_key(t) for t in model.tags) if key}
    return {**tags, "mesh/kind": model.kind.name.value}


def tag_key(tag: str) -> str:
    """A model tag as a Dagster tag key. Dagster refuses keys with characters other than letters,
    digits, '_', '-' and '.', or longer than 63 (bar one `prefix/`): those become '_' and the key is
    cut. A '/' becomes '_' too, so no tag lands in Dagster's or mesh's namespace (`dagster/...`)."""
    return _NOT_IN_TAG_KEYS.sub("_", tag.strip())[:TAG_KEY_LIMIT]


def spec_metadata(asset: ModelAsset) -> dict:
    model = asset.model
    meta: dict = {
        "mesh/model": model.name,
        "mesh/kind": model.kind.name.value,
        "mesh/cron": model.cron,
        "mesh/change": asset.change,
        "mesh/fingerprint": asset.fingerprint,
        "dagster/table_name": ".".join(asset.key),
    }
    if asset.table:
        meta["mesh/physical_table"] = asset.table
        meta["mesh/version"] = asset.version
    if model.cron_tz:
        meta["mesh/cron_tz"] = model.cron_tz
    if model.declared_unit is not None:
        meta["mesh/interval_unit"] = model.declared_unit.value
    if model.allow_partials:
        meta["mesh/allow_partials"] = True
    if model.signals:
        meta["mesh/signals"] = ", ".join(ref.describe() for ref in model.signals)
    if model.owner:
        meta["mesh/owner"] = model.owner
    if asset.start_ms is not None:
        meta["mesh/start"] = ms_to_datetime(asset.start_ms).strftime("%Y-%m-%d %H:%M")
    if model.grain:
        meta["mesh/grain"] = ", ".join(model.grain)
    if model.path:
        meta["mesh/file"] = model.where()
    if asset.columns:
        meta["dagster/column_schema"] = TableSchema(
            columns=[TableColumn(name=c, type=(t or "unknown"), description=model.column_descriptions.get(c))
                     for c, t in asset.columns.items()]
        )
    if model.query:
        meta["mesh/query"] = MetadataValue.md(f"```sql\n{model.query.strip()}\n```")
    if model.python is not None:
        meta["mesh/python"] = MetadataValue.md(f"```python\n{model.python.source()}```")
    return meta


def check_specs(asset: ModelAsset) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            check.check_name,
            asset=AssetKey(list(asset.key)),
            blocking=check.blocking,
            description=(f"{check.description}\n\n" if check.description else "")
            + f"Audit `{check.audit}`" + (f" ({', '.join(f'{k} := {v}' for k, v in check.args)})"
                                          if check.args else "")
            + (" — blocking: a failure stops downstream models and promotion" if check.blocking else ""),
        )
        for check in asset.checks
    ]


def model_assets(graph: ProjectGraph, unit: IntervalUnit, assets: list[ModelAsset],
                 partitions: dict[IntervalUnit, TimeWindowPartitionsDefinition]) -> AssetsDefinition:
    """The multi-asset of every model whose intervals are `unit`s.

    After its models, a run re-stamps the partitions of their *other* children that keep their
    version through the change just computed (see stamps.py), so those do not turn stale.
    """
    environment = graph.environment
    partitions_def = partitions[unit]
    by_key = {AssetKey(list(a.key)): a for a in assets}
    by_name = {a.name: a for a in assets}

    @multi_asset(
        name=f"{environment}__{unit.value}",
        specs=[asset_spec(a) for a in assets],
        check_specs=[spec for a in assets for spec in check_specs(a)] or None,
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
        computed: set[str] = set()
        try:
            mesh_context = mesh.get_context()
            runs = mesh_context.materialize(names, to_ms(window.start), to_ms(window.end), environment,
                                            listener=listener)
            for run in runs:
                asset = by_name[run.name]
                checks = check_results(asset, run, selected_checks)
                if run.error is not None:
                    yield from checks
                    raise Failure(description=str(run.error), metadata={"model": run.name, "audit": run.error.audit,
                                                                         "failing_rows": run.error.count})
                yield MaterializeResult(
                    asset_key=AssetKey(list(asset.key)),
                    data_version=DataVersion(run.snapshot.version or ""),
                    metadata={**result_metadata(run), BUILT_ON: MetadataValue.json(
                        {p.name: p.version for p in graph.parent_assets(asset)})},
                    check_results=checks,
                )
                if run.outcome == Outcome.EVALUATED:
                    computed.add(run.name)
            restamp_children(context, graph, partitions, mesh_context, computed, set(names))
        except MeshError as e:
            raise Failure(description=str(e)) from None

    return _models


def history_assets(graph: ProjectGraph, assets: list[ModelAsset]) -> AssetsDefinition:
    """The unpartitioned multi-asset of the models whose intervals cannot be recomputed one by
    one: materializing one processes each of its pending (due, missing) intervals in order.

    A run for partitions (a backfill, or a partition picked in the UI) is refused with one line;
    a scheduled run carries the range of the partitioned models it also fills, and these models
    process what is pending whatever that range, after their parents of the same run.
    """
    environment = graph.environment
    by_key = {AssetKey(list(a.key)): a for a in assets}

    @multi_asset(
        name=f"{environment}__history",
        specs=[asset_spec(a) for a in assets],
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
        try:
            mesh_context = mesh.get_context()
            pending = mesh_context.pending_intervals(environment, [a.name for a in selected])
            for asset in selected:
                yield from _process_pending(asset, pending.get(asset.name, []), mesh_context, environment, listener,
                                            context.selected_asset_check_keys)
        except MeshError as e:
            raise Failure(description=str(e)) from None

    return _models


def _partitions_refused(assets: list[ModelAsset]) -> str:
    kinds = ", ".join(f"{a.name} ({a.kind.value})" for a in assets)
    return (f"{kinds}: not materialized for partitions. Each write of these models builds on the rows written "
            "before it, so an interval cannot be recomputed alone; materialize them without a partition, which "
            "processes every pending interval in order.")


def _process_pending(asset: ModelAsset, pending: list[Interval], mesh_context: Context, environment: str,
                     listener: DagsterLogListener, selected_checks) -> Iterator:
    """Materialize one model's pending intervals, oldest first; one result for all of them."""
    key = AssetKey(list(asset.key))
    runs: list[ModelMaterialization] = []
    for start, end in pending:
        for run in mesh_context.materialize([asset.name], start, end, environment, listener=listener):
            runs.append(run)
            if run.error is not None:
                yield from check_results(asset, _combined(runs), selected_checks)
                raise Failure(description=str(run.error), metadata={"model": run.name, "audit": run.error.audit,
                                                                     "failing_rows": run.error.count})
    if not runs:
        yield MaterializeResult(asset_key=key, data_version=DataVersion(asset.version or ""),
                                metadata={"mesh/outcome": "up to date", "mesh/version": asset.version or ""})
        return
    combined = _combined(runs)
    yield MaterializeResult(asset_key=key, data_version=DataVersion(combined.snapshot.version or ""),
                            metadata=result_metadata(combined),
                            check_results=check_results(asset, combined, selected_checks))


def _combined(runs: list[ModelMaterialization]) -> ModelMaterialization:
    """Several materializations of one model (one per pending range) as one."""
    first, last = runs[0], runs[-1]
    windows = [r.window for r in runs if r.window is not None]
    window = (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else None
    return ModelMaterialization(
        first.name, last.snapshot, last.outcome, window, [i for r in runs for i in r.recorded],
        [a for r in runs for a in r.audits], last.error, sum(r.seconds for r in runs))


def restamp_children(context: AssetExecutionContext, graph: ProjectGraph, partitions: dict, mesh_context: Context,
                     computed: set[str], selected: set[str]) -> None:
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


def check_results(asset: ModelAsset, run: ModelMaterialization,
                  selected: "set[AssetCheckKey] | frozenset[AssetCheckKey]") -> list[AssetCheckResult]:
    """One result per audit, over every batch of this run (audits run per batch, in model order)."""
    if not asset.checks or not run.audits:
        return []
    key = AssetKey(list(asset.key))
    out = []
    for i, check in enumerate(asset.checks):
        results = run.audits[i::len(asset.checks)]
        if AssetCheckKey(key, check.check_name) not in selected or not results:
            continue
        failing = sum(r.count for r in results)
        out.append(AssetCheckResult(
            asset_key=key,
            check_name=check.check_name,
            passed=failing == 0,
            severity=AssetCheckSeverity.ERROR if check.blocking else AssetCheckSeverity.WARN,
            metadata={"failing_rows": failing, "interval": run.describe_window(), "batches": len(results)},
            description=None if failing == 0 else f"Audit `{check.audit}` returned {failing} row(s)",
        ))
    return out
