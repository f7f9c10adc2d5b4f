"""Every use of Dagster that its public API does not cover, in one place: names Dagster does not
export, methods and tags it does not document, behaviour it does not promise. Each entry of
`INTERNALS` is checked against the installed Dagster by tests/unit/test_dagster_internals.py, whose
failure names the Dagster change, so moving to the next Dagster release fails one test rather than
a user's run; the behaviour is tested in tests/dagster/test_compat.py. Where it can, each use has a
fallback when it is gone.

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
  `event_log_storage`); when the class is not there any more, that name is the stock storage
  (from the package `dagster._core.storage.event_log`).
- `mesh ui`'s supervisor (dagster/ui/supervisor.py) opens the project's instance from its folder
  (`DagsterInstance.from_config`), lists the runs in progress (`get_runs`) and marks them canceling,
  then canceled (`report_run_canceling`, `report_run_canceled`): Dagster's own way to end a run
  whose process is gone. On a shared instance it keeps the runs launched in its own code servers:
  the hidden run tag `.dagster/grpc_info` names a run's code server (its socket, or host and port),
  and `dagster dev` starts each code server with `--socket PATH` on its command line.
- `mesh ui`'s location of pushed environments (dagster/ui/pushed_python.py) starts with a git worker's
  environment through its workspace entry's documented `executable_path`, relying on how `dagster
  dev` uses it, which Dagster does not document: the entry's code server is started as
  `<executable_path> -m dagster code-server start ...`, which starts the server loading the code
  with its own interpreter and environment, and that server runs each run the default run launcher
  sends it as a process of its own (multiprocessing): all of them inherit the environment the
  executable set. `dagster dev` marks the processes it starts with variables (`DEV_CLI_ENV`) that a
  code server reads to show a load error without Dagster's frames: they are passed on.
- The component's `translation:` (component.py) is Dagster's asset-attributes block, resolved with
  Dagster's own resolver (`TranslatorResolvingInfo`, `resolve_asset_spec_update_kwargs_to_mapping`,
  in unexported submodules) and the resolution context's undocumented `at_path`, `with_scope`
  and `scope`.
- `check_outputs`: the output each asset check of a multi-asset yields (the undocumented
  `AssetsDefinition.check_specs_by_output_name`).
- `RELOAD_LOCATION`: the webserver's GraphQL mutation behind the UI's "Reload" (dagster/ui/watch.py), as
  Dagster's own GraphQL client sends it.
- `one_line_failures`: the run's failure (RUN_FAILURE) shows the error of its first failed step
  with that error's outer stack trace (Dagster's own frames: the UI hides them on the step's row,
  not on the run's). Runs therefore use Dagster's in-process executor (made by its public creation
  function, with its config schema and requirements, which are not public) behind one that passes
  every event on, except that a step failure whose error ends in one of mesh's one-line errors
  carries that error alone (the step failure's data and the error are named tuples: `_replace`).
  Dagster stores a step's events when they happen, so the step's row keeps Dagster's line naming
  the op; only the run's failure, built from what the executor yields, reads as the one line (and
  the events `execute_job` returns, which are the yielded ones: there the step failure's error is
  the one line too; `execute_in_process` uses Dagster's own executor).
  Without the means, runs use the stock in-process executor (the run's row then shows the stack).
- `run_step_keys`: the steps a run executes, from the execution plan it was created with
  (`DagsterInstance.get_execution_plan_snapshot` of the run's `execution_plan_snapshot_id`, whose
  `step_keys_to_execute` lists them, a re-execution's subset included): a run's `before_all` /
  `after_all` run once per run, `after_all` when the last of these steps succeeded (assets.py).
  Without them, the run's asset selection stands in (a re-execution of part of a run then never
  runs `after_all`).
- `tag_run` and `post_to_run`: a plan's data diff exists only once its apply built the new tables,
  after the `plan_<env>` run that recorded it ended. That run is tagged with the plan's id
  (`add_run_tags`) and the diff is added to its log later as an engine event carrying the diff's
  metadata (`report_engine_event` with `EngineEventData`, both usable on a finished run), so the
  run page a reviewer opened shows the data. Without them, the diff is on the apply's run page,
  the asset pages and `mesh plans show` only.
- `backfill_assets`, `mark_blocked`: a backfill of a model and its children without partitions runs
  them apart (Dagster groups a backfill's runs by partitions definition): the partitioned run's step
  reads the backfill's assets (`DagsterInstance.get_backfill`, undocumented) to say so, and when it
  fails, plans those children in its failed run (as `mark_partitions_failed` does), since the
  backfill will never launch their run: they show failed, blocked by that run. Without the means,
  the log says only what the re-stamp sensor will do, and the blocked children show nothing.
- `latest_check_metadata`: the re-stamp sensor reports the plan check (dagster/mapping/plan_check.py)
  only when its verdict changed, read from the checks' latest evaluations in one query (the event
  log storage's `get_latest_asset_check_execution_by_key`, undocumented). Without it, the sensor
  reports every verdict at every tick (one event per model a tick).
- `partitions_subset`: a custom automation condition (dagster/mapping/automation.py) answers with a
  subset of the partitions it was asked about; Dagster's `AutomationContext.candidate_subset` is of
  a class it does not export, narrowed to given partition keys by its undocumented
  `compute_intersection_with_partition_keys`.
"""

