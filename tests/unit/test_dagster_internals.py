"""Each use of Dagster outside its public API (dagster/compat.py's `INTERNALS`) against the installed
Dagster: after a Dagster upgrade, this file fails, naming what changed, before any user's run does.
What each use does is tested in tests/dagster/test_compat.py; here only that it is still there, as
compat.py takes it (names, parameters, values). No Spark."""

from __future__ import annotations

import importlib
import inspect
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from mesh_dagster.dagster import compat

Check = Callable[[Path, pytest.MonkeyPatch], None]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _leading(fn, *names: str) -> None:
    """`fn` takes `names` first, in this order (compat.py passes them by position)."""
    found = _params(fn)[:len(names)]
    assert found == list(names), f"{fn.__qualname__} takes {found}, not {list(names)}"


def _takes(fn, *names: str) -> None:
    """`fn` takes `names` by keyword."""
    missing = [n for n in names if n not in _params(fn)]
    assert not missing, f"{fn.__qualname__} takes no {', '.join(missing)} (its parameters: {_params(fn)})"


def _source_has(obj, *texts: str) -> None:
    source = inspect.getsource(obj)
    missing = [t for t in texts if t not in source]
    assert not missing, f"{getattr(obj, '__qualname__', obj.__name__)} no longer mentions {missing}"


def _run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, tags: dict | None = None) -> dg.DagsterRun:
    return instance.add_run(dg.DagsterRun(job_name="j", run_id=str(uuid.uuid4()), status=status, tags=tags or {}))


# -- check evaluations and planned events ------------------------------------------------------------


@check("AssetCheckEvaluation.target_materialization_data")
def _target(tmp_path, monkeypatch):
    assert compat.TARGET_TYPE is not None, "the annotation is no longer one optional class"
    target = compat.TARGET_TYPE(storage_id=7, run_id="r", timestamp=1.5)  # as compat.py builds one
    assert (target.storage_id, target.run_id, target.timestamp) == (7, "r", 1.5)


@check("AssetMaterializationPlannedData")
def _planned_data(tmp_path, monkeypatch):
    from dagster._core.events import AssetMaterializationPlannedData

    assert compat._EVENTS
    _leading(AssetMaterializationPlannedData, "asset_key")
    _takes(AssetMaterializationPlannedData, "partition")


@check("DagsterEvent.build_asset_materialization_planned_event")
def _planned_event(tmp_path, monkeypatch):
    _leading(dg.DagsterEvent.build_asset_materialization_planned_event, "job_name", "step_key",
             "asset_materialization_planned_data")


@check("DagsterInstance.report_dagster_event")
def _report_event(tmp_path, monkeypatch):
    _leading(dg.DagsterInstance.report_dagster_event, "dagster_event", "run_id")


@check("EventLogStorage.get_latest_asset_check_execution_by_key")
def _latest_checks(tmp_path, monkeypatch):
    from dagster._core.storage.event_log.base import EventLogStorage

    _leading(EventLogStorage.get_latest_asset_check_execution_by_key, "check_keys")
    key, other = (dg.AssetCheckKey(dg.AssetKey(["s", "m"]), name) for name in ("c", "d"))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert compat.latest_check_metadata(instance, [key]) == {}
        for line in ("x", "y"):
            instance.report_runless_asset_event(dg.AssetCheckEvaluation(
                asset_key=key.asset_key, check_name="c", passed=False, metadata={"mesh/plan_line": line}))
        assert compat.latest_check_metadata(instance, [key, other]) == {key: {"mesh/plan_line": "y"}}


@check("DagsterInstance.get_backfill")
def _get_backfill(tmp_path, monkeypatch):
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

    _leading(dg.DagsterInstance.get_backfill, "backfill_id")
    keys = [dg.AssetKey(["s", "a"]), dg.AssetKey(["s", "b"])]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_backfill(PartitionBackfill("bf", BulkActionStatus.REQUESTED, False, {}, 1.0, asset_selection=keys))
        run = _run(instance, dg.DagsterRunStatus.STARTED, {compat.BACKFILL_TAG: "bf"})
        assert compat.backfill_assets(instance, run) == frozenset(keys)
        assert compat.backfill_assets(instance, _run(instance, dg.DagsterRunStatus.STARTED)) is None
        assert instance.get_backfill("none") is None


