"""Partitions are intervals: one time-window partitions definition per interval unit.

Partition boundaries are the interval unit's (a `0 6 * * *` model has midnight-aligned daily
intervals, like `@daily` ones), so every model of a unit shares one definition and a backfill can
span the whole graph. The definition starts at the earliest start among those models.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from dagster import PartitionsDefinition, TimeWindowPartitionsDefinition

from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import ms_to_datetime, now_ms
from mesh_dagster.core.time.intervals import Interval

# Dagster's run tags for partitions, as its docs spell them (dagster exports no constant for them):
# one partition, or a range of them processed by one run (a single-run backfill).
PARTITION_NAME_TAG = "dagster/partition"
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"


def partition_format(unit: IntervalUnit) -> str:
    return "%Y-%m-%d" if unit.is_date_granularity else "%Y-%m-%d-%H:%M"


def to_ms(dt: datetime) -> int:
    return round(dt.timestamp() * 1000)


def partition_window(partitions: PartitionsDefinition, key: str) -> Interval:
    assert isinstance(partitions, TimeWindowPartitionsDefinition)
    window = partitions.time_window_for_partition_key(key)
    return to_ms(window.start), to_ms(window.end)


def partition_key(unit: IntervalUnit, start_ms: int) -> str:
    """The key of the partition starting at `start_ms` (an interval boundary)."""
    return ms_to_datetime(start_ms).strftime(partition_format(unit))


def keys_in(unit: IntervalUnit, partitions: TimeWindowPartitionsDefinition, intervals: list[Interval],
            at_ms: int | None = None) -> list[str]:
    """Keys of the partitions lying entirely inside `intervals`, clipped to the definition as it
    stands at `at_ms` (default now: the current partition is not complete yet)."""
    first = to_ms(partitions.start)
    last = unit.floor(now_ms() if at_ms is None else at_ms)
    keys: list[str] = []
    for start, end in intervals:
        cursor = max(unit.ceil(start), first)
        while True:
            nxt = unit.shift(cursor, 1)
            if nxt > min(end, last):
                break
            keys.append(partition_key(unit, cursor))
            cursor = nxt
    return keys


def range_tags(unit: IntervalUnit, interval: Interval) -> dict[str, str]:
    """Run tags that make one run process `[start, end)` (a ranged partition run)."""
    start, end = interval
    return {
        ASSET_PARTITION_RANGE_START_TAG: partition_key(unit, start),
        ASSET_PARTITION_RANGE_END_TAG: partition_key(unit, unit.shift(end, -1)),
    }


def partition_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags of a run that make it a run for partitions (one, or a range)."""
    names = (PARTITION_NAME_TAG, ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG)
    return {k: v for k, v in tags.items() if k in names}