from __future__ import annotations

import importlib
import json
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSpec,
    AutomationContext,
    DagsterEvent,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    Executor,
    ExecutorDefinition,
    InitExecutorContext,
    RunsFilter,
    executor,
)

try:  # not exported (Dagster's components): without them a component's `translation:` cannot resolve
    from dagster.components.resolved.core_models import resolve_asset_spec_update_kwargs_to_mapping
    from dagster.components.utils import TranslatorResolvingInfo
except ImportError:  # pragma: no cover - a Dagster without them
    _RESOLVER = False
else:
    _RESOLVER = True

try:  # not exported (Dagster's events and SQLite storage): each use says what it does without them
    from dagster._core.events import AssetMaterializationPlannedData, DagsterEventType, EngineEventData
except ImportError:  # pragma: no cover - a Dagster without them
    _EVENTS = False
else:
    _EVENTS = True

try:
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorageTable
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
except ImportError:  # pragma: no cover - a Dagster without them
    _SQLITE = False
else:
    _SQLITE = True

# What tests/unit/test_dagster_internals.py checks, one entry per use: name -> what mesh relies on.
INTERNALS: dict[str, str] = {
    "AssetCheckEvaluation.target_materialization_data": "its annotation names the (unexported) class of an "
    "evaluation's pointer to the materialization it judged, built from a record's storage_id, run_id, timestamp",
    "AssetMaterializationPlannedData": "dagster._core.events.AssetMaterializationPlannedData(asset_key, partition=)",
    "DagsterEvent.build_asset_materialization_planned_event": "(job_name, step_key, planned_data)",
    "DagsterInstance.report_dagster_event": "(event, run_id) stores an event of a run",
    "DagsterInstance.get_backfill": "(backfill_id) the backfill a run's `dagster/backfill` tag names, or None; its "
    "asset_selection lists the assets it materializes",
    "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "the environment variable behind the event log's "
    "supports_partition_subset_in_asset_materialization_planned_events: one planned event per asset of a run",
    "DAGSTER_EVENT_BATCH_SIZE": "the environment variable that makes Dagster store a run's events in batches",
    "SqliteEventLogStorage": "dagster._core's SQLite event log, with prepare_insert_event_batch, run_connection, "
    "index_transaction, _store_asset_event_tags and _store_asset_event, and SqlEventLogStorageTable",
    "dagster._core.storage.event_log": "the package exporting the stock SqliteEventLogStorage: dagster.yaml's "
    "`BatchingSqliteEventLogStorage` when the batching one cannot be built",
    "DagsterInstance.from_config": "(dagster_home) opens the instance its dagster.yaml describes",
    "DagsterInstance.get_runs": "(RunsFilter, limit=) lists runs, newest first",
    "DagsterInstance.report_run_canceling": "(run, message=) marks a run CANCELING",
    "DagsterInstance.report_run_canceled": "(run, message=) marks a run CANCELED",
    "DagsterInstance.get_execution_plan_snapshot": "(snapshot_id) the ExecutionPlanSnapshot a run was created "
    "with (DagsterRun.execution_plan_snapshot_id): its step_keys_to_execute are the run's steps",
    "DagsterInstance.add_run_tags": "(run_id, new_tags) adds tags to a run, also a finished one",
    "DagsterInstance.report_engine_event": "(message, dagster_run, engine_event_data) adds an engine event to a "
    "run's log, also a finished run's; dagster._core.events.EngineEventData(metadata=) carries its metadata",
    ".dagster/grpc_info": "the hidden run tag naming a run's code server: JSON with `socket`, or `host` and `port`",
    "dagster api grpc --socket": "the command line of a code server `dagster dev` starts",
    "executable_path": "a workspace entry's code server starts as `<executable_path> -m dagster code-server start`, "
    "which starts the server loading the code with its own interpreter and environment; that server runs a run "
    "as a process it spawns (multiprocessing), inheriting its environment",
    "DAGSTER_IS_DEV_CLI": "the variables `dagster dev` sets for the processes it starts (DEV_CLI_ENV)",
    "TranslatorResolvingInfo": "dagster.components.utils.TranslatorResolvingInfo(asset_attributes=, "
    "resolution_context=, model_key=).get_asset_spec(spec, variables)",
    "resolve_asset_spec_update_kwargs_to_mapping": "dagster.components.resolved.core_models's (model=, context=)",
    "ResolutionContext.at_path/with_scope/scope": "a resolution context below a key, with more template variables",
    "AssetsDefinition.check_specs_by_output_name": "output name -> AssetCheckSpec of a multi-asset's checks",
    "reloadRepositoryLocation": "the webserver's GraphQL mutation reloading a code location by name",
    "ExecutorDefinition.config_schema/get_requirements": "an executor definition's config schema and "
    "requirements function, reused by mesh's executor as the in-process executor's",
    "Executor.step_dependency_config": "the (non-public) property an executor answers besides retries",
    "EventLogStorage.get_latest_asset_check_execution_by_key": "(check_keys) check key -> its latest execution "
    "record (checks never executed left out); the record's `event` (an EventLogEntry) holds the evaluation "
    "as its dagster_event's event_specific_data",
    "EntitySubset.compute_intersection_with_partition_keys": "(partition_keys) the subset of an automation "
    "context's candidate_subset (an unexported EntitySubset) holding only those partitions",
    "StepFailureData.error": "a STEP_FAILURE's event_specific_data: a named tuple whose `error` (a "
    "SerializableErrorInfo: message, stack, cls_name, cause, context) the run's failure takes from the first "
    "step failure the executor yields (DagsterEvent.job_failure), replaced with DagsterEvent._replace",
}


