"""Materializing, auditing, promoting and re-stamping through Dagster's own execution APIs, on the
test process's shared Spark session. The example project is moved to the last days (see
project_copies) and its schema renamed per module so tables never collide with other tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster._utils.test.data_versions import get_stale_status_resolver
from failures import failure_text
from plan_checks import audit_evaluations, stamps_only
from project_copies import TODAY, edit, recent_example

from mesh_dagster.context import Context
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.dagster import definitions
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator

pytestmark = pytest.mark.spark

DAYS = 7
FIRST = TODAY - timedelta(days=DAYS)  # incremental_model's start, first partition
LATER = FIRST + timedelta(days=2)  # seed_model's and full_model's start (model_defaults)
RANGE = {"dagster/asset_partition_range_start": str(FIRST),
         "dagster/asset_partition_range_end": str(TODAY - timedelta(days=1))}


class Project:
    """A project, its Dagster instance and helpers to build definitions and run jobs."""

    def __init__(self, root: Path, schema: str, instance: dg.DagsterInstance):
        self.root, self.schema, self.instance = root, schema, instance

    def key(self, model: str, env: str = "prod") -> dg.AssetKey:
        return dg.AssetKey([self.schema if env == "prod" else f"{self.schema}__{env}", model])

    def name(self, model: str) -> str:
        return f"{self.schema}.{model}"

    def defs(self, env: str = "prod") -> dg.Definitions:
        return definitions(self.root, env, shared_spark=False)

    def run(self, job: str | None = None, env: str = "prod", **kwargs) -> dg.ExecuteInProcessResult:
        defs = self.defs(env)
        job_def = defs.resolve_job_def(job) if job else defs.resolve_implicit_global_asset_job_def()
        return job_def.execute_in_process(instance=self.instance, raise_on_error=False, **kwargs)

    def restamp(self, env: str = "prod") -> list[dg.ExecuteInProcessResult]:
        """What restamp_<env>_sensor launches, run here: one ranged run of the assets per request."""
        defs = self.defs(env)
        with dg.build_sensor_context(instance=self.instance, definitions=defs) as context:
            wanted = stamps_only(defs.resolve_sensor_def(f"restamp_{env}_sensor")(context), self.instance)
        if isinstance(wanted, dg.SkipReason):
            return []
        return [self.run(env=env, tags=r.tags, asset_selection=list(r.asset_selection or []))
                for r in wanted.run_requests]

    def context(self) -> Context:
        return Context(self.root)

    def rows(self, sql: str) -> list[tuple]:
        ctx = self.context()
        try:
            return [tuple(r) for r in ctx.engine.session.fetchall(sql)]
        finally:
            ctx.close()

    def statuses(self, defs: dg.Definitions, model: str, env: str = "prod") -> str:
        """One letter per partition (one for a model without partitions): F(resh), S(tale), M(issing)."""
        resolver = get_stale_status_resolver(self.instance, list(defs.assets))
        key = self.key(model, env)
        partitions = defs.resolve_asset_graph().get(key).partitions_def
        if partitions is None:
            return resolver.get_status(key).value[0]
        return "".join(resolver.get_status(key, p).value[0] for p in partitions.get_partition_keys())


def _new_project(tmp_path: Path) -> Project:
    schema = f"ex_{uuid.uuid4().hex[:8]}"
    root = recent_example(tmp_path / "project", DAYS, schema)
    (tmp_path / "dagster_home").mkdir()
    return Project(root, schema, dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home")))


def _drop(engine, schema: str) -> None:
    for s in (schema, f"{schema}__dev", f"mesh__{schema}"):
        engine.catalog.drop_schema(s, cascade=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark) -> Project:
    from mesh_dagster.engine.adapter import SparkEngine

    p = _new_project(tmp_path_factory.mktemp("materialize"))
    yield p
    _drop(SparkEngine(spark), p.schema)


def _tick() -> datetime:
    """Today's midnight tick of a daily schedule."""
    return datetime.combine(TODAY, datetime.min.time(), tzinfo=UTC)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    return failure_text(result)


def test_promote_is_refused_while_intervals_are_missing(project):
    result = project.run("promote_prod")
    assert not result.success
    message = _failure(result)
    assert "Cannot promote 'prod': 3 model(s) miss intervals for their current version" in message
    assert f"{project.schema}.seed_model: not built yet" in message
    assert f"{project.schema}.incremental_model: {FIRST} - {TODAY - timedelta(days=1)}" in message
    assert f"{project.schema}.full_model: {LATER} - " in message
    ctx = project.context()
    assert ctx.state.environments.get_environment("prod") is None  # nothing moved