@check("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS")
def _planned_per_run(tmp_path, monkeypatch):
    (name, value), = compat.PLANNED_EVENTS_PER_RUN.items()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        monkeypatch.delenv(name, raising=False)
        assert not compat._plans_subsets(instance), "the event log plans per asset without the variable"
        monkeypatch.setenv(name, value)
        assert compat._plans_subsets(instance), f"{name}={value} no longer makes the event log plan per asset"


@check("DAGSTER_EVENT_BATCH_SIZE")
def _batch_size(tmp_path, monkeypatch):
    root = Path(dg.__file__).parent
    readers = [p for p in root.rglob("*.py") if f'"{compat.EVENT_BATCH_SIZE_ENV}"' in p.read_text()]
    assert readers, f"no Dagster module reads {compat.EVENT_BATCH_SIZE_ENV}"


# -- the SQLite event log ------------------------------------------------------------------------------


@check("SqliteEventLogStorage")
def _sqlite_storage(tmp_path, monkeypatch):
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    missing = [n for n in compat._BATCHING_NEEDS if not hasattr(SqliteEventLogStorage, n)]
    assert not missing, f"SqliteEventLogStorage has no {', '.join(missing)}"
    assert compat.batching_storage() is not None
    assert compat.BatchingSqliteEventLogStorage.__module__ == compat.__name__  # dagster.yaml's name for it


@check("dagster._core.storage.event_log")
def _stock_storage_path(tmp_path, monkeypatch):
    assert hasattr(importlib.import_module("dagster._core.storage.event_log"), "SqliteEventLogStorage")


# -- a run's steps ---------------------------------------------------------------------------------------


@check("DagsterInstance.get_execution_plan_snapshot")
def _plan_snapshot(tmp_path, monkeypatch):
    @dg.asset
    def one() -> None: ...

    @dg.asset(deps=[one])
    def two() -> None: ...

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize([one, two], instance=instance, selection=[two])
        assert compat.run_step_keys(instance, instance.get_run_by_id(result.run_id)) == {"two"}


# -- mesh ui's supervisor ------------------------------------------------------------------------------


@check("DagsterInstance.from_config")
def _from_config(tmp_path, monkeypatch):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with compat.open_instance(tmp_path) as instance:
        assert isinstance(instance, dg.DagsterInstance)
        assert Path(instance.root_directory) == tmp_path


@check("DagsterInstance.get_runs")
def _get_runs(tmp_path, monkeypatch):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        started, _ = _run(instance, dg.DagsterRunStatus.STARTED), _run(instance, dg.DagsterRunStatus.SUCCESS)
        assert [r.run_id for r in compat.runs_with_status(instance, ["STARTED", "CANCELING"])] == [started.run_id]


@check("DagsterInstance.report_run_canceling")
def _canceling(tmp_path, monkeypatch):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run = _run(instance, dg.DagsterRunStatus.STARTED)
        compat.report_canceling(instance, run, "stopping")
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.CANCELING


@check("DagsterInstance.report_run_canceled")
def _canceled(tmp_path, monkeypatch):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run = _run(instance, dg.DagsterRunStatus.CANCELING)
        compat.report_canceled(instance, run, "stopped")
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.CANCELED


@check("DagsterInstance.add_run_tags")
def _add_run_tags(tmp_path, monkeypatch):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run = _run(instance, dg.DagsterRunStatus.SUCCESS, {"a": "1"})
        assert compat.tag_run(instance, run.run_id, {"mesh/plan_id": "p1"})
        assert instance.get_run_by_id(run.run_id).tags == {"a": "1", "mesh/plan_id": "p1"}
        later = _run(instance, dg.DagsterRunStatus.SUCCESS)
        assert [r.run_id for r in compat.latest_runs(instance, "j", 5)] == [later.run_id, run.run_id]
        assert [r.run_id for r in compat.latest_runs(instance, "j", 1)] == [later.run_id]
        assert compat.latest_runs(instance, "other", 5) == []