class DagsterChanged(RuntimeError):
    """A use listed in `INTERNALS` is gone from the installed Dagster."""


def _gone(name: str) -> DagsterChanged:
    return DagsterChanged(f"The installed Dagster has no {name} ({INTERNALS[name]}): mesh_dagster/dagster/compat.py "
                          f"must follow the change")


# -- check evaluations: the materialization each one judged ---------------------------------------


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


def latest_check_metadata(instance: DagsterInstance, keys: Sequence[AssetCheckKey]
                          ) -> dict[AssetCheckKey, Mapping[str, Any]] | None:
    """Check key -> the metadata of its latest evaluation (keys never evaluated left out); None
    when Dagster cannot tell."""
    read = getattr(instance.event_log_storage, "get_latest_asset_check_execution_by_key", None)
    if read is None or not keys:
        return None if read is None else {}
    out: dict[AssetCheckKey, Mapping[str, Any]] = {}
    for key, record in read(list(keys)).items():
        data = getattr(getattr(getattr(record, "event", None), "dagster_event", None), "event_specific_data", None)
        if isinstance(data, AssetCheckEvaluation):
            out[key] = {label: getattr(value, "value", value) for label, value in data.metadata.items()}
    return out


# -- planned events: a failed ranged run's partitions shown failed --------------------------------

