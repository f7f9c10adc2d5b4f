"""What a model's step reports, so the run tells the truth (one step per model, see assets.py).

A model that was computed (or had nothing to compute: before its start, already built, no interval
due) yields its materialization. A model that fails yields its audits' results only, then ends its
step with one `Failure` naming the model and the error, in one line: Dagster shows that model's
partitions failed, and skips the steps of the models reading it (they are not evaluated, their
partitions stay unmaterialized); every other model of the run is still evaluated. The run's own
failure line is that one line too (`RUN_EXECUTOR`).

What Dagster 1.13 shows for a skipped reader without partitions (a FULL model, a seed, a view) is
its own: "Failed", as the latest run that planned it failed without materializing it, and its
checks "Execution failed" with no result (a check the failed run planned and never evaluated).
Nothing is reported for them: any materialization or check verdict would be one that did not
happen. The checks' description says what no result means (assets.NO_RESULT).

Audits of partitioned models are partitioned asset checks (a Dagster 1.13 preview). Dagster
attributes an `AssetCheckResult` to a partition only in a run for one partition key; a ranged run
(`BackfillPolicy.single_run`) would record one unpartitioned evaluation and leave every partition
of the check SKIPPED. In a ranged run the step therefore reports an `AssetCheckEvaluation` per
partition key of the run, carrying the verdict of the batch that covered it (an audit runs once
per batch, over the batch's rows, so a failing row belongs to the batch, not to one day of it).
Dagster shows a partition's check status only for an evaluation that names the partition's latest
materialization (as `AssetCheckResult` does in a one-partition run); the type of that pointer is
not exported, so it is taken from the public `AssetCheckEvaluation`'s own field annotation, and
without it (a future Dagster) the evaluations are still recorded, in the check's history only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DagsterInstance,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    Output,
    TimeWindowPartitionsDefinition,
    in_process_executor,
)

from mesh_dagster.context import AuditSample, ModelMaterialization
from mesh_dagster.core.time.intervals import Interval, format_interval_range
from mesh_dagster.dagster.compat import check_outputs, latest_materialization_targets, one_line_failures
from mesh_dagster.dagster.mapping.graph import ModelAsset
from mesh_dagster.dagster.mapping.partitions import to_ms
from mesh_dagster.dagster.mapping.shown_text import ShownError
from mesh_dagster.dagster.mapping.versions import BUILT_ON


class StepFailed(ShownError):
    """A step that failed, said in one line: what failed, why (for an error in a project file, its
    file and line) and what to do; user text it quotes (a query's error, a signal's arguments) is
    escaped (ShownError): the run's page shows `\\u202e` where a model wrote U+202E.

    Dagster shows a user error as its own message under "Error occurred while executing op ...",
    with that error's stack trace. This error's message is the whole story (the detail is in the
    run's log above it), so it has no stack trace to show: its Python-level `__traceback__` reads
    as None, which is what a traceback of it (Dagster's serialized error included) walks."""

    __module__ = "mesh"  # shown as "mesh.ModelFailed: ..."

    @property
    def __traceback__(self):
        return None

    @__traceback__.setter
    def __traceback__(self, _value) -> None:
        pass


class ModelFailed(StepFailed):
    """A model's step failed."""

    __module__ = "mesh"


class JobFailed(StepFailed):
    """A promote, plan, apply, restate, git or re-stamp step was refused or failed."""

    __module__ = "mesh"


# One Spark session per run, models in DAG order; a step whose upstream step failed is skipped.
# Dagster's in-process executor, except that the run's failure (Dagster's last line of a failed run,
# made from its first failed step) reads as that step's one line, without Dagster's stack trace
# (compat.py's `one_line_failures`): "Steps failed: [...]" then "mesh.ModelFailed: ...".
RUN_EXECUTOR = one_line_failures(in_process_executor,
                                 frozenset(c.__name__ for c in (StepFailed, ModelFailed, JobFailed)))


def step_failure(asset: ModelAsset, error: str) -> ModelFailed:
    """The one line a failed model's step ends with."""
    return ModelFailed(error if error.startswith(asset.name) or f" {asset.name} " in error
                       else f"{asset.name} failed: {error}")


class NothingComputed(Enum):
    """The outcome of a model's step that computed nothing, reported with the asset's version."""

    UP_TO_DATE = "up to date"  # nothing due
    RESTAMPED = "restamped"  # the data of its current version, stamped again (restamps.py)


def materialization(asset: ModelAsset, run: ModelMaterialization | NothingComputed, *,
                    built_on: Mapping[str, str | None] | None = None, column_schema: Any = None) -> MaterializeResult:
    """A model step's materialization, its metadata built here alone: every step writes the keys the
    run and asset pages show, and the re-stamp sensor reads back (`BUILT_ON`, stamps.py), the same
    way. `run` is what the step computed, or the outcome of a step that computed nothing."""
    if isinstance(run, NothingComputed):
        version = asset.version or ""
        metadata: dict[str, Any] = {"mesh/outcome": run.value, "mesh/version": version}
        if run is NothingComputed.RESTAMPED:  # what the stamp vouches for: this change, in this table
            metadata |= {"mesh/change": asset.change.label, "mesh/physical_table": asset.table or ""}
    else:
        version = run.snapshot.version or ""
        metadata = _computed(run)
    if column_schema is not None:
        metadata["dagster/column_schema"] = column_schema
    if built_on is not None:
        metadata[BUILT_ON] = MetadataValue.json(dict(built_on))
    return MaterializeResult(asset_key=asset.asset_key, data_version=DataVersion(version), metadata=metadata)


def _computed(run: ModelMaterialization) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "mesh/outcome": run.outcome.value,
        "mesh/interval": run.describe_window(),
        "mesh/version": run.snapshot.version,
        "mesh/seconds": round(run.seconds, 3),
    }
    if not run.snapshot.model.kind.is_symbolic:
        metadata["mesh/physical_table"] = run.snapshot.table_name
    if run.recorded and run.window is not None and run.recorded != [run.window]:
        metadata["mesh/recorded"] = format_interval_range(run.recorded, run.snapshot.model.interval_unit)
    return metadata


@dataclass
class RangedChecks:
    """What per-partition check evaluations of a ranged run need: the partitions, the instance (to
    point each evaluation at its partition's latest materialization) and the checks' outputs.

    An evaluation is no output: a step reading a model with a blocking check waits for that
    check's output (which an `AssetCheckResult` would have produced), so it is yielded as well."""

    partitions_def: TimeWindowPartitionsDefinition
    keys: Sequence[str]
    instance: DagsterInstance
    outputs: Mapping[AssetCheckKey, str]  # the multi-asset's output of each check

    @classmethod
    def of(cls, context: AssetExecutionContext, partitions_def: TimeWindowPartitionsDefinition) -> RangedChecks:
        return cls(partitions_def, context.partition_keys, context.instance, check_outputs(context.assets_def))


def check_results(asset: ModelAsset, run: ModelMaterialization,
                  selected: set[AssetCheckKey] | frozenset[AssetCheckKey],
                  ranged: RangedChecks | None = None) -> list:
    """The audits of `run` as check results: one `AssetCheckResult` per audit over the whole run
    (Dagster gives it the run's partition when the run has one), or, in a ranged run, one
    `AssetCheckEvaluation` per audit and partition key. Called after the model's materialization
    was yielded (it is what the checks looked at)."""
    if not asset.checks or not run.audited:
        return []
    key = asset.asset_key
    targets = latest_materialization_targets(ranged.instance, key, ranged.keys) if ranged is not None else {}
    out: list = []
    for i, check in enumerate(asset.checks):
        batches = [(interval, results[i]) for interval, results in run.audited if i < len(results)]
        if AssetCheckKey(key, check.check_name) not in selected or not batches:
            continue
        severity = AssetCheckSeverity.ERROR if check.blocking else AssetCheckSeverity.WARN
        if ranged is None:
            failing = sum(r.count for _, r in batches)
            sampled = next((r for _, r in batches if r.sample is not None), None)
            out.append(AssetCheckResult(
                asset_key=key, check_name=check.check_name, passed=failing == 0, severity=severity,
                metadata={"failing_rows": failing, "interval": run.describe_window(), "batches": len(batches),
                          **failing_rows_sample(sampled.sample if sampled else None, sampled.count if sampled else 0)},
                description=None if failing == 0 else
                failure_description(check.audit, failing, None, sampled.sample if sampled else None),
            ))
            continue
        check_key = AssetCheckKey(key, check.check_name)
        if check_key in ranged.outputs:
            out.append(Output(None, output_name=ranged.outputs[check_key]))
        for partition in ranged.keys:
            batch = _covering(batches, _window(ranged.partitions_def, partition))
            if batch is None:
                continue  # outside what the model computed (before its start): nothing was audited
            interval, result = batch
            out.append(AssetCheckEvaluation(
                asset_key=key, check_name=check.check_name, passed=result.passed, severity=severity,
                blocking=check.blocking, partition=partition, target_materialization_data=targets.get(partition),
                metadata={"failing_rows": result.count, "batch": _describe(run, interval),
                          **failing_rows_sample(result.sample, result.count)},
                description=None if result.passed else
                failure_description(check.audit, result.count, f"the batch {_describe(run, interval)}", result.sample),
            ))
    return out


def _window(partitions_def: TimeWindowPartitionsDefinition, partition: str) -> Interval:
    window = partitions_def.time_window_for_partition_key(partition)
    return to_ms(window.start), to_ms(window.end)


def _covering(batches: list, window: Interval):
    """The batch whose interval holds `window` (the last one, should batches overlap)."""
    found = None
    for interval, result in batches:
        if interval[0] <= window[0] and window[1] <= interval[1]:
            found = (interval, result)
    return found


def _describe(run: ModelMaterialization, interval: Interval) -> str:
    return format_interval_range([interval], run.snapshot.model.interval_unit)


def failing_rows_sample(sample: AuditSample | None, total: int) -> dict[str, MetadataValue]:
    """A failed check's metadata entry holding some of its failing rows (none: no entry)."""
    return {} if sample is None else {"failing_rows_sample": MetadataValue.md(sample.markdown(total))}


def failure_description(audit: str, total: int, over: str | None, sample: AuditSample | None) -> str:
    """A failed check's description, with some of its failing rows as a table: Dagster shows a check's
    description, as Markdown, where it shows the check's result (a metadata entry sits behind a button)."""
    text = f"Audit `{audit}` returned {total} row(s)" + (f" over {over}" if over else "")
    return text if sample is None else f"{text}.\n\n{sample.markdown(total)}"
