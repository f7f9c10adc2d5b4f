"""Run status that tells the truth, through Dagster's own execution APIs on the test process's Spark
session: one step per model, so in one run a model that fails fails its own asset (its partitions
FAILED, one line saying why, no stack trace), Dagster skips the models reading it (their partitions
stay unmaterialized: their upstream failed), and the others are materialized; a model with nothing to
do is reported as such, never as failed; and the audits of partitioned models are partitioned checks,
with a result per partition.

The project, daily over the last days:
- `daily` (INCREMENTAL_BY_TIME_RANGE, a batch per day) with a non-blocking audit that fails on
  one day only, and `totals` (FULL: no partitions, rebuilt whole) with a blocking one that passes;
- `bad`, an incremental Python model that raises, and `after_bad`, incremental too, which reads it;
- `late`, whose start is after the run's range (nothing to compute);
- `latest` (INCREMENTAL_BY_UNIQUE_KEY: no partitions, pending intervals in order) reading `totals`.

Runs go through `execute_in_process`, or `execute_job` on the schedule's job as a real run does;
the planned events are Dagster's per asset and range, as under `mesh ui`
(DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS).
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

import dagster as dg
import pytest
from plan_checks import audit_checks, audit_evaluations
from prod_project import ProdProject
from project_builder import write_project
from project_copies import TODAY

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions

pytestmark = pytest.mark.spark

DAYS = 3
FIRST = TODAY - timedelta(days=DAYS)
SECOND = FIRST + timedelta(days=1)
LAST = TODAY - timedelta(days=1)
RANGE = {"dagster/asset_partition_range_start": str(FIRST), "dagster/asset_partition_range_end": str(LAST)}
SCHEDULED = {**RANGE, "mesh/scheduled": "true"}  # what a schedule tick launches: history models join
ROOT_VARIABLE = "MESH_TEST_RUN_STATUS_ROOT"


def schedule_job() -> dg.JobDefinition:
    """The daily schedule's job of the module's project, rebuilt by `execute_job`."""
    return definitions(os.environ[ROOT_VARIABLE], "prod", shared_spark=False).resolve_job_def("run_prod_daily")

BAD = '''\
from mesh_dagster import ExecutionContext, model


@model("{schema}.bad", columns={{"x": "int", "ds": "date"}},
       kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"))
def execute(context: ExecutionContext, start, end, execution_time):
    raise RuntimeError("the upstream API is down")
'''


class Project(ProdProject):
    def run(self, models: list[str] | None = None, **kwargs) -> dg.ExecuteInProcessResult:
        job = self.defs().resolve_implicit_global_asset_job_def()
        selection = [self.key(m) for m in models] if models is not None else None
        return job.execute_in_process(instance=self.instance, raise_on_error=False, asset_selection=selection,
                                      **kwargs)

    def run_job(self, models: list[str], tags: dict[str, str]) -> dg.JobExecutionResult:
        """A run of the schedule's job with the executor a real run has."""
        return dg.execute_job(dg.reconstructable(schedule_job), self.instance, tags=tags,
                              asset_selection=[self.key(m) for m in models])

    def statuses(self, model: str) -> str:
        """One letter per partition of the run's range: M(aterialized), F(ailed), -(missing)."""
        key = self.key(model)
        partitions_def = self.defs().resolve_asset_graph().get(key).partitions_def
        keys = [str(FIRST + timedelta(days=i)) for i in range(DAYS)]
        found = self.instance.get_status_by_partition(key, keys, partitions_def) or {}
        return "".join({dg.AssetPartitionStatus.MATERIALIZED: "M", dg.AssetPartitionStatus.FAILED: "F"}.get(
            found.get(k), "-") for k in keys)  # type: ignore[arg-type]

    def intervals(self, model: str) -> list:
        ctx = Context(self.root)
        try:
            snap = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{self.schema}.{model}"]
            return ctx.state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, [])
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark):
    from mesh_dagster.engine.adapter import SparkEngine

    schema = f"rs_{uuid.uuid4().hex[:8]}"
    tmp = tmp_path_factory.mktemp("run_status")
    root = write_project(tmp / "p", {
        "audits/not_second_day.sql": f"""
            AUDIT (name not_second_day, blocking false);

            SELECT * FROM @this_model WHERE ds = DATE '{SECOND}'
            """,
        "models/daily.sql": f"""
            MODEL (
              name {schema}.daily,
              kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
              audits (not_second_day)
            );

            SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
            """,
        "models/totals.sql": f"""
            MODEL (name {schema}.totals, kind FULL, audits (not_null(columns := (id))));

            SELECT 1 AS id, 'a' AS v
            """,
        "models/bad.py": BAD.format(schema=schema),
        "models/after_bad.sql": f"""
            MODEL (name {schema}.after_bad, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

            SELECT x, ds FROM {schema}.bad WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/late.sql": f"""
            MODEL (name {schema}.late, kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
                   start '{TODAY + timedelta(days=30)}');

            SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
            """,
        "models/latest.sql": f"""
            MODEL (name {schema}.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));

            SELECT id, v FROM {schema}.totals
            """,
    }, config=f"model_defaults:\n  dialect: spark\n  start: {FIRST}\n  cron: '@daily'\n")
    (tmp / "dagster_home").mkdir()
    os.environ[ROOT_VARIABLE] = str(root)
    yield Project(root, schema, dg.DagsterInstance.local_temp(str(tmp / "dagster_home")))
    os.environ.pop(ROOT_VARIABLE, None)
    engine = SparkEngine(spark)
    for s in (schema, f"mesh__{schema}"):
        engine.catalog.drop_schema(s, cascade=True)


@pytest.fixture(autouse=True)
def planned_per_range(monkeypatch):
    """What `mesh ui` runs with: Dagster plans each asset of a run once, for its range."""
    monkeypatch.setenv("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "true")


def _failure(result: dg.ExecuteInProcessResult | dg.JobExecutionResult) -> str:
    """The step failure as the UI shows it: Dagster's line naming the op, then the model's error
    (a cause without a stack trace)."""
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = event.step_failure_data.error
    assert event.step_failure_data.error_source.value == "USER_CODE_ERROR"  # the UI hides Dagster's own stack
    if error.cause is None:  # a launched run's executor passes on the one line (compat.one_line_failures)
        assert error.stack == [], error
        return error.message.strip()
    assert error.cause.stack == [], error.cause
    return f"{error.message.strip()}\n{error.cause.message.strip()}"


def _outcomes(result: dg.ExecuteInProcessResult | dg.JobExecutionResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for event in result.get_asset_materialization_events():
        m = event.event_specific_data.materialization
        out.setdefault(m.asset_key.path[-1], []).append(m.metadata["mesh/outcome"].value)
    return out


def test_one_failing_model_fails_its_own_asset_and_its_readers_only(project):
    result = project.run(["daily", "totals", "bad", "after_bad", "late"], tags=RANGE)
    assert not result.success  # the run shows the failure

    # one step per model; the one reading the failed model is not run
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    assert started == {f"{project.schema}__{m}" for m in ("daily", "totals", "bad", "late")}
    assert {e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"} == {
        f"{project.schema}__bad"}

    # the healthy models and the one with nothing to compute have their materializations
    assert _outcomes(result) == {"daily": ["evaluated"] * DAYS, "totals": ["evaluated"], "late": ["empty"] * DAYS}
    assert project.statuses("daily") == project.statuses("late") == "MMM"
    # the failing model's partitions failed; the model reading it: not materialized, nothing recorded
    assert project.statuses("bad") == "FFF"
    assert project.statuses("after_bad") == "---"
    assert project.intervals("bad") == project.intervals("after_bad") == []
    assert project.intervals("daily") and project.intervals("totals")

    message = _failure(result)
    assert message == ("dagster._core.errors.DagsterExecutionStepExecutionError: Error occurred while executing op "
                       f'"{project.schema}__bad":\n'
                       f"mesh.ModelFailed: models/bad.py:7: Python model {project.schema}.bad failed: RuntimeError: the "
                       "upstream API is down")


def test_audits_of_a_ranged_run_are_reported_per_partition(project):
    result = project.run(["daily"], tags=RANGE)
    assert result.success  # a non-blocking audit failing on one day fails no model
    evaluations = {e.partition: e for e in audit_evaluations(result)}
    assert set(evaluations) == {str(FIRST + timedelta(days=i)) for i in range(DAYS)}
    assert {p: e.passed for p, e in evaluations.items()} == {
        str(FIRST): True, str(SECOND): False, str(LAST): True}
    failed = evaluations[str(SECOND)]
    assert failed.check_name == "not_second_day" and failed.severity == dg.AssetCheckSeverity.WARN
    assert failed.metadata["failing_rows"].value == 1 and failed.metadata["batch"].value == f"{SECOND} - {SECOND}"

    # each points at its partition's materialization of this run: Dagster's per-partition check status
    assert {e.target_materialization_data.run_id for e in evaluations.values()} == {result.run_id}
    graph = project.defs().resolve_asset_graph()
    (check_key,) = audit_checks(graph.get(project.key("daily")).check_keys)
    assert graph.get(check_key).partitions_def == graph.get(project.key("daily")).partitions_def
    infos = {i.partition_key: i for i in project.instance.event_log_storage.get_asset_check_partition_info(
        [check_key], partition_keys=list(evaluations))}
    assert {p: (i.latest_execution_status.value, i.is_current) for p, i in infos.items()} == {
        str(FIRST): ("SUCCEEDED", True), str(SECOND): ("FAILED", True), str(LAST): ("SUCCEEDED", True)}


def test_a_one_partition_run_checks_that_partition(project):
    result = project.run(["daily"], partition_key=str(SECOND))
    assert result.success
    (evaluation,) = audit_evaluations(result)
    assert evaluation.partition == str(SECOND) and not evaluation.passed
    assert evaluation.target_materialization_data is not None  # it checked the materialization just made


def test_a_model_with_nothing_due_is_skipped_not_failed_in_a_failing_run(project):
    """`latest` has its own step, after the failed one: it runs, as it reads only `totals` (whose
    blocking check passed: the step waits for that check's result too)."""
    first = project.run_job(["totals", "bad", "latest"], SCHEDULED)
    assert not first.success
    assert _outcomes(first) == {"totals": ["evaluated"], "latest": ["evaluated"]}
    again = project.run_job(["totals", "bad", "latest"], SCHEDULED)
    assert not again.success
    assert _outcomes(again)["latest"] == ["up to date"]  # skipped: nothing was due
    latest = project.instance.get_latest_materialization_event(project.key("latest"))
    assert latest is not None and latest.run_id == again.run_id  # its last word is this run's, not a failure
    assert f"{project.schema}.latest" not in _failure(again)


def test_a_step_reading_a_failed_model_is_left_out_whole(project):
    """Dagster's granularity: a step reading a model that failed in an earlier step does not run."""
    (project.root / "models" / "latest.sql").write_text(
        f"MODEL (name {project.schema}.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));\n\n"
        f"SELECT x AS id, 'b' AS v FROM {project.schema}.bad\n")
    result = project.run_job(["bad", "latest"], SCHEDULED)
    assert not result.success and "latest" not in _outcomes(result)
    assert {e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"} == {
        f"{project.schema}__bad"}


STATUS_QUERY = """
query Statuses($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetPartitionStatuses { ... on TimePartitionStatuses { ranges { status startKey endKey } } }
      assetChecksOrError {
        ... on AssetChecks {
          checks { name partitionStatuses { ... on AssetCheckTimePartitionStatuses {
            ranges { status startKey endKey } } } }
        }
      }
    }
  }
}
"""


def test_the_ui_shows_failed_partitions_and_per_partition_checks(project, tmp_path):
    """What the webserver's GraphQL (the UI) says after the runs above: the failing model's
    partitions FAILED, the healthy ones MATERIALIZED, and the audit's status partition by partition."""
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    code = tmp_path / "defs.py"
    code.write_text("from mesh_dagster.dagster import definitions\n\n"
                    f"defs = definitions({str(project.root)!r}, 'prod', shared_spark=False)\n")

    def ranges(node: dict) -> list[tuple[str, str, str]]:
        return [(r["status"], r["startKey"], r["endKey"]) for r in node["ranges"]]

    with define_out_of_process_context(str(code), "defs", project.instance) as context:
        def node(model: str) -> dict:
            result = execute_dagster_graphql(context, STATUS_QUERY, {"key": {"path": [project.schema, model]}})
            assert not result.errors, result.errors
            return result.data["assetNodeOrError"]

        assert ranges(node("bad")["assetPartitionStatuses"]) == [("FAILED", str(FIRST), str(LAST))]
        assert ranges(node("after_bad")["assetPartitionStatuses"]) == []  # not materialized: upstream failed
        daily = node("daily")
        assert ranges(daily["assetPartitionStatuses"]) == [("MATERIALIZED", str(FIRST), str(LAST))]
        (check,) = audit_checks(daily["assetChecksOrError"]["checks"])
        assert sorted(ranges(check["partitionStatuses"])) == [
            ("FAILED", str(SECOND), str(SECOND)), ("SUCCEEDED", str(FIRST), str(FIRST)),
            ("SUCCEEDED", str(LAST), str(LAST))]