def test_scheduled_run_fills_the_current_versions_and_records_intervals(project, engine):
    defs = project.defs()
    (schedule,) = defs.schedules
    with dg.build_schedule_context(instance=project.instance, scheduled_execution_time=_tick()) as context:
        (request,) = schedule.evaluate_tick(context).run_requests
    assert request.tags["dagster/asset_partition_range_start"] == str(FIRST)
    assert request.tags["dagster/asset_partition_range_end"] == str(TODAY - timedelta(days=1))
    assert len(request.asset_selection) == 3

    result = project.run("run_prod_daily", tags=request.tags, asset_selection=request.asset_selection)
    assert result.success
    by_key: dict = {}
    for event in result.get_asset_materialization_events():
        m = event.event_specific_data.materialization
        by_key.setdefault(m.asset_key.path[-1], []).append(m)
    # one event per partition of the incremental model; the seed is built once, the FULL model rebuilt once
    assert {k: len(v) for k, v in by_key.items()} == {"seed_model": 1, "incremental_model": DAYS, "full_model": 1}

    plan = project.context().plans.plan("prod", allow_empty=True)
    inc, full, seed = (plan.snapshots[project.name(m)] for m in ("incremental_model", "full_model", "seed_model"))
    # full_model starts two days later: one full refresh over its lifetime
    # the data version is the physical version: the partition itself is the interval
    assert {m.tags["dagster/data_version"] for m in by_key["full_model"]} == {full.version}
    assert {m.tags["dagster/data_version"] for m in by_key["incremental_model"]} == {inc.version}
    assert {m.tags["dagster/data_version"] for m in by_key["seed_model"]} == {seed.version}
    assert {m.tags["dagster/code_version"] for m in by_key["incremental_model"]} == {inc.identifier}
    (check,) = audit_evaluations(result)  # the FULL model's audit, over the table it rebuilt
    assert check.passed and check.check_name == "assert_positive_order_ids" and check.partition is None

    state = project.context().state
    assert state.intervals.get_intervals([inc.interval_key])[inc.interval_key] == [(to_ms(str(FIRST)), to_ms(str(TODAY)))]
    assert state.intervals.get_intervals([full.interval_key])[full.interval_key] == [
        (to_ms(str(LATER)), to_ms(str(TODAY)))]
    assert state.intervals.get_intervals([seed.interval_key])[seed.interval_key] == [ALL_TIME]
    assert project.rows(f"SELECT COUNT(*) FROM {inc.table_name}") == [(7,)]
    assert not engine.catalog.table_exists(f"{project.schema}.full_model")  # views never move here

    with dg.build_schedule_context(instance=project.instance, scheduled_execution_time=_tick()) as context:
        assert isinstance(schedule.evaluate_tick(context).skip_message, str)  # nothing due any more


def test_a_run_of_checks_alone_computes_nothing(project):
    """The UI's "Execute" on a check runs the model's step with the check alone: the plan check's
    verdict (a change is pending: prod is not promoted yet) and the audit verdicts that hold on the
    version's data, no materialization, nothing recomputed."""
    full = project.key("full_model")
    plan_check, audit = dg.AssetCheckKey(full, "serves_current_code"), dg.AssetCheckKey(full, "assert_positive_order_ids")
    job = dg.define_asset_job("checks_alone", selection=dg.AssetSelection.checks(plan_check, audit))
    defs = dg.Definitions.merge(project.defs(), dg.Definitions(jobs=[job]))
    result = defs.resolve_job_def("checks_alone").execute_in_process(instance=project.instance, raise_on_error=False)
    assert result.success, failure_text(result)
    assert result.get_asset_materialization_events() == []
    verdicts = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not verdicts["serves_current_code"].passed
    assert verdicts["serves_current_code"].description.startswith("New in prod")
    assert verdicts["assert_positive_order_ids"].passed  # the verdict of the scheduled run's audit


def test_promote_swaps_views_once_complete(project):
    assert project.context().plans.gaps("prod") == []
    result = project.run("promote_prod")
    assert result.success
    assert sorted(project.rows(f"SELECT item_id, num_orders FROM {project.schema}.full_model")) == [
        (1, 5), (2, 1), (3, 1)]
    assert project.run("promote_prod").success  # promoting again: up to date, nothing to do


