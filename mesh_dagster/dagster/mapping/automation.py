"""A model's automation condition: run its due intervals once its parents have them, as `mesh run`
does, evaluated by Dagster's declarative automation (the `automation_<env>_sensor`, jobs/automation.py).

`cron_condition(asset)` is true for the partitions (or, for a model without partitions, the
asset) that

- are due and missing, their signals letting them run now and every parent having recorded them
  (`DueCondition`: the Context's answer, the one the cron schedules get, never a copy of its rules),
- are not being computed now, nor are their parents' partitions (`in_progress`,
  `any_deps_in_progress`),
- and were not requested since the model's last cron tick: a run that fails is not launched
  again at every evaluation, but at the next tick, with everything then due (as `mesh run`).

Being due is what the cron decides (an interval is due once the tick after its end has passed),
so a model is requested at its tick, or as soon as its parents record the interval after it,
or a signal opens; starting the sensor requests at once what is already due.
"""

from __future__ import annotations

from typing import Any

from dagster import AssetKey, AutomationCondition, AutomationContext, AutomationResult, TimeWindowPartitionsDefinition

from mesh_dagster.core.time.cron import ALIASES, IntervalUnit, validate_cron
from mesh_dagster.dagster.compat import partitions_subset
from mesh_dagster.dagster.mapping.due import DueIntervals
from mesh_dagster.dagster.mapping.model_asset import ModelAsset
from mesh_dagster.dagster.mapping.partitions import keys_in, to_ms


class DueCondition(AutomationCondition[AssetKey]):
    """True for a model's due, missing intervals that its signals allow now and its parents have
    recorded: the partitions wholly inside them, or a model without partitions as a whole."""

    def __init__(self, due: DueIntervals, model: str, unit: IntervalUnit | None):
        self.due = due
        self.model = model
        self.unit = unit  # None: the asset has no partitions

    @property
    def name(self) -> str:
        return "due_intervals_ready"

    @property
    def description(self) -> str:
        return ("A due, missing interval whose signals pass and whose parents have recorded it "
                "(what `mesh run` computes)")

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: AutomationContext) -> AutomationResult:
        if context.candidate_subset.is_empty:
            return AutomationResult(context, context.get_empty_subset())
        intervals = self.due.pending(context.evaluation_time, context.log.info).get(self.model, [])
        if not intervals:
            return AutomationResult(context, context.get_empty_subset())
        if self.unit is None:
            return AutomationResult(context, context.candidate_subset)
        partitions = context.partitions_def
        assert isinstance(partitions, TimeWindowPartitionsDefinition)
        keys = keys_in(self.unit, partitions, intervals, at_ms=to_ms(context.evaluation_time))
        return AutomationResult(context, partitions_subset(context, keys))


def dagster_cron(cron: str) -> str:
    """A model's cron as Dagster reads it (`@daily` spelled out, as the schedules do)."""
    cron = validate_cron(cron)
    return ALIASES.get(cron, cron)


def cron_condition(asset: ModelAsset) -> AutomationCondition[Any] | None:
    """The condition of the module docstring; None for an external table, or outside a code
    location (no `asset.due`: nothing to ask what is due)."""
    if asset.due is None or asset.is_external:
        return None
    cron, tz = dagster_cron(asset.model.cron), asset.model.cron_tz or "UTC"
    requested = AutomationCondition.newly_requested().since(AutomationCondition.cron_tick_passed(cron, tz))
    return (
        DueCondition(asset.due, asset.name, asset.unit if asset.is_partitioned else None)
        & ~AutomationCondition.in_progress()
        & ~AutomationCondition.any_deps_in_progress()
        & ~requested.with_label(f"requested since its last tick ({cron}, {tz})")
    ).with_label(f"mesh run: due intervals on {cron} ({tz}), parents first, signals honoured")