# Dagster writes, before a ranged run starts, one "planned" event per partition per asset, one by
# one (never batched): as many events again as the run's materializations, and the slower half
# (benchmarks/bench_events.py). With this (Dagster's own switch) a ranged run plans each asset once,
# for its partition range. What is lost: a ranged run that fails leaves its partitions shown missing
# rather than failed (the run itself shows the failure), which `mark_partitions_failed` gives back.
PLANNED_EVENTS_PER_RUN = {"DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "true"}
EVENT_BATCH_SIZE_ENV = "DAGSTER_EVENT_BATCH_SIZE"  # > 0: a run's events are stored in batches of this size


def mark_partitions_failed(instance: DagsterInstance, run_id: str, job_name: str, step_key: str, key: AssetKey,
                           partitions: Sequence[str]) -> bool:
    """Plan `partitions` of `key` one by one in this (failing) run; False when Dagster has not the
    means any more (or the run already planned them one by one: nothing to add)."""
    if not partitions or not _plans_subsets(instance):
        return False
    return _plan_in_run(instance, run_id, job_name, step_key, [(key, p) for p in partitions])


def mark_blocked(instance: DagsterInstance, run_id: str, job_name: str, step_key: str,
                 keys: Sequence[AssetKey]) -> bool:
    """Plan the assets without partitions `keys` in this (failing) run, which blocks them: their
    latest run is then this failed one, and Dagster shows them failed, as it shows the models a
    failed run was to materialize. False when Dagster has not the means any more."""
    return bool(keys) and _plan_in_run(instance, run_id, job_name, step_key, [(key, None) for key in keys])


def _plan_in_run(instance: DagsterInstance, run_id: str, job_name: str, step_key: str,
                 planned: Sequence[tuple[AssetKey, str | None]]) -> bool:
    if not _EVENTS:
        return False
    for key, partition in planned:
        event = DagsterEvent.build_asset_materialization_planned_event(
            job_name, step_key, AssetMaterializationPlannedData(key, partition=partition))
        instance.report_dagster_event(event, run_id)
    return True


BACKFILL_TAG = "dagster/backfill"  # the run tag naming the backfill a run belongs to (the UI filters on it)


def backfill_assets(instance: DagsterInstance, run: DagsterRun) -> frozenset[AssetKey] | None:
    """The assets of the backfill `run` belongs to, or None (no backfill, or Dagster has not the means)."""
    backfill_id = run.tags.get(BACKFILL_TAG)
    get = getattr(instance, "get_backfill", None)
    backfill = get(backfill_id) if backfill_id and get is not None else None
    selection = getattr(backfill, "asset_selection", None)
    return frozenset(selection) if selection is not None else None


def _plans_subsets(instance: DagsterInstance) -> bool:
    storage = getattr(instance, "event_log_storage", None)
    return bool(getattr(storage, "supports_partition_subset_in_asset_materialization_planned_events", False))


# -- the SQLite event log, written in batches ------------------------------------------------------

BATCHING_STORAGE = "BatchingSqliteEventLogStorage"
_BATCHING_NEEDS = ("prepare_insert_event_batch", "run_connection", "index_transaction", "_store_asset_event_tags",
                   "_store_asset_event")
_BATCHING: type | None = None

if _EVENTS and _SQLITE and all(hasattr(SqliteEventLogStorage, name) for name in _BATCHING_NEEDS):

    class BatchingSqliteEventLogStorage(SqliteEventLogStorage):
        """SQLite's event log, writing a batch of one run's materializations (or observations) in
        one statement per file; anything else as the stock storage does."""

        BATCHABLE = frozenset({DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION})

        @classmethod
        def from_config_value(cls, inst_data, config_value):  # the stock one builds its own class
            return cls(inst_data=inst_data, **config_value)

        def store_event_batch(self, events) -> None:
            types = {e.dagster_event.event_type if e.dagster_event else None for e in events}
            runs = {e.run_id for e in events}
            if len(events) < 2 or len(types) != 1 or not types <= self.BATCHABLE or len(runs) != 1:
                return super().store_event_batch(events)
            statement = self.prepare_insert_event_batch(events)
            with self.run_connection(runs.pop()) as conn:
                conn.execute(statement)
            with self.index_transaction() as conn:
                ids = [row[0] for row in conn.execute(statement.returning(SqlEventLogStorageTable.c.id))]
                self._store_asset_event_tags(conn, events, ids)
                self._store_asset_event(conn, events[-1], ids[-1])

    _BATCHING = BatchingSqliteEventLogStorage
else:  # pragma: no cover - the stock storage under dagster.yaml's name, wherever Dagster's package exports it
    _STOCK = getattr(importlib.import_module("dagster._core.storage.event_log"), "SqliteEventLogStorage", None)
    if _STOCK is not None:
        globals()[BATCHING_STORAGE] = _STOCK


def batching_storage() -> type | None:
    """The batching SQLite event log storage, or None when Dagster's SQLite storage (not exported)
    is not there any more as this module uses it."""
    return _BATCHING


# -- mesh ui's supervisor: the runs in progress, marked canceled ----------------------------------

GRPC_INFO_TAG = ".dagster/grpc_info"  # put on a run by Dagster's default run launcher: its code server
CODE_SERVER_SOCKET_ARG = "--socket"  # `dagster api grpc --socket PATH`, as `dagster dev` starts a code server
DEV_CLI_ENV = ("DAGSTER_IS_DEV_CLI", "DAGSTER_verbose")  # `dagster dev` sets them for the processes it starts


def open_instance(dagster_home: Path) -> DagsterInstance:
    """The instance the dagster.yaml in `dagster_home` describes (not the one DAGSTER_HOME names)."""
    return DagsterInstance.from_config(str(dagster_home))


def runs_with_status(instance: DagsterInstance, statuses: Sequence[str]) -> Sequence[DagsterRun]:
    """Every run in one of `statuses` (DagsterRunStatus names)."""
    return instance.get_runs(RunsFilter(statuses=[DagsterRunStatus[s] for s in statuses]))


def latest_runs(instance: DagsterInstance, job_name: str, limit: int) -> Sequence[DagsterRun]:
    """The `limit` latest runs of `job_name`, newest first."""
    return instance.get_runs(RunsFilter(job_name=job_name), limit=limit)


def report_canceling(instance: DagsterInstance, run: DagsterRun, message: str) -> None:
    instance.report_run_canceling(run, message=message)


def report_canceled(instance: DagsterInstance, run: DagsterRun, message: str) -> None:
    instance.report_run_canceled(run, message=message)


def tag_run(instance: DagsterInstance, run_id: str, tags: Mapping[str, str]) -> bool:
    """Add `tags` to a run; False where this Dagster cannot."""
    if not hasattr(instance, "add_run_tags"):  # pragma: no cover - a Dagster without it
        return False
    instance.add_run_tags(run_id, dict(tags))
    return True


def post_to_run(instance: DagsterInstance, run: DagsterRun, message: str, metadata: Mapping[str, Any]) -> bool:
    """Add an engine event with `metadata` to `run`'s log (shown on its page); False where this
    Dagster cannot."""
    if not _EVENTS or not hasattr(instance, "report_engine_event"):  # pragma: no cover - a Dagster without them
        return False
    instance.report_engine_event(message, run, EngineEventData(metadata=dict(metadata)))
    return True


def run_code_server(tags: Mapping[str, str]) -> str | None:
    """The socket (or host:port) of the code server a run was launched in, from its tags."""
    try:
        info = json.loads(tags.get(GRPC_INFO_TAG) or "{}")
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    return info.get("socket") or (f"{info.get('host')}:{info['port']}" if info.get("port") else None)


# -- a run's steps -------------------------------------------------------------------------------


def run_step_keys(instance: DagsterInstance, run: DagsterRun) -> frozenset[str] | None:
    """The keys of the steps `run` executes; None when the installed Dagster cannot say."""
    snapshot_id = getattr(run, "execution_plan_snapshot_id", None)
    if snapshot_id is None or not hasattr(instance, "get_execution_plan_snapshot"):
        return None  # pragma: no cover - a Dagster without them
    try:
        return frozenset(instance.get_execution_plan_snapshot(snapshot_id).step_keys_to_execute)
    except (AttributeError, TypeError):  # pragma: no cover - Dagster's structures changed
        return None


# -- the component's `translation:`, resolved as Dagster resolves one -----------------------------


def partitions_subset(context: AutomationContext, keys: Iterable[str]) -> Any:
    """The automation context's candidate subset of a partitioned asset narrowed to the partitions
    `keys` (each one of its partitions definition's)."""
    subset = context.candidate_subset
    narrow = getattr(subset, "compute_intersection_with_partition_keys", None)
    if narrow is None:
        raise _gone("EntitySubset.compute_intersection_with_partition_keys")
    return narrow(set(keys))


def translation_resolver(context: Any, model: Any) -> Any:
    """Dagster's resolver of a component's `translation:` block (`get_asset_spec(spec, variables)`)."""
    if not _RESOLVER:
        raise _gone("TranslatorResolvingInfo")
    return TranslatorResolvingInfo(asset_attributes=model, resolution_context=context, model_key="translation")


def context_at(context: Any, key: str) -> Any:
    """The resolution context of the value below `key` (errors then name where they are)."""
    return context.at_path(key)


def context_scope(context: Any) -> dict[str, Any]:
    """The template variables a resolution context renders with."""
    return dict(context.scope)


def resolve_spec_attributes(model: Any, context: Any, variables: Mapping[str, Any]) -> Mapping[str, Any]:
    """The asset attributes of a translation block (`model`), rendered with `variables` as well."""
    if not _RESOLVER:
        raise _gone("resolve_asset_spec_update_kwargs_to_mapping")
    return resolve_asset_spec_update_kwargs_to_mapping(model=model, context=context.with_scope(**variables))


def translated_spec(resolver: Any, spec: AssetSpec, variables: Mapping[str, Any]) -> AssetSpec:
    """`spec` with a whole-block (one template string) translation applied."""
    return resolver.get_asset_spec(spec, variables)


# -- asset checks, GraphQL --------------------------------------------------------------------


def check_outputs(assets_def: AssetsDefinition) -> dict[AssetCheckKey, str]:
    """The output of a multi-asset that each of its checks yields."""
    return {spec.key: name for name, spec in assets_def.check_specs_by_output_name.items()}


RELOAD_LOCATION = """mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) {
  __typename } }"""


# -- the run's failure in one line ----------------------------------------------------------------


def one_line_failures(base: ExecutorDefinition, error_names: frozenset[str]) -> ExecutorDefinition:
    """`base` (the in-process executor), except that a step failure whose error ends in one of
    mesh's one-line errors (class names `error_names`, raised without a stack trace) is yielded
    with that error alone, so the run's failure reads as it; `base` when Dagster lacks the means."""
    creation = base.executor_creation_fn
    if creation is None or not all(hasattr(base, name) for name in ("config_schema", "get_requirements")):
        return base  # pragma: no cover - a Dagster without them: the stock executor

    @executor(name=base.name, config_schema=base.config_schema,  # type: ignore[call-overload]
              requirements=base.get_requirements)
    def _one_line(init_context: InitExecutorContext) -> Executor:
        return _OneLineFailures(creation(init_context), error_names)

    return _one_line


class _OneLineFailures(Executor):
    """Runs the plan with `inner`, passing its events on (see `one_line_failures`)."""

    def __init__(self, inner: Executor, error_names: frozenset[str]) -> None:
        self._inner = inner
        self._error_names = error_names

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[DagsterEvent]:
        for event in self._inner.execute(plan_context, execution_plan):
            yield one_line_failure(event, self._error_names)

    @property
    def retries(self) -> Any:
        return self._inner.retries

    @property
    def step_dependency_config(self) -> Any:
        return self._inner.step_dependency_config


def one_line_failure(event: DagsterEvent, error_names: frozenset[str]) -> DagsterEvent:
    """`event` with its step failure's error replaced by the last error of its chain when that one is
    one of mesh's (`error_names`, no stack trace); any other event, or the same one if Dagster's
    structures changed, unchanged."""
    if not event.is_step_failure:
        return event
    try:
        data = event.step_failure_data
        error = data.error
        if error is None:
            return event
        last = error
        while last.cause is not None:
            last = last.cause
        if last is error or last.cls_name not in error_names or last.stack:
            return event
        return event._replace(event_specific_data=data._replace(error=last._replace(context=None)))
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - Dagster's structures changed
        return event
