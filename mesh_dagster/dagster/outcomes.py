"""What a multi-asset step reports for each model it was asked for, so the run tells the truth.

One step evaluates many models. Dagster (1.13, OSS) marks an asset partition FAILED when a run
that planned it ends failed without materializing it; there is no public event for "this asset
failed" on its own. So a step reports:

- a model that was computed (or had nothing to compute: before its start, already built, no
  interval due) with its materialization, whatever happens to the others;
- a model that failed with its audits' results only, and a model blocked by it (it reads the
  failed one) with nothing, after a log line naming the culprit;
- and, once every model had its turn, one `Failure` listing the failed and the blocked models, so
  the step and the run end failed and the UI shows exactly those assets' partitions FAILED while
  the healthy ones keep their new materializations.

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

Across steps (a run of daily models and of the unpartitioned history models reading them), Dagster
by default skips every step after a failed one. `RUN_EXECUTOR` runs a step once the outputs it reads
are there instead: a history step runs when none of its models' parents failed; when one did, Dagster
leaves the whole step out (its granularity, not a model's).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    Failure,
    MetadataValue,
    Output,
    TimeWindowPartitionsDefinition,
    in_process_executor,
)

from mesh_dagster.core.intervals import Interval, format_interval_range
from mesh_dagster.dagster.graph import ModelAsset
from mesh_dagster.dagster.partitions import to_ms
from mesh_dagster.execution.materialize import ModelMaterialization, Outcome

# One Spark session per run, models in DAG order; a step waits for the outputs it reads, not for the
# success of the steps making them (Dagster's `step_dependency_config`).
RUN_EXECUTOR = in_process_executor.configured({"step_dependency_config": {"require_upstream_step_success": False}})


@dataclass
class RunReport:
    """The failed and blocked models of one step, for the step's closing `Failure` (the listener
    has logged each as it happened)."""

    failed: list[ModelMaterialization] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # a blocked model -> the failed one behind it

    def healthy(self, run: ModelMaterialization) -> bool:
        """Note `run`; True when its materialization is to be yielded (it neither failed nor was
        blocked)."""
        if run.outcome == Outcome.BLOCKED:
            self.blocked[run.name] = run.blocked_by or ""
        elif run.error is not None:
            self.failed.append(run)
        else:
            return True
        return False

    def culprit(self, parents: Sequence[str]) -> str | None:
        """The failed model behind the first of `parents` that failed or was blocked in this step."""
        failed = {r.name for r in self.failed}
        return next((p if p in failed else self.blocked[p] for p in parents if p in failed or p in self.blocked),
                    None)

    def raise_if_failed(self) -> None:
        """End the step failed when a model failed: the run shows failed, and so do exactly the
        failed and blocked assets (planned, not materialized)."""
        if not self.failed:
            return
        lines = [f"{len(self.failed)} model(s) failed"
                 + (f", {len(self.blocked)} blocked by them" if self.blocked else "")
                 + "; the models not reading them were materialized."]
        lines += [f"- {r.name}: {r.error}" for r in self.failed]
        lines += [f"- {name}: not evaluated, it reads {culprit}, which failed"
                  for name, culprit in self.blocked.items()]
        raise Failure(
            description="\n".join(lines),
            metadata={
                "failed": MetadataValue.json({r.name: str(r.error) for r in self.failed}),
                "blocked": MetadataValue.json(self.blocked),
            },
        )


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
        outputs = {spec.key: name for name, spec in context.assets_def.check_specs_by_output_name.items()}
        return cls(partitions_def, context.partition_keys, context.instance, outputs)


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
    targets = _latest_materializations(ranged.instance, key, ranged.keys) if ranged is not None else {}
    out: list = []
    for i, check in enumerate(asset.checks):
        batches = [(interval, results[i]) for interval, results in run.audited if i < len(results)]
        if AssetCheckKey(key, check.check_name) not in selected or not batches:
            continue
        severity = AssetCheckSeverity.ERROR if check.blocking else AssetCheckSeverity.WARN
        if ranged is None:
            failing = sum(r.count for _, r in batches)
            out.append(AssetCheckResult(
                asset_key=key, check_name=check.check_name, passed=failing == 0, severity=severity,
                metadata={"failing_rows": failing, "interval": run.describe_window(), "batches": len(batches)},
                description=None if failing == 0 else f"Audit `{check.audit}` returned {failing} row(s)",
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
                metadata={"failing_rows": result.count, "batch": _describe(run, interval)},
                description=None if result.passed else
                f"Audit `{check.audit}` returned {result.count} row(s) over the batch {_describe(run, interval)}",
            ))
    return out


def _target_type() -> type | None:
    """The class of `AssetCheckEvaluation.target_materialization_data`, read from the public class's
    annotation (Dagster does not export it); None when that is no longer a plain optional class."""
    hint = AssetCheckEvaluation.__annotations__.get("target_materialization_data")
    found = [t for t in typing.get_args(hint) if isinstance(t, type) and t is not type(None)]
    return found[0] if len(found) == 1 else None


_TARGET = _target_type()


def _latest_materializations(instance: DagsterInstance, key: AssetKey, partitions: Sequence[str]) -> dict:
    """Each partition's latest materialization as an evaluation's target, in one query: the newest
    records, as many as partitions (a run that just materialized them all finds each one)."""
    if _TARGET is None or not partitions:
        return {}
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=list(partitions)), limit=len(partitions)).records
    targets: dict = {}
    for record in records:  # newest first
        if record.partition_key is not None and record.partition_key not in targets:
            targets[record.partition_key] = _TARGET(storage_id=record.storage_id, run_id=record.run_id,
                                                    timestamp=record.timestamp)
    return targets


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
