"""Promotions of one environment are serialised: through Dagster, a `promote_<env>` run waits for
the environment lock every apply takes, two promotions launched together move the environment
once, and the op sits in the pool `mesh_promote_<env>` that a Dagster instance can limit.

The runs are started with `execute_in_process` in background threads, so the test can look at the
state store (and hold the lock itself) while they are in flight. One materialized copy of the
example project is shared by the module; the tests run in file order on it.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.config import PoolGranularity
from project_copies import edit
from test_dagster_materialize import RANGE, Project, _drop, _new_project

from mesh_dagster.dagster.ui.workspace import INSTANCE_CONFIG
from mesh_dagster.execution.locking import environment_lock, lock_owner

pytestmark = pytest.mark.spark

LOCK = "environment:prod"
POOL = "mesh_promote_prod"
BLOCKED_S = 5.0  # a promotion of this project takes ~1-2 s when nothing holds it back
RUN_TIMEOUT_S = 180.0


class Launch:
    """One Dagster run of `job` in a background thread: the caller can watch it while it waits."""

    def __init__(self, defs: dg.Definitions, job: str, instance: dg.DagsterInstance):
        self.run_id = str(uuid.uuid4())
        self.instance = instance
        self.result: dg.ExecuteInProcessResult | None = None
        self.error: BaseException | None = None
        job_def = defs.resolve_job_def(job)
        self._thread = threading.Thread(target=self._execute, args=(job_def,), daemon=True, name=f"run-{job}")

    def _execute(self, job_def: dg.JobDefinition) -> None:
        try:
            self.result = job_def.execute_in_process(instance=self.instance, run_id=self.run_id,
                                                     raise_on_error=False)
        except BaseException as e:  # noqa: BLE001 - reported by outcome() in the test's thread
            self.error = e

    def start(self) -> Launch:
        self._thread.start()
        return self

    def finished_within(self, seconds: float) -> bool:
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def outcome(self) -> dg.ExecuteInProcessResult:
        assert self.finished_within(RUN_TIMEOUT_S), f"run {self.run_id} still running after {RUN_TIMEOUT_S}s"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def wait_for_step_start(self) -> None:
        """Block until the promote op's body runs, so what follows happens inside the op."""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not self.instance.all_logs(self.run_id, of_type=dg.DagsterEventType.STEP_START):
            assert self._thread.is_alive(), f"run {self.run_id} ended before its step started: {self.error}"
            assert time.monotonic() < deadline, f"run {self.run_id} never started its step"
            time.sleep(0.1)

    def log_lines(self) -> list[str]:
        """The op's `context.log` lines (what DagsterLogListener and the op wrote)."""
        return [r.user_message for r in self.instance.all_logs(self.run_id) if r.dagster_event is None]


def _failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """Each failed step's one line (its cause: mesh.JobFailed, no stack trace)."""
    return [e.step_failure_data.error.cause.message for e in result.all_events if e.event_type_value == "STEP_FAILURE"]


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark) -> Project:
    """The example project with every partition materialized (and recorded), prod not promoted."""
    from mesh_dagster.engine.adapter import SparkEngine

    p = _new_project(tmp_path_factory.mktemp("promote_serialised"))
    try:
        assert p.run(tags=RANGE).success
        yield p
    finally:
        _drop(SparkEngine(spark), p.schema)


def test_promotion_waits_while_another_holder_has_the_environment_lock(project, engine):
    ctx = project.context()
    try:
        assert ctx.plans.gaps("prod") == [] and ctx.state.environments.get_environment("prod") is None  # promotable, not promoted
        holder = lock_owner("test holding prod")
        with environment_lock(ctx.state, "prod", holder):
            launch = Launch(project.defs(), "promote_prod", project.instance).start()
            launch.wait_for_step_start()
            assert not launch.finished_within(BLOCKED_S), _failures(launch.outcome())
            # the run is parked on the lock: nothing moved, the lock is still ours
            assert ctx.state.environments.get_environment("prod") is None
            assert ctx.state.locks.lock_holder(LOCK).owner == holder
            assert not engine.catalog.table_exists(f"{project.schema}.full_model")
            released_ms = _now_ms()

        result = launch.outcome()
        assert result.success, _failures(result)
        env = ctx.state.environments.get_environment("prod")
        assert env is not None and env.previous_plan_id is None
        assert env.finalized_ts >= released_ms  # finished only after the lock was given back
        assert ctx.state.locks.lock_holder(LOCK) is None
        assert project.rows(f"SELECT COUNT(*) FROM {project.schema}.full_model") == [(3,)]
    finally:
        ctx.close()


