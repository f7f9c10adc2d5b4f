"""Schedules and partitions honour `cron_tz` and `interval_unit` (definitions only, no Spark).

A cron in a time zone becomes a schedule firing in that zone (Dagster's `execution_timezone`), and
its tick asks for the intervals due at that moment; partitions stay UTC windows of the model's
interval unit, the intervals they show.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
from project_builder import write_project

from mesh_dagster.dagster import definitions

FILES = {
    "models/utc.sql": """
        MODEL (name s.utc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2024-01-01');
        SELECT CAST('2024-01-01' AS DATE) AS ds WHERE 1 = 1
        """,
    "models/ny.sql": """
        MODEL (name s.ny, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2024-01-01',
               cron '0 6 * * *', cron_tz 'America/New_York');
        SELECT CAST('2024-01-01' AS DATE) AS ds
        """,
    "models/fine.sql": """
        MODEL (name s.fine, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), start '2024-01-01',
               cron '@hourly', interval_unit five_minute, allow_partials true);
        SELECT CAST('2024-01-01' AS TIMESTAMP) AS ts
        """,
}


def _schedules(defs: dg.Definitions) -> dict[str, dg.ScheduleDefinition]:
    return {s.name: s for s in defs.schedules}


def test_schedules_fire_in_the_cron_time_zone_over_utc_partitions(tmp_path):
    root = write_project(tmp_path / "p", FILES)
    defs = definitions(root)
    schedules = _schedules(defs)
    assert sorted(schedules) == ["run_prod_0_6_x_x_x_america_new_york_schedule", "run_prod_daily_schedule",
                                 "run_prod_hourly_five_minute_schedule"]
    ny = schedules["run_prod_0_6_x_x_x_america_new_york_schedule"]
    assert (ny.cron_schedule, ny.execution_timezone) == ("0 6 * * *", "America/New_York")
    assert schedules["run_prod_daily_schedule"].execution_timezone == "UTC"

    graph = defs.resolve_asset_graph()
    ny_asset, fine = graph.get(dg.AssetKey(["s", "ny"])), graph.get(dg.AssetKey(["s", "fine"]))
    assert ny_asset.partitions_def.cron_schedule == "0 0 * * *" and ny_asset.partitions_def.timezone == "UTC"
    assert fine.partitions_def.cron_schedule == "*/5 * * * *"  # the written unit, not the hourly cron's
    assert ny_asset.metadata["mesh/cron_tz"] == "America/New_York"
    assert fine.metadata["mesh/interval_unit"] == "five_minute" and fine.metadata["mesh/allow_partials"] is True


def test_a_tick_asks_for_what_is_due_in_the_cron_time_zone(tmp_path):
    root = write_project(tmp_path / "p", FILES)
    schedule = _schedules(definitions(root))["run_prod_0_6_x_x_x_america_new_york_schedule"]

    def last_partition(tick: datetime) -> str:
        with dg.build_schedule_context(scheduled_execution_time=tick) as context:
            (request,) = schedule.evaluate_tick(context).run_requests
        assert request.tags["dagster/asset_partition_range_start"] == "2024-01-01"
        return request.tags["dagster/asset_partition_range_end"]

    # 06:00 in New York on 2024-01-03 is 11:00 UTC: the 2nd is due then, not at midnight UTC
    assert last_partition(datetime(2024, 1, 3, 11, 0, tzinfo=UTC)) == "2024-01-02"
    assert last_partition(datetime(2024, 1, 3, 10, 59, tzinfo=UTC)) == "2024-01-01"


def test_a_tick_leaves_the_incomplete_interval_of_allow_partials_to_mesh_run():
    from mesh_dagster.core.models.kinds import ModelKind
    from mesh_dagster.core.models.model import Model
    from mesh_dagster.core.time.cron import IntervalUnit
    from mesh_dagster.core.time.dates import to_ms
    from mesh_dagster.dagster.jobs.schedules import run_requests
    from mesh_dagster.dagster.mapping.graph import UNCHANGED, ModelAsset

    model = Model(name="s.p", kind=ModelKind(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"),
                  cron="0 6 * * *", allow_partials=True)
    asset = ModelAsset("s.p", ("s", "p"), model, "1", "v1", "t1", UNCHANGED, start_ms=to_ms("2024-01-01"))
    day = IntervalUnit.DAY
    pending = {"s.p": [(to_ms("2024-01-01"), to_ms("2024-01-03 06:00:00"))]}
    (request,) = run_requests(day, [asset], pending, "prod:x")
    assert (request.tags["dagster/asset_partition_range_start"],
            request.tags["dagster/asset_partition_range_end"]) == ("2024-01-01", "2024-01-02")
    # only the incomplete day pending: no partition run at all
    assert run_requests(day, [asset], {"s.p": [(to_ms("2024-01-03"), to_ms("2024-01-03 06:00:00"))]}, "prod:x") == []
