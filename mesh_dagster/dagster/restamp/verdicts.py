"""Audit verdicts that hold, as check evaluations: what a step reports for the checks of data it
did not audit itself (a re-stamp, a seed already built), so a check keeps the verdict on the data
it judged — whoever ran the audit (a plan apply, `mesh run`, an earlier Dagster run) — instead of
turning SKIPPED or "not executed".

The verdicts come from the state store (Context.verdicts, execution/evaluate/verdicts.py): one per audit
definition (the check's `digest`), model version and interval. A partition gets the verdict over
the interval holding its window; an asset without partitions passes when every verdict that holds
on its version passed.
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetCheckEvaluation, AssetCheckSeverity, DagsterInstance, TimeWindowPartitionsDefinition

from mesh_dagster.context import Context, Holding
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.core.time.intervals import format_interval_range
from mesh_dagster.dagster.compat import latest_materialization_targets
from mesh_dagster.dagster.mapping.graph import AuditCheck, ModelAsset
from mesh_dagster.dagster.mapping.outcomes import failing_rows_sample, failure_description
from mesh_dagster.dagster.mapping.partitions import partition_window


def verdict_evaluations(mesh_context: Context, instance: DagsterInstance, asset: ModelAsset,
                     partitions_def: TimeWindowPartitionsDefinition | None,
                     keys: Sequence[str], version: str | None = None) -> list[AssetCheckEvaluation]:
    """The holding verdict of each of `asset`'s audits on each partition of `keys` (partitioned),
    or on the asset (no partitions def), pointing at the latest materializations: call it after
    the materializations were reported.

    `version`: the verdicts on the data of that version rather than the model's current one (what
    an environment still serves, stamps.Stamper.served_events); those evaluations point at no
    materialization, as the stamps they judge are not written yet: reported right after them,
    Dagster takes an evaluation without a target for the latest materialization before it."""
    judged = version or asset.version
    if not asset.checks or not judged:
        return []
    held = mesh_context.verdicts([(asset.name, judged)])
    targets = {} if version else \
        latest_materialization_targets(instance, asset.asset_key, list(keys) if partitions_def else [None])
    out: list[AssetCheckEvaluation] = []
    for check in asset.checks:
        verdicts = held.get((asset.name, judged, check.digest))
        if verdicts is None:
            continue
        if partitions_def is None:
            failing = verdicts.failing()
            worst = max(failing, key=lambda h: h.verdict.failing_rows, default=None)  # its rows are shown
            out.append(_evaluation(asset, check, None, targets.get(None), worst is None,
                                   worst.verdict.failing_rows if worst else 0, worst or verdicts.latest))
            continue
        for key in keys:
            found = verdicts.covering(partition_window(partitions_def, key))
            if found is not None:
                out.append(_evaluation(asset, check, key, targets.get(key), found.verdict.passed,
                                       found.verdict.failing_rows, found))
    return out


def _evaluation(asset: ModelAsset, check: AuditCheck, partition: str | None, target, passed: bool, rows: int,
                holding: Holding) -> AssetCheckEvaluation:
    verdict = holding.verdict
    when = ms_to_datetime(verdict.created_ts).strftime("%Y-%m-%d %H:%M UTC")
    judged = "all time" if holding.interval == ALL_TIME else format_interval_range([holding.interval], asset.unit)
    return AssetCheckEvaluation(
        asset_key=asset.asset_key, check_name=check.check_name, passed=passed,
        severity=AssetCheckSeverity.ERROR if check.blocking else AssetCheckSeverity.WARN,
        # what the audit's run blocked, it blocked then (and promotion reads the verdict itself):
        # carried forward, a failure must not fail the step that carries it (a re-stamp computes nothing)
        blocking=False, partition=partition, target_materialization_data=target,
        metadata={"failing_rows": rows, "audited": f"{judged} by {verdict.source} at {when}",
                  "mesh/audit_digest": check.digest, **failing_rows_sample(None if passed else verdict.sample, rows)},
        description=None if passed else failure_description(check.audit, rows, judged, verdict.sample),
    )