@check("DagsterInstance.report_engine_event")
def _report_engine_event(tmp_path, monkeypatch):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        run = _run(instance, dg.DagsterRunStatus.SUCCESS)
        assert compat.post_to_run(instance, run, "the diff", {"data_diff": dg.MetadataValue.text("x")})
        (entry,) = [e for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
        assert entry.dagster_event.event_type_value == "ENGINE_EVENT" and entry.message == "the diff"
        assert entry.dagster_event.engine_event_data.metadata["data_diff"] == dg.MetadataValue.text("x")


@check(".dagster/grpc_info")
def _grpc_info(tmp_path, monkeypatch):
    from dagster._core.launcher import default_run_launcher
    from dagster._core.storage.tags import GRPC_INFO_TAG

    assert GRPC_INFO_TAG == compat.GRPC_INFO_TAG, f"the tag is now {GRPC_INFO_TAG!r}"
    _source_has(default_run_launcher, "GRPC_INFO_TAG", '"socket"', '"port"', '"host"')
    assert compat.run_code_server({GRPC_INFO_TAG: json.dumps({"host": "h", "socket": "/s"})}) == "/s"
    assert compat.run_code_server({GRPC_INFO_TAG: json.dumps({"host": "h", "port": 4266})}) == "h:4266"


@check("dagster api grpc --socket")
def _socket_arg(tmp_path, monkeypatch):
    from dagster._grpc import server

    _source_has(server.open_server_process, f'"{compat.CODE_SERVER_SOCKET_ARG}"')


@check("executable_path")
def _executable_path(tmp_path, monkeypatch):
    from dagster._cli import code_server
    from dagster._core.origin import get_python_environment_entry_point
    from dagster._grpc import server
    from dagster._grpc.constants import GrpcServerCommand

    assert get_python_environment_entry_point("/p/python") == ["/p/python", "-m", "dagster"]
    assert list(GrpcServerCommand.CODE_SERVER_START.server_command) == ["code-server", "start"]
    _source_has(server.open_server_process, "get_python_environment_entry_point(executable_path or sys.executable)",
                "**os.environ", "env=env")  # the code server: the executable, with this environment
    _source_has(code_server.start_command.callback, "executable_path=sys.executable if use_python_environment_entry_point")
    _source_has(server.DagsterApiServer.__init__, 'multiprocessing.get_context("spawn")')
    _source_has(server.DagsterApiServer.StartRun, "self._mp_ctx.Process(")  # a run: a process it spawns


@check("DAGSTER_IS_DEV_CLI")
def _dev_cli_env(tmp_path, monkeypatch):
    from dagster._cli import dev

    _source_has(dev.dev_command_impl, *(f'os.environ["{name}"]' for name in compat.DEV_CLI_ENV))


# -- the component's translation -----------------------------------------------------------------------


@check("TranslatorResolvingInfo")
def _resolving_info(tmp_path, monkeypatch):
    from dagster.components.utils import TranslatorResolvingInfo

    assert compat._RESOLVER
    _takes(TranslatorResolvingInfo, "asset_attributes", "resolution_context", "model_key")
    _leading(TranslatorResolvingInfo.get_asset_spec, "base_spec", "context")


@check("resolve_asset_spec_update_kwargs_to_mapping")
def _resolve_attributes(tmp_path, monkeypatch):
    from dagster.components.resolved.core_models import resolve_asset_spec_update_kwargs_to_mapping

    _takes(resolve_asset_spec_update_kwargs_to_mapping, "model", "context")
    model = dg.AssetAttributesModel(group_name="{{ g }}")
    resolved = compat.resolve_spec_attributes(model, dg.ResolutionContext.default(), {"g": "sales"})
    assert dict(resolved).get("group_name") == "sales"


@check("ResolutionContext.at_path/with_scope/scope")
def _resolution_context(tmp_path, monkeypatch):
    context = compat.context_at(dg.ResolutionContext.default(), "translation").with_scope(x=1)
    assert compat.context_scope(context)["x"] == 1
    assert list(context.path) == ["translation"]


# -- asset checks, run tags, GraphQL -------------------------------------------------------------------


@check("AssetsDefinition.check_specs_by_output_name")
def _check_outputs(tmp_path, monkeypatch):
    @dg.multi_asset(specs=[dg.AssetSpec("a")], check_specs=[dg.AssetCheckSpec("c", asset="a")])
    def a():
        return None

    outputs = compat.check_outputs(a)
    assert set(outputs) == {dg.AssetCheckKey(dg.AssetKey("a"), "c")}
    assert set(outputs.values()) <= set(a.node_def.output_dict)


@check("reloadRepositoryLocation")
def _reload_location(tmp_path, monkeypatch):
    from dagster_graphql.schema import create_schema

    mutations = create_schema().graphql_schema.mutation_type.fields
    assert "reloadRepositoryLocation" in mutations, "the webserver has no such mutation"
    assert list(mutations["reloadRepositoryLocation"].args) == ["repositoryLocationName"]
    assert "reloadRepositoryLocation(repositoryLocationName: $name)" in compat.RELOAD_LOCATION


# -- the run's failure in one line ----------------------------------------------------------------------


@check("ExecutorDefinition.config_schema/get_requirements")
def _executor_definition(tmp_path, monkeypatch):
    base = dg.in_process_executor
    assert base.executor_creation_fn is not None
    assert base.config_schema.as_field().config_type is not None
    assert list(base.get_requirements({})) == []  # the in-process executor needs nothing of a job
    made = compat.one_line_failures(base, frozenset({"E"}))
    assert made is not base and made.name == base.name
    assert made.config_schema is base.config_schema


@check("Executor.step_dependency_config")
def _step_dependency_config(tmp_path, monkeypatch):
    from dagster._core.executor.base import Executor
    from dagster._core.executor.in_process import InProcessExecutor

    for cls in (Executor, InProcessExecutor):  # the base's default, the in-process executor's own
        assert isinstance(inspect.getattr_static(cls, "step_dependency_config"), property), cls

    class Inner(dg.Executor):
        def execute(self, plan_context, execution_plan):
            return iter(())

        retries = "retries"  # type: ignore[assignment]
        step_dependency_config = "its config"  # type: ignore[assignment]

    wrapped = compat._OneLineFailures(Inner(), frozenset())
    assert (wrapped.step_dependency_config, wrapped.retries) == ("its config", "retries")


@check("StepFailureData.error")
def _step_failure_error(tmp_path, monkeypatch):
    from dagster._core.execution.plan.objects import StepFailureData
    from dagster._utils.error import SerializableErrorInfo

    assert list(SerializableErrorInfo._fields) == ["message", "stack", "cls_name", "cause", "context"]
    _source_has(dg.DagsterEvent.job_failure, "first_step_failure_event.step_failure_data.error")
    ours = SerializableErrorInfo("mesh.E: it failed\n", [], "E")
    wrapper = SerializableErrorInfo("Error occurred while executing op", ["frame"], "Wrapper", cause=ours)
    event = dg.DagsterEvent(event_type_value="STEP_FAILURE", job_name="j", step_key="s",
                            event_specific_data=StepFailureData(wrapper, None))
    shortened = compat.one_line_failure(event, frozenset({"E"}))
    assert shortened.step_failure_data.error == ours and shortened.step_key == "s"
    assert compat.one_line_failure(event, frozenset({"Other"})) is event


@check("EntitySubset.compute_intersection_with_partition_keys")
def _partitions_subset(tmp_path, monkeypatch):
    from dagster._core.asset_graph_view.entity_subset import EntitySubset

    _leading(EntitySubset.compute_intersection_with_partition_keys, "partition_keys")
    assert "candidate_subset" in inspect.get_annotations(dg.AutomationContext)


# -- the tests ---------------------------------------------------------------------------------------


def test_every_internal_has_a_check():
    assert set(CHECKS) == set(compat.INTERNALS)


@pytest.mark.parametrize("name", sorted(compat.INTERNALS))
def test_the_installed_dagster_still_has(name, tmp_path, monkeypatch):
    if name not in CHECKS:
        pytest.fail(f"compat.INTERNALS lists {name} but nothing here checks it")
    try:
        CHECKS[name](tmp_path, monkeypatch)
    except Exception as e:  # noqa: BLE001 - any failure means the same: Dagster changed
        pytest.fail(f"Dagster {dg.__version__} changed {name} ({compat.INTERNALS[name]}): {type(e).__name__}: "
                    f"{e}. mesh_dagster/dagster/compat.py must follow the change.", pytrace=False)
