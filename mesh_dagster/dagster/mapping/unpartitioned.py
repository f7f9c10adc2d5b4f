"""What the step of a model without partitions materializes (see assets.py): a seed or view once,
a FULL model rebuilt whole, a model building on its history each pending range in order."""

from __future__ import annotations

from collections.abc import Callable

from mesh_dagster.context import ApplyListener, Context, ModelMaterialization
from mesh_dagster.dagster.mapping.graph import ModelAsset


def unpartitioned_runs(mesh_context: Context, asset: ModelAsset, environment: str, listener: ApplyListener,
                       before_write: Callable[[], None] | None = None) -> ModelMaterialization | None:
    """Materialize `asset`'s ranges (oldest first) and combine them into one result; None when
    nothing is due. A failure stops the model: its later ranges build on the failed one.
    `before_write`: the run's `before_all` (assets.py), before the first evaluation."""
    windows = mesh_context.runs.materialization_windows(environment, asset.name)
    runs: list[ModelMaterialization] = []
    for start, end in windows:
        runs += mesh_context.runs.materialize([asset.name], start, end, environment, listener=listener,
                                         before_write=before_write)
        if runs and runs[-1].error is not None:
            break
    return _combined(runs) if runs else None


def _combined(runs: list[ModelMaterialization]) -> ModelMaterialization:
    """Several materializations of one model (one per pending range) as one."""
    first, last = runs[0], runs[-1]
    windows = [r.window for r in runs if r.window is not None]
    window = (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else None
    return ModelMaterialization(
        first.name, last.snapshot, last.outcome, window, [i for r in runs for i in r.recorded],
        [a for r in runs for a in r.audited], last.error, sum(r.seconds for r in runs))
