"""dagster/compat.py against the installed Dagster: every non-exported use still works, and each
says so when it would not (no Spark)."""

from __future__ import annotations

import dagster as dg
import pytest

from mesh_dagster.dagster import compat

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
RANGE = {"dagster/asset_partition_range_start": "2024-01-01", "dagster/asset_partition_range_end": "2024-01-03"}


def test_the_check_evaluation_target_type_is_found_and_points_at_a_materialization(tmp_path):
    assert compat.TARGET_TYPE is not None
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        @dg.asset(partitions_def=DAILY)
        def a() -> None:
            return None

        assert dg.materialize([a], instance=instance, partition_key="2024-01-02").success
        targets = compat.latest_materialization_targets(instance, a.key, ["2024-01-02", "2024-01-03"])
        assert set(targets) == {"2024-01-02"}  # a partition never materialized has no target
        assert isinstance(targets["2024-01-02"], compat.TARGET_TYPE)


def _failing(mark: bool) -> dg.AssetsDefinition:
    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
    def b(context) -> None:
        if mark:
            compat.mark_partitions_failed(context.instance, context.run.run_id, context.run.job_name, "b",
                                          context.assets_def.key, list(context.partition_keys))
        raise RuntimeError("boom")

    return b


def _statuses(instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    found = instance.get_status_by_partition(key, DAILY.get_partition_keys(), DAILY) or {}
    return "".join({dg.AssetPartitionStatus.FAILED: "F", dg.AssetPartitionStatus.MATERIALIZED: "M"}.get(
        found.get(k), "-") for k in DAILY.get_partition_keys())  # type: ignore[arg-type]


@pytest.mark.parametrize("mark, shown", [(False, "---"), (True, "FFF")])
def test_a_failed_ranged_run_shows_failed_partitions_only_where_marked(tmp_path, monkeypatch, mark, shown):
    """Under mesh ui's planned events (one per asset and range), a failed ranged run leaves its
    partitions missing; the failed model's step marks its own partitions failed."""
    monkeypatch.setenv("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "true")
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        asset = _failing(mark)
        assert not dg.materialize([asset], instance=instance, tags=RANGE, raise_on_error=False).success
        assert _statuses(instance, asset.key) == shown


def test_marking_is_a_no_op_where_dagster_plans_each_partition(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert compat.mark_partitions_failed(instance, "run", "job", "b", dg.AssetKey("b"), ["2024-01-01"]) is False


def test_the_batching_sqlite_event_log_writes_a_ranged_run_as_dagster_reads_it(tmp_path, monkeypatch):
    """mesh ui's embedded event log (dagster.yaml, dagster/ui/workspace.py): a ranged run's materializations
    written in batches, read back as Dagster's own storage would have them."""
    assert compat.batching_storage() is not None  # the installed Dagster has what it needs
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "2")
    overrides = {"event_log_storage": {"module": "mesh_dagster.dagster.compat",
                                       "class": "BatchingSqliteEventLogStorage",
                                       "config": {"base_dir": str(tmp_path / "history" / "runs")}}}
    with dg.instance_for_test(temp_dir=str(tmp_path), overrides=overrides) as instance:
        assert type(instance.event_log_storage).__name__ == "BatchingSqliteEventLogStorage"

        @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
        def c() -> dg.MaterializeResult:
            return dg.MaterializeResult(data_version=dg.DataVersion("v1"))

        result = dg.materialize([c], instance=instance, tags=RANGE)
        assert result.success and len(result.get_asset_materialization_events()) == 3
        assert _statuses(instance, c.key) == "MMM"
        records = instance.fetch_materializations(c.key, limit=10).records
        assert sorted(r.partition_key for r in records) == ["2024-01-01", "2024-01-02", "2024-01-03"]
        assert {r.asset_materialization.tags["dagster/data_version"] for r in records} == {"v1"}
        assert instance.get_latest_materialization_event(c.key).run_id == result.run_id


def test_an_automation_condition_answers_with_some_partitions_of_its_candidates(tmp_path):
    class Second(dg.AutomationCondition):
        def evaluate(self, context):
            return dg.AutomationResult(context, compat.partitions_subset(context, ["2024-01-02"]))

    @dg.asset(partitions_def=DAILY, automation_condition=Second())
    def a() -> None:
        return None

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.evaluate_automation_conditions([a], instance)
        assert result.get_requested_partitions(a.key) == {"2024-01-02"}
