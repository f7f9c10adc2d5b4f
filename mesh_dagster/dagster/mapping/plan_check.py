"""The plan as a check: every model asset has a non-blocking check, `serves_current_code`, that
passes when its environment serves the model's current code and warns, with `mesh plan`'s line
and counts, while a change is pending.

Why a check: Dagster 1.13 computes no asset-level staleness for a partitioned asset (it reads FRESH,
"100% filled", while every partition is stale), and text kinds crowd the catalog's name column
until two models cannot be told apart. A check's status shows on graph nodes, in the asset's
header and in its Checks tab for every asset alike; the description's first line says the same
in the catalog. The model's step reports it with its materialization, and the re-stamp sensor
whenever the plan moved without a run (a promotion, an apply by the CLI, a code change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagster import AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetCheckSeverity, AssetCheckSpec

from mesh_dagster.dagster.mapping.model_asset import ModelAsset
from mesh_dagster.dagster.mapping.translator import plan_line

PLAN_CHECK = "serves_current_code"
PLAN_LINE = "mesh/plan_line"  # the verdict's identity: a new evaluation only when it changes


@dataclass(frozen=True)
class PlanVerdict:
    """What the plan check says of one asset now."""

    passed: bool
    line: str  # `mesh plan`'s word on the model, or that nothing is pending
    metadata: dict[str, Any]


def plan_check_key(asset: ModelAsset) -> AssetCheckKey:
    return AssetCheckKey(asset.asset_key, PLAN_CHECK)


def plan_check_spec(asset: ModelAsset) -> AssetCheckSpec:
    """Not partitioned, also on a partitioned model: the plan is about the model's code, once."""
    return AssetCheckSpec(
        PLAN_CHECK, asset=asset.asset_key, blocking=False,
        description=f"Whether '{asset.environment}' serves this model's current code. A warning while a change "
                    f"is pending: `mesh plan {asset.environment}` (or materialize, then promote_{asset.environment}) "
                    "applies it. Says what the plan recomputes and reuses.")


def plan_verdict(asset: ModelAsset) -> PlanVerdict:
    line = plan_line(asset)
    if line is None:
        return PlanVerdict(True, f"'{asset.environment}' serves the current code.", {PLAN_LINE: ""})
    return PlanVerdict(False, line, {PLAN_LINE: line, "mesh/change": asset.change.label,
                                     "mesh/recompute": asset.recompute, "mesh/reuse": asset.reuse})


def _check_fields(asset: ModelAsset, verdict: PlanVerdict) -> dict[str, Any]:
    return {"asset_key": asset.asset_key, "check_name": PLAN_CHECK, "passed": verdict.passed,
            "severity": AssetCheckSeverity.WARN, "description": verdict.line, "metadata": verdict.metadata}


def plan_result(asset: ModelAsset) -> AssetCheckResult:
    """The check's result in the model's step."""
    return AssetCheckResult(**_check_fields(asset, plan_verdict(asset)))


def plan_evaluation(asset: ModelAsset, verdict: PlanVerdict | None = None) -> AssetCheckEvaluation:
    """The same verdict without a run (the re-stamp sensor's)."""
    return AssetCheckEvaluation(**_check_fields(asset, verdict or plan_verdict(asset)))