def test_rematerializing_after_a_killed_run_gives_no_duplicates(project):
    ctx = project.context()
    plan = ctx.plans.plan("prod")
    inc = plan.snapshots[project.name("incremental_model")]
    # a run killed after writing its data but before recording the interval
    SnapshotEvaluator(ctx.project, ctx.engine, plan.snapshots).evaluate(
        inc, to_ms(str(FIRST)), to_ms(str(TODAY)), to_ms(str(TODAY)))
    result = project.run(tags=RANGE, asset_selection=[project.key("incremental_model")])
    assert result.success
    assert project.rows(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {inc.table_name}") == [(7, 7)]


def test_a_full_model_is_rebuilt_once_by_a_range_backfill(project):
    """Its data is its parents' as they are now: materializing it with nothing due of its own still
    rebuilds it (once, over its lifetime), and audits it."""
    result = project.run(tags=RANGE, asset_selection=[project.key("incremental_model"), project.key("full_model")])
    assert result.success
    events = [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]
    (full,) = [m for m in events if m.asset_key == project.key("full_model")]
    assert full.metadata["mesh/outcome"].value == "evaluated"
    assert full.metadata["mesh/interval"].value == f"{LATER} - {TODAY - timedelta(days=1)}"
    (check,) = audit_evaluations(result)
    assert check.passed and check.asset_key == project.key("full_model")


def test_staleness_follows_the_change_category(project):
    """Prod shows what it serves. Non-breaking: the model's new version is not served yet, its
    partitions show the pending change (stale); its child keeps its version, which prod serves:
    re-stamped, not recomputed, fresh. Breaking: both pending. Metadata-only: neither."""
    original = (project.root / "models" / "incremental_model.sql").read_text()
    defs = project.defs()
    assert project.statuses(defs, "incremental_model") == "F" * DAYS
    assert project.statuses(defs, "full_model") == "F"
    cases = {
        "non-breaking": (("  item_id,\n", "  item_id,\n  'z' AS new_column,\n"), "S" * DAYS, "F", {"full_model": 1}),
        "breaking": (("  item_id,\n", "  item_id + 1 AS item_id,\n"), "S" * DAYS, "S", {}),
        "metadata": (("  cron '@daily',", "  cron '@daily',\n  owner jen,"), "F" * DAYS, "F",
                     {"incremental_model": DAYS, "full_model": 1}),
    }
    try:
        for case, (change, incremental, full, stamped) in cases.items():
            (project.root / "models" / "incremental_model.sql").write_text(original)
            edit(project.root, "incremental_model", *change)
            defs = project.defs()
            results = project.restamp()
            assert all(r.success for r in results), case
            assert all(r.dagster_run.tags["mesh/restamp"] == "true" for r in results), case
            assert _restamped(results) == stamped, case
            assert (project.statuses(defs, "incremental_model"), project.statuses(defs, "full_model")) == \
                (incremental, full), case
            assert isinstance(_sensor_tick(project, defs)[0], dg.SkipReason), case  # nothing left
    finally:
        (project.root / "models" / "incremental_model.sql").write_text(original)


def _sensor_tick(project: Project, defs: dg.Definitions, cursor: str | None = None, env: str = "prod"):
    sensor = defs.resolve_sensor_def(f"restamp_{env}_sensor")
    with dg.build_sensor_context(instance=project.instance, definitions=defs, cursor=cursor) as context:
        return stamps_only(sensor(context), project.instance), context.cursor


def _restamped(results: list[dg.ExecuteInProcessResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in (e for r in results for e in r.get_asset_materialization_events()):
        m = event.event_specific_data.materialization
        if m.metadata["mesh/outcome"].value == "restamped":
            counts[m.asset_key.path[-1]] = counts.get(m.asset_key.path[-1], 0) + 1
    return counts


def test_child_kept_through_a_parent_change_stays_fresh_once_the_parent_is_computed(project):
    """Non-breaking change to incremental_model: full_model keeps its data and its version, which
    prod serves. Once the new incremental_model is computed — by a Dagster run or by `mesh` outside
    Dagster — full_model is re-stamped against the new data instead of turning stale; the new
    incremental_model itself is not stamped in prod before prod serves it."""
    path = project.root / "models" / "incremental_model.sql"
    original = path.read_text()
    full = project.name("full_model")
    try:
        # computed by a Dagster run: the sensor then re-stamps the child the run did not select
        edit(project.root, "incremental_model", "  item_id,\n", "  item_id,\n  'y' AS other_column,\n")
        defs = project.defs()
        assert _restamped(project.restamp()) == {"full_model": 1}
        assert (project.statuses(defs, "incremental_model"), project.statuses(defs, "full_model")) == ("S" * DAYS, "F")
        result = project.run(tags=RANGE, asset_selection=[project.key("incremental_model")])
        assert result.success
        assert _restamped([result]) == {}
        # built on the old data (Dagster does not compare a time-window parent with an unpartitioned
        # child): re-stamped against the new one, with the parent version it now stands on
        assert _restamped(project.restamp()) == {"full_model": 1}
        assert (project.statuses(defs, "incremental_model"), project.statuses(defs, "full_model")) == ("F" * DAYS, "F")
        # ...as Dagster alone sees the run, though prod does not serve the new incremental_model: the
        # sensor stamps back what prod serves (runless events, reported as the daemon reports them)
        stamped, _ = _sensor_tick(project, defs)
        assert not stamped.run_requests and {e.asset_key.path[-1] for e in stamped.asset_events} == {"incremental_model"}
        for event in stamped.asset_events:
            project.instance.report_runless_asset_event(event)
        assert project.statuses(defs, "incremental_model") == "S" * DAYS  # the pending change, until promote_prod
        assert _restamped(project.restamp()) == {"full_model": 1}  # against the data prod serves again
        assert isinstance(_sensor_tick(project, defs)[0], dg.SkipReason)  # nothing left behind

        # computed outside Dagster (what `mesh run` does): the new version of the parent is not stamped
        # in prod (prod does not serve it), so the child stays as it is
        path.write_text(original)
        edit(project.root, "incremental_model", "  item_id,\n", "  item_id,\n  'x' AS third_column,\n")
        defs = project.defs()
        assert _restamped(project.restamp()) == {"full_model": 1}
        ctx = project.context()
        try:
            done = list(ctx.runs.materialize([project.name("incremental_model")], str(FIRST), str(TODAY), "prod"))
        finally:
            ctx.close()
        assert [m.outcome.value for m in done] == ["evaluated"]
        assert _restamped(project.restamp()) == {}  # Dagster has no event of the new data: nothing moved
        assert (project.statuses(defs, "incremental_model"), project.statuses(defs, "full_model")) == ("S" * DAYS, "F")
        assert isinstance(_sensor_tick(project, defs)[0], dg.SkipReason)

        # breaking: full_model gets a version of its own, which prod does not serve: stale, nothing stamped
        path.write_text(original)
        edit(project.root, "incremental_model", "  item_id,\n", "  item_id + 10 AS item_id,\n")
        defs = project.defs()
        result = project.run(tags=RANGE, asset_selection=[project.key("incremental_model")])
        assert result.success
        assert _restamped(project.restamp()) == {}
        assert project.statuses(defs, "full_model") == "S"
        plan = project.context().plans.plan("prod", allow_empty=True)
        assert plan.snapshots[full].change_category is not None  # stale because it must be recomputed
    finally:
        path.write_text(original)


def test_sensor_waits_for_runs_writing_to_its_assets(project):
    """Stamping partitions a run is still writing events for would race it: the sensor waits."""
    path = project.root / "models" / "full_model.sql"
    original = path.read_text()
    edit(project.root, "full_model", "  cron '@daily',\n", "  cron '@daily',\n  owner someone_else,\n")
    try:
        defs = project.defs()
        run = project.instance.add_run(dg.DagsterRun(
            job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
            asset_selection=frozenset({project.key("incremental_model")})))
        skipped, _ = _sensor_tick(project, defs)
        assert isinstance(skipped, dg.SkipReason)
        assert skipped.skip_message == (f"Run {run.run_id} is writing to these assets; re-stamping waits for it "
                                        "to finish")
        project.instance.report_run_canceled(run)
        assert isinstance(_sensor_tick(project, defs)[0], dg.SensorResult)  # the metadata change, now
    finally:
        path.write_text(original)


def test_dev_environment_then_prod_promotion_is_a_view_swap(project):
    """The SQLMesh flow through Dagster: compute the change in dev, promote dev, then promote prod
    without recomputing anything."""
    edit(project.root, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
    dev = project.defs("dev")
    skipped, _ = _sensor_tick(project, dev, env="dev")  # nothing of dev to show before it exists
    assert isinstance(skipped, dg.SkipReason) and "Environment 'dev' does not exist yet" in skipped.skip_message
    assert dev.resolve_asset_graph().get(project.key("full_model", "dev")).metadata["mesh/change"] == \
        "Indirect Non-breaking"
    refused = project.run("promote_dev", env="dev")
    assert not refused.success and f"{project.schema}__dev.incremental_model: {FIRST}" in _failure(refused)

    # only the directly changed model is computed; full_model keeps prod's table
    result = project.run(env="dev", tags=RANGE, asset_selection=[project.key("incremental_model", "dev")])
    assert result.success
    assert project.run("promote_dev", env="dev").success
    assert project.rows(f"SELECT DISTINCT new_column FROM {project.schema}__dev.incremental_model") == [("z",)]
    assert all(r.success for r in project.restamp("dev"))
    assert [project.statuses(dev, m, "dev") for m in ("seed_model", "incremental_model", "full_model")] == \
        ["F", "F" * DAYS, "F"]

    ctx = project.context()
    assert ctx.plans.gaps("prod") == []
    assert project.run("promote_prod").success
    assert project.rows(f"SELECT DISTINCT new_column FROM {project.schema}.incremental_model") == [("z",)]
    plan = ctx.plans.plan("prod")
    assert not plan.has_changes


def test_failing_blocking_audit_stops_downstream_and_promotion(tmp_path, spark, engine):
    project = _new_project(tmp_path)
    (project.root / "audits" / "assert_positive_order_ids.sql").write_text(
        "AUDIT (\n  name assert_positive_order_ids,\n);\n\nSELECT *\nFROM @this_model\nWHERE\n  item_id > 2\n")
    (project.root / "models" / "after_full.sql").write_text(
        f"MODEL (name {project.schema}.after_full, kind FULL);\n\nSELECT item_id FROM {project.schema}.full_model\n")
    try:
        alone = project.run(tags=RANGE, asset_selection=[project.key("full_model")])
        assert not alone.success
        inc = project.context().plans.plan("prod", allow_empty=True).snapshots[project.name("incremental_model")]
        assert (
            f"Cannot materialize {project.schema}.full_model: it reads {project.schema}.incremental_model, whose "
            f"current version ({inc.table_name}) has not been built yet. Materialize "
            f"{project.schema}.incremental_model first (or both in one run).") in _failure(alone)

        result = project.run(tags=RANGE)
        assert not result.success
        assert "Audit 'assert_positive_order_ids' failed for " f"{project.schema}.full_model: 1 row(s) returned" \
            in _failure(result)
        (check,) = audit_evaluations(result)  # full_model's, over the table it rebuilt
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        materialized = {e.event_specific_data.materialization.asset_key.path[-1]
                        for e in result.get_asset_materialization_events()}
        assert materialized == {"seed_model", "incremental_model"}  # neither full_model nor after_full

        ctx = project.context()
        full = ctx.plans.plan("prod").snapshots[project.name("full_model")]
        assert ctx.state.intervals.get_intervals([full.interval_key]).get(full.interval_key, []) == []
        refused = project.run("promote_prod")
        assert not refused.success
        message = _failure(refused)
        assert f"{project.schema}.full_model: {LATER}" in message and f"{project.schema}.after_full:" in message
        assert ctx.state.environments.get_environment("prod") is None
    finally:
        _drop(engine, project.schema)


def test_child_is_refused_while_its_parent_misses_part_of_the_range(tmp_path, spark, engine):
    """Rebuilding full_model over days incremental_model's current version lacks would record an
    interval over missing rows that nothing recomputes later: refused, naming the missing days."""
    project = _new_project(tmp_path)
    third = FIRST + timedelta(days=2)
    try:
        assert project.run(partition_key=str(third),
                           asset_selection=[project.key("seed_model"), project.key("incremental_model")]).success
        result = project.run(asset_selection=[project.key("full_model")])
        assert not result.success
        message = _failure(result)
        last = TODAY - timedelta(days=1)
        assert (f"Cannot materialize {project.schema}.full_model for {LATER} - {last}: it reads "
                f"{project.schema}.incremental_model, whose current version has no data for "
                f"{third + timedelta(days=1)} - {last}. Materialize {project.schema}.incremental_model for those "
                "partitions first (or both in one run).") in message
        ctx = project.context()
        full = ctx.plans.plan("prod", allow_empty=True).snapshots[project.name("full_model")]
        assert ctx.state.intervals.get_intervals([full.interval_key]).get(full.interval_key, []) == []
        assert not result.get_asset_materialization_events()

        # once the parent has them all: computed
        assert project.run(tags=RANGE, asset_selection=[project.key("incremental_model")]).success
        assert project.run(asset_selection=[project.key("full_model")]).success
    finally:
        _drop(engine, project.schema)
