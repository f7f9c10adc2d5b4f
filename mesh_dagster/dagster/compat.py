"""Every use of Dagster that its public API does not cover, in one place, each with a test against
the installed Dagster (tests/dagster/test_compat.py) and a fallback when it is gone.

- `materialization_target`: the pointer an `AssetCheckEvaluation` carries to the materialization
  it judged. Dagster shows a partition's check status only for an evaluation naming the partition's
  latest materialization, but does not export the pointer's class: it is read from the public
  `AssetCheckEvaluation`'s own field annotation. Without it, evaluations are still recorded (in the
  check's history only).
- `mark_partitions_failed`: Dagster shows a partition FAILED when a run that planned it (one
  "planned" event per partition) ended failed without materializing it. `mesh ui` has Dagster plan
  each asset of a run once, for its whole range (DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS:
  half the events of a ranged run), which leaves every partition of a failed run missing rather
  than failed. A failed model's step therefore plans its own partitions one by one before it fails
  (Dagster's own event, `DagsterEvent.build_asset_materialization_planned_event`, through the
  instance's `report_dagster_event`): its partitions show failed, while the models it blocked keep
  theirs missing ("not materialized: upstream failed"). Without those names, nothing is reported
  and the failed model's partitions show missing.
- `BatchingSqliteEventLogStorage`: Dagster's embedded SQLite event log writes an event in two
  transactions (the run's file, then the index), each on a connection of its own, so a ranged run's
  thousands of per-partition materializations take minutes; its `store_event_batch` (what Dagster
  calls for a batch, with DAGSTER_EVENT_BATCH_SIZE set) is the base class's loop. This subclass
  writes a batch of materializations in one statement per file, as Dagster's Postgres storage does
  (the asset's record updated with the last one). `mesh ui` configures it (dagster.yaml
  `event_log_storage`); when the class is not there any more, that name is the stock storage.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from dagster import AssetCheckEvaluation, AssetKey, AssetRecordsFilter, DagsterInstance


def _target_type() -> type | None:
    """The class of `AssetCheckEvaluation.target_materialization_data`; None when that is no longer
    a plain optional class."""
    hint = AssetCheckEvaluation.__annotations__.get("target_materialization_data")
    found = [t for t in typing.get_args(hint) if isinstance(t, type) and t is not type(None)]
    return found[0] if len(found) == 1 else None


TARGET_TYPE = _target_type()


def latest_materialization_targets(instance: DagsterInstance, key: AssetKey,
                                   partitions: Sequence[str | None]) -> dict:
    """Each partition's latest materialization (None: the asset's, unpartitioned) as an evaluation's
    target, in one query: the newest records, as many as partitions (a run that just materialized
    them all finds each one)."""
    if TARGET_TYPE is None or not partitions:
        return {}
    keyed = [p for p in partitions if p is not None]
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=keyed or None), limit=max(len(partitions), 1)).records
    targets: dict = {}
    for record in records:  # newest first
        if record.partition_key not in targets:
            targets[record.partition_key] = TARGET_TYPE(storage_id=record.storage_id, run_id=record.run_id,
                                                        timestamp=record.timestamp)
    return targets


def mark_partitions_failed(instance: DagsterInstance, run_id: str, job_name: str, step_key: str, key: AssetKey,
                           partitions: Sequence[str]) -> bool:
    """Plan `partitions` of `key` one by one in this (failing) run; False when Dagster has not the
    means any more (or the run already planned them one by one: nothing to add)."""
    if not partitions or not _plans_subsets(instance):
        return False
    try:
        from dagster import DagsterEvent
        from dagster._core.events import AssetMaterializationPlannedData  # not exported
    except ImportError:
        return False
    for partition in partitions:
        event = DagsterEvent.build_asset_materialization_planned_event(
            job_name, step_key, AssetMaterializationPlannedData(key, partition=partition))
        instance.report_dagster_event(event, run_id)
    return True


def _plans_subsets(instance: DagsterInstance) -> bool:
    storage = getattr(instance, "event_log_storage", None)
    return bool(getattr(storage, "supports_partition_subset_in_asset_materialization_planned_events", False))


BATCHING_STORAGE = "BatchingSqliteEventLogStorage"


def batching_storage() -> type | None:
    """The batching SQLite event log storage, or None when Dagster's SQLite storage (not exported)
    is not there any more as this module uses it."""
    return _batching_class()


def _batching_class() -> type | None:
    global _BATCHING
    if not isinstance(_BATCHING, bool):
        return _BATCHING
    try:
        from dagster._core.events import DagsterEventType
        from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorageTable
        from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
    except ImportError:
        _BATCHING = None
        return None
    batchable = {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION}
    needed = ("prepare_insert_event_batch", "run_connection", "index_transaction", "_store_asset_event_tags",
              "_store_asset_event")
    if not all(hasattr(SqliteEventLogStorage, name) for name in needed):
        _BATCHING = None
        return None

    class BatchingSqliteEventLogStorage(SqliteEventLogStorage):
        """SQLite's event log, writing a batch of one run's materializations (or observations) in
        one statement per file; anything else as the stock storage does."""

        @classmethod
        def from_config_value(cls, inst_data, config_value):  # the stock one builds its own class
            return cls(inst_data=inst_data, **config_value)

        def store_event_batch(self, events) -> None:
            types = {e.dagster_event.event_type if e.dagster_event else None for e in events}
            runs = {e.run_id for e in events}
            if len(events) < 2 or len(types) != 1 or not types <= batchable or len(runs) != 1:
                return super().store_event_batch(events)
            statement = self.prepare_insert_event_batch(events)
            with self.run_connection(runs.pop()) as conn:
                conn.execute(statement)
            with self.index_transaction() as conn:
                ids = [row[0] for row in conn.execute(statement.returning(SqlEventLogStorageTable.c.id))]
                self._store_asset_event_tags(conn, events, ids)
                self._store_asset_event(conn, events[-1], ids[-1])

    BatchingSqliteEventLogStorage.__module__ = __name__
    globals()[BATCHING_STORAGE] = BatchingSqliteEventLogStorage  # dagster.yaml names it here
    _BATCHING = BatchingSqliteEventLogStorage
    return _BATCHING


_BATCHING: type | None | bool = False  # not looked for yet
if _batching_class() is None:  # the stock storage, by the module path dagster.yaml documents
    import importlib

    globals()[BATCHING_STORAGE] = importlib.import_module("dagster.core.storage.event_log").SqliteEventLogStorage
