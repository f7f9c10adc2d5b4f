"""A model's freshness expectation, from its cron: the asset health view shows a model late when
its due interval has not run.

Dagster's freshness daemon (on by default in `dagster dev`, so under `mesh ui`) judges the time of
an asset's latest materialization, whichever partition it wrote:

- A cron that ticks at one fixed period in UTC (`@daily`, `0 6 * * *`, `@hourly`, `*/15 * * * *`,
  nearly every model's): `FreshnessPolicy.cron(cron, lower_bound_delta=one period)`. The model is
  late once a tick passes with nothing materialized since the tick before it: the interval that
  fell due at that earlier tick had a whole period to run, and did not.
- Any other cron (weekdays only, monthly, a time zone with daylight saving), whose periods differ:
  `FreshnessPolicy.time_window(fail_window=twice its longest period)`, so a long weekend or month
  never shows an on-time model late (Dagster's cron policy takes one period for all).

Seeds and views are built once, not on their cron: they get none.
"""

from __future__ import annotations

from datetime import timedelta

from dagster import FreshnessPolicy

from mesh_dagster.core.time.cron import fixed_period_ms, longest_gap_ms
from mesh_dagster.dagster.mapping.automation import dagster_cron
from mesh_dagster.dagster.mapping.model_asset import ModelAsset


def cron_freshness(asset: ModelAsset) -> FreshnessPolicy | None:
    """The policy of the module docstring; None for a seed, a view or an external table."""
    if asset.is_external or asset.is_timeless:
        return None
    cron, tz = dagster_cron(asset.model.cron), asset.model.cron_tz or "UTC"
    period = fixed_period_ms(cron, tz)
    if period is not None:
        return FreshnessPolicy.cron(cron, lower_bound_delta=timedelta(milliseconds=period), timezone=tz)
    return FreshnessPolicy.time_window(fail_window=timedelta(milliseconds=2 * longest_gap_ms(cron, tz)))
