"""Dagster's declarative automation runs prod as `mesh run` does: each model's automation condition
requests a due interval once its parents have recorded it and its signals pass, once; its
freshness policy comes from its cron. Evaluated in process (`evaluate_automation_conditions`) on
the example project moved to the last days, prod recorded in the state store only (no Spark):
the tests record intervals themselves, as the requested runs would."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import dagster as dg
import pytest
from project_builder import record_plan
from project_copies import TODAY, recent_example

from mesh_dagster.context import Context
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.dagster import MeshTranslator, definitions

DAYS = 7
TOMORROW = datetime.combine(TODAY + timedelta(days=1), time(), tzinfo=UTC)  # the tick making today due
SIGNAL = '''from pathlib import Path

from mesh_dagster import signal


@signal()
def landed(batch, flag: str):
    return Path(flag).exists()
'''


def _key(model: str) -> dg.AssetKey:
    return dg.AssetKey(["sqlmesh_example", model])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The example, its incremental model waiting for the signal `landed` (a flag file), with prod
    holding every interval due until today."""
    root = recent_example(tmp_path / "project", DAYS)
    (root / "signals").mkdir()
    (root / "signals" / "__init__.py").write_text(SIGNAL)
    model = root / "models" / "incremental_model.sql"
    model.write_text(model.read_text().replace(
        "  cron '@daily',", f"  cron '@daily',\n  signals (landed(flag := '{tmp_path / 'landed'}')),"))
    (tmp_path / "landed").touch()
    ctx = Context(root)
    try:
        record_plan(ctx.plans.plan("prod"), ctx.state)
    finally:
        ctx.close()
    return root


class Ticks:
    """The automation sensor's evaluations, one after another, on one instance and cursor."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance):
        self.defs, self.instance, self.cursor = defs, instance, None

    def at(self, when: datetime) -> dict[str, list[str]]:
        """What the evaluation at `when` requests: model -> partition keys ([""] for a model without)."""
        result = dg.evaluate_automation_conditions(self.defs, self.instance, evaluation_time=when, cursor=self.cursor)
        self.cursor = result.cursor
        requested = {model: sorted(k or "" for k in result.get_requested_partitions(_key(model)))
                     for model in ("seed_model", "incremental_model", "full_model")}
        return {model: keys for model, keys in requested.items() if keys}


def _instance(tmp_path: Path):
    (tmp_path / "home").mkdir()
    return dg.instance_for_test(temp_dir=str(tmp_path / "home"))


def _record(root: Path, model: str, day: date) -> None:
    """Record `model`'s interval of `day` in prod, as its requested run would."""
    ctx = Context(root)
    try:
        snap = ctx.plans.plan("prod", allow_empty=True).snapshots[f"sqlmesh_example.{model}"]
        start = to_ms(datetime.combine(day, time(), tzinfo=UTC))
        ctx.state.intervals.add_intervals([(snap.name, snap.version, start, start + 86_400_000)])
    finally:
        ctx.close()


def test_a_due_interval_runs_once_its_parents_have_it_and_its_signal_passes(project, tmp_path):
    defs = definitions(project)
    sensor = defs.resolve_sensor_def("automation_prod_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED  # like the schedules: started by a person
    with _instance(tmp_path) as instance:
        ticks = Ticks(defs, instance)
        assert ticks.at(TOMORROW - timedelta(hours=1)) == {}  # today is not over: nothing due
        (tmp_path / "landed").unlink()
        assert ticks.at(TOMORROW + timedelta(seconds=30)) == {}  # today is due, but its signal holds it back
        (tmp_path / "landed").touch()
        # the signal passes: the incremental model's today; not the FULL model, whose parent lacks today
        assert ticks.at(TOMORROW + timedelta(minutes=1)) == {"incremental_model": [str(TODAY)]}
        assert ticks.at(TOMORROW + timedelta(minutes=2)) == {}  # requested once, not again (run or no run)
        _record(project, "incremental_model", TODAY)  # its run recorded today
        assert ticks.at(TOMORROW + timedelta(minutes=3)) == {"full_model": [""]}  # its parent has today now
        assert ticks.at(TOMORROW + timedelta(minutes=4)) == {}


def test_a_failed_interval_is_asked_again_at_the_next_tick_with_what_is_then_due(project, tmp_path):
    defs = definitions(project)
    with _instance(tmp_path) as instance:
        ticks = Ticks(defs, instance)
        assert ticks.at(TOMORROW + timedelta(minutes=1)) == {"incremental_model": [str(TODAY)]}
        assert ticks.at(TOMORROW + timedelta(hours=12)) == {}  # its run failed: not again before the next tick
        assert ticks.at(TOMORROW + timedelta(days=1, minutes=1)) == {
            "incremental_model": [str(TODAY), str(TODAY + timedelta(days=1))]}


def test_freshness_comes_from_the_cron_and_a_translator_can_replace_both(project):
    specs = {s.key.path[-1]: s for a in definitions(project).assets for s in a.specs}
    policy = specs["incremental_model"].freshness_policy
    assert isinstance(policy, dg.FreshnessPolicy)
    assert (policy.deadline_cron, policy.lower_bound_delta, policy.timezone) == ("0 0 * * *", timedelta(days=1), "UTC")
    assert specs["full_model"].freshness_policy == policy
    assert specs["seed_model"].freshness_policy is None  # built once, not on its cron
    assert specs["seed_model"].automation_condition is not None  # built by the automation when missing

    class Mine(MeshTranslator):
        def get_automation_condition(self, asset):
            return dg.AutomationCondition.on_cron("0 6 * * *")

        def get_freshness_policy(self, asset):
            return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30))

    defs = definitions(project, translator=Mine())
    specs = {s.key.path[-1]: s for a in defs.assets for s in a.specs}
    assert specs["full_model"].automation_condition.get_label() == "on_cron(0 6 * * *, UTC)"
    assert specs["full_model"].freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30))
    assert {s.name for s in defs.sensors} >= {"automation_prod_sensor"}  # Dagster's conditions run there too


def test_other_crons_get_a_window_of_their_longest_period_and_dev_gets_neither(project):
    model = project / "models" / "full_model.sql"
    model.write_text(model.read_text().replace("cron '@daily',", "cron '0 6 * * 1-5',"))
    defs = definitions(project, ["prod", "dev"], automation_running=True)
    specs = {s.key.to_user_string(): s for a in defs.assets for s in a.specs}
    # weekdays only: a weekend's three days between ticks, twice
    assert specs["sqlmesh_example/full_model"].freshness_policy == dg.FreshnessPolicy.time_window(
        fail_window=timedelta(days=6))
    dev = specs["sqlmesh_example__dev/full_model"]
    assert dev.automation_condition is None and dev.freshness_policy is None  # its plans fill it
    sensors = {s.name: s.default_status for s in defs.sensors}
    assert sensors["automation_prod_sensor"] == dg.DefaultSensorStatus.RUNNING
    assert "automation_dev_sensor" not in sensors