def test_two_promotions_launched_together_move_the_environment_once(project):
    """Both runs pass the gap check and wait on the lock (held by the test until both are inside
    the op), so they really overlap; the one that goes second must find nothing left to do."""
    edit(project.root, "full_model", "  cron '@daily',\n", "  cron '@daily',\n  owner promote_race,\n")
    ctx = project.context()
    try:
        before = ctx.state.environments.get_environment("prod")
        assert before is not None
        assert ctx.plans.plan("prod").metadata_updated and ctx.plans.gaps("prod") == []  # a view swap, nothing to compute

        with environment_lock(ctx.state, "prod", lock_owner("test starting both promotions")):
            launches = [Launch(project.defs(), "promote_prod", project.instance).start() for _ in range(2)]
            for launch in launches:
                launch.wait_for_step_start()
            time.sleep(2)  # both ops are past their plan and waiting on the lock
        results = [launch.outcome() for launch in launches]

        assert [_failures(r) for r in results] == [[], []]
        assert all(r.success for r in results)
        logs = [launch.log_lines() for launch in launches]
        moved = [i for i, lines in enumerate(logs)
                 if any("now points at the current versions (1 changed model(s): " in m for m in lines)]
        idle = [i for i, lines in enumerate(logs)
                if "Environment 'prod' is up to date: nothing to promote" in lines]
        assert len(moved) == 1 and len(idle) == 1 and moved != idle, logs

        after = ctx.state.environments.get_environment("prod")
        assert after.plan_id != before.plan_id
        assert after.previous_plan_id == before.plan_id  # replaced once, from the record both started with
        assert {s.name for s in after.snapshots} == {s.name for s in before.snapshots}
        assert not ctx.plans.plan("prod").has_changes
        assert ctx.state.locks.lock_holder(LOCK) is None
    finally:
        ctx.close()


def _pool_limited_instance(home: Path) -> dg.DagsterInstance:
    """The instance `mesh ui` writes: pools hold one op at a time, enforced by the run itself (op granularity)."""
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_CONFIG)
    return dg.DagsterInstance.from_config(str(home))


def test_promote_op_is_in_the_environment_pool_which_an_instance_can_limit_to_one(project, tmp_path):
    defs = project.defs()
    (node,) = defs.resolve_job_def("promote_prod").graph.nodes
    assert (node.name, node.definition.pool) == ("promote_prod_views", POOL)

    instance = _pool_limited_instance(tmp_path / "dagster_home")
    storage = instance.event_log_storage
    config = storage.get_pool_config()
    assert (config.default_pool_limit, config.pool_granularity) == (1, PoolGranularity.OP)
    assert storage.get_concurrency_info(POOL).limit == 1

    # another run holds the pool's only slot: the promote run waits for it
    storage.initialize_concurrency_limit_to_default(POOL)
    assert storage.claim_concurrency_slot(POOL, "other-run", "promote_prod_views").is_claimed
    launch = Launch(defs, "promote_prod", instance).start()
    try:
        deadline = time.monotonic() + 30
        while launch.run_id not in storage.get_concurrency_info(POOL).pending_run_ids:
            assert time.monotonic() < deadline, "the promote step never asked for a slot"
            time.sleep(0.1)
        assert not launch.finished_within(3)
        assert not instance.all_logs(launch.run_id, of_type=dg.DagsterEventType.STEP_START)
    finally:
        storage.free_concurrency_slots_for_run("other-run")
    result = launch.outcome()
    assert result.success, _failures(result)
    assert [(p.name, p.limit, p.from_default) for p in storage.get_pool_limits()] == [(POOL, 1, True)]
    assert storage.get_concurrency_info(POOL).claimed_slots == []
