"""Models whose history cannot be recomputed per partition, through Dagster's own execution APIs on
the test process's Spark session: they are unpartitioned assets, a materialization processes every
pending interval in order (parents of the same run first), and a run for partitions is refused.

The project: a daily raw table of changes over the last days, a partitioned time-range model
reading it, and a unique-key and an unmanaged model reading that one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from failures import failure_text
from plan_checks import audit_evaluations
from prod_project import ProdProject
from project_builder import write_project
from project_copies import TODAY

from mesh_dagster.context import Context

pytestmark = pytest.mark.spark

DAYS = 3
FIRST = TODAY - timedelta(days=DAYS)
LAST = TODAY - timedelta(days=1)


class History(ProdProject):
    def run(self, job: str | None = None, **kwargs) -> dg.ExecuteInProcessResult:
        defs = self.defs()
        job_def = defs.resolve_job_def(job) if job else defs.resolve_implicit_global_asset_job_def()
        return job_def.execute_in_process(instance=self.instance, raise_on_error=False, **kwargs)

    def rows(self, sql: str) -> list[tuple]:
        ctx = Context(self.root)
        try:
            return sorted(tuple(r) for r in ctx.engine.session.fetchall(sql))
        finally:
            ctx.close()

    def table(self, model: str) -> str:
        ctx = Context(self.root)
        try:
            return ctx.plans.plan("prod", allow_empty=True).snapshots[f"{self.schema}.{model}"].table_name
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark):
    from mesh_dagster.engine.adapter import SparkEngine

    engine = SparkEngine(spark)
    schema = f"h_{uuid.uuid4().hex[:8]}"
    raw = f"{schema}_raw.changes"
    engine.catalog.create_schema(f"{schema}_raw")
    day = [FIRST + timedelta(days=i) for i in range(DAYS)]
    # key 2 changes on the second day, key 1 on the third (late); key 3 arrives on the second
    changes = [(1, 10, day[0]), (2, 20, day[0]), (2, 21, day[1]), (3, 30, day[1]), (1, 11, day[2])]
    values = ", ".join(f"({i}, {v}, DATE'{d}')" for i, v, d in changes)
    engine.session.execute(f"CREATE TABLE {raw} USING parquet AS SELECT * FROM VALUES {values} AS t(id, v, ds)")
    tmp = tmp_path_factory.mktemp("history")
    root = write_project(tmp / "p", {
        "external_models.yaml": f"- name: {raw}\n  columns:\n    id: int\n    v: int\n    ds: date\n",
        "models/events.sql": f"""
            MODEL (name {schema}.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '{FIRST}');

            SELECT id, v, ds FROM {raw} WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/latest.sql": f"""
            MODEL (
              name {schema}.latest,
              kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1),  -- a day at a time: keys repeat across days
              start '{FIRST}',
              audits (not_null(columns := (v)))
            );

            SELECT id, v, ds FROM {schema}.events WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/log.sql": f"""
            MODEL (name {schema}.log, kind INCREMENTAL_UNMANAGED, start '{FIRST}');

            SELECT id, v, ds FROM {schema}.events WHERE ds BETWEEN @start_ds AND @end_ds
            """,
    }, config=f"model_defaults:\n  dialect: spark\n  start: {FIRST}\n  cron: '@daily'\n")
    (tmp / "dagster_home").mkdir()
    yield History(root, schema, dg.DagsterInstance.local_temp(str(tmp / "dagster_home")))
    for s in (schema, f"mesh__{schema}", f"{schema}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    return failure_text(result)


def _materializations(result: dg.ExecuteInProcessResult) -> dict[str, list[dg.AssetMaterialization]]:
    out: dict[str, list] = {}
    for event in result.get_asset_materialization_events():
        m = event.event_specific_data.materialization
        out.setdefault(m.asset_key.path[-1], []).append(m)
    return out


def test_history_models_are_unpartitioned_assets(history):
    graph = history.defs().resolve_asset_graph()
    assert graph.get(history.key("events")).partitions_def is not None
    assert graph.get(history.key("latest")).partitions_def is None
    assert graph.get(history.key("log")).partitions_def is None
    assert graph.get(history.key("latest")).code_version  # the fingerprint, like any model


def test_a_run_for_partitions_is_refused_in_one_line(history):
    for run in ({"partition_key": str(FIRST)},
                {"tags": {"dagster/asset_partition_range_start": str(FIRST),
                          "dagster/asset_partition_range_end": str(LAST)}}):
        result = history.run(asset_selection=[history.key("latest"), history.key("log")], **run)
        assert not result.success
        messages = [e.step_failure_data.error.cause.message.strip() for e in result.all_events
                    if e.event_type_value == "STEP_FAILURE"]  # one step per model, each refused in one line
        ending = ("failed: not materialized for partitions ({}): each write builds on the rows written before it, so "
                  "an interval cannot be recomputed alone; materialize it without a partition, which processes every "
                  "pending interval in order.")
        assert sorted(messages) == [
            f"mesh.ModelFailed: {history.schema}.latest " + ending.format("INCREMENTAL_BY_UNIQUE_KEY"),
            f"mesh.ModelFailed: {history.schema}.log " + ending.format("INCREMENTAL_UNMANAGED")]
        assert not result.get_asset_materialization_events()


def test_a_history_model_waits_for_its_parents_data(history):
    result = history.run(asset_selection=[history.key("latest")])
    assert not result.success
    assert f"Cannot materialize {history.schema}.latest: it reads {history.schema}.events" in _failure(result)
    ctx = Context(history.root)
    try:
        snap = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{history.schema}.latest"]
        assert ctx.state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, []) == []
    finally:
        ctx.close()


def test_the_schedule_fills_parents_by_partition_then_history_in_order(history):
    defs = history.defs()
    (schedule,) = defs.schedules
    tick = datetime.combine(TODAY, datetime.min.time(), tzinfo=UTC)
    with dg.build_schedule_context(instance=history.instance, scheduled_execution_time=tick) as context:
        (request,) = schedule.evaluate_tick(context).run_requests
    assert set(request.asset_selection) == {history.key(m) for m in ("events", "latest", "log")}
    assert request.tags["dagster/asset_partition_range_start"] == str(FIRST)
    assert request.tags["mesh/scheduled"] == "true"

    result = history.run(schedule.job_name, tags=request.tags, asset_selection=request.asset_selection)
    assert result.success
    events = _materializations(result)
    assert len(events["events"]) == DAYS  # one per partition
    (latest,) = events["latest"]  # one, unpartitioned: every pending day, in order
    assert latest.partition is None and latest.metadata["mesh/interval"].value == f"{FIRST} - {LAST}"
    (check,) = audit_evaluations(result)
    assert check.passed and check.asset_key == history.key("latest")
    assert history.rows(f"SELECT id, v FROM {history.table('latest')}") == [(1, 11), (2, 21), (3, 30)]
    assert history.rows(f"SELECT id, v FROM {history.table('log')}") == [(1, 10), (1, 11), (2, 20), (2, 21), (3, 30)]

    # materialized again by hand: nothing is pending, nothing is appended twice
    again = history.run(asset_selection=[history.key("latest"), history.key("log")])
    assert again.success
    assert {k: [m.metadata["mesh/outcome"].value for m in v] for k, v in _materializations(again).items()} == {
        "latest": ["up to date"], "log": ["up to date"]}
    assert len(history.rows(f"SELECT id FROM {history.table('log')}")) == 5
