"""Scheduling details without Spark: `cron_tz`, `interval_unit`, `allow_partials` and plan
`--min-intervals` / `--no-gaps`, on a real SQLite state store, in chains of models.

Times in these tests are UTC epoch values; a time zone only ever moves when a cron is due.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import record_plan, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.time.cron import IntervalUnit, cron_floor, cron_next, validate_cron_tz
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.core.time.intervals import compute_missing
from mesh_dagster.state.store import StateStore


def ms(text: str) -> int:
    return to_ms(text)


def days(*pairs: tuple[str, str]) -> list[tuple[int, int]]:
    return [(ms(a), ms(b)) for a, b in pairs]


# ---------------------------------------------------------------------------------------------
# Crons in a time zone


def test_cron_fires_at_the_wall_clock_of_its_time_zone_across_daylight_saving():
    la = "America/Los_Angeles"
    # 06:00 in Los Angeles is 14:00 UTC in winter (PST) and 13:00 UTC after 2026-03-08 (PDT).
    assert cron_floor("0 6 * * *", "2026-03-07 23:00:00", la).isoformat() == "2026-03-07T14:00:00+00:00"
    assert cron_floor("0 6 * * *", "2026-03-09 23:00:00", la).isoformat() == "2026-03-09T13:00:00+00:00"
    assert cron_next("0 6 * * *", "2026-03-07 23:00:00", la).isoformat() == "2026-03-08T13:00:00+00:00"
    # `@daily` in Tokyo: midnight there, 15:00 UTC the day before
    assert cron_floor("@daily", "2026-01-10 12:00:00", "Asia/Tokyo").isoformat() == "2026-01-09T15:00:00+00:00"
    # UTC, spelled or not, is the fixed-period fast path
    assert cron_floor("@daily", "2026-01-10 12:00:00", "UTC") == cron_floor("@daily", "2026-01-10 12:00:00")


def test_unknown_time_zone_names_close_ones():
    with pytest.raises(ValueError, match=r"Unknown time zone 'Europe/Pari'; did you mean Europe/Paris"):
        validate_cron_tz("Europe/Pari")
    assert validate_cron_tz(" Europe/Paris ") == "Europe/Paris"


def test_a_time_zone_moves_what_is_due_not_the_intervals():
    common = dict(cron="0 6 * * *", model_start="2026-01-01", present=[], execution_time="2026-01-05 10:00:00")
    utc = compute_missing(**common)
    la = compute_missing(cron_tz="America/Los_Angeles", **common)
    # In UTC the cron fired at 06:00 on the 5th: the 4th is due. In Los Angeles it is 02:00 on the
    # 5th, the cron last fired on the 4th (at 14:00 UTC): only the 3rd is due. Intervals are UTC days.
    assert utc[-1] == (ms("2026-01-04"), ms("2026-01-05"))
    assert la[-1] == (ms("2026-01-03"), ms("2026-01-04"))
    assert all((e - s) == 86_400_000 and s % 86_400_000 == 0 for s, e in la)


# ---------------------------------------------------------------------------------------------
# Projects


INC = """
MODEL (
  name s.inc,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
  start '2020-01-01'{props}
);
SELECT 1 AS id, ds FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds
"""
FILES = {
    "models/src.sql": "MODEL (name s.src, kind VIEW);\nSELECT CAST('2020-01-01' AS DATE) AS ds\n",
    "models/child.sql": """
        MODEL (name s.child, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
        SELECT id, ds FROM s.inc WHERE ds BETWEEN @start_ds AND @end_ds
        """,
}


def project(root: Path, props: str = "", **files: str):
    write_project(root, {**FILES, "models/inc.sql": INC.format(props=props), **files})
    return load_project(root, use_cache=False)


def plan_of(root: Path, state: StateStore, environment: str = "prod", props: str = "", **options) -> Plan:
    return build_plan(project(root, props), state, environment, **options)


def test_interval_unit_written_splits_a_daily_cron_into_hours(tmp_path, state):
    p = plan_of(tmp_path / "p", state, props=",\n  interval_unit hour", execution_time="2020-01-02 05:30:00")
    model = p.snapshots["s.inc"].model
    assert model.interval_unit is IntervalUnit.HOUR and model.declared_unit is IntervalUnit.HOUR
    # due at the daily cron (midnight): the intervals end there, in hours
    assert p.backfills["s.inc"].intervals == days(("2020-01-01", "2020-01-02"))
    assert p.backfills["s.inc"].describe(model.interval_unit) == "[2020-01-01 00:00:00 - 2020-01-01 23:59:59]"


def test_scheduling_properties_are_metadata_only_changes(tmp_path, state):
    root = tmp_path / "p"
    first = plan_of(root, state, execution_time="2020-01-03")
    record_plan(first, state)
    second = plan_of(root, state, props=",\n  cron_tz 'Europe/Paris',\n  allow_partials true",
                     execution_time="2020-01-03")
    assert second.categories == {"s.inc": C.METADATA, "s.child": C.METADATA}
    assert second.snapshots["s.inc"].version == first.snapshots["s.inc"].version  # same table, nothing to rebuild
    assert not second.backfills
    # writing the unit the cron implies anyway changes nothing; another unit is a breaking change
    same = plan_of(root, state, props=",\n  interval_unit day", execution_time="2020-01-03")
    assert same.snapshots["s.inc"].version == first.snapshots["s.inc"].version
    hours = plan_of(root, state, props=",\n  interval_unit hour", execution_time="2020-01-03")
    assert hours.categories == {"s.inc": C.BREAKING, "s.child": C.INDIRECT_BREAKING}
    assert hours.backfills["s.inc"].intervals == days(("2020-01-01", "2020-01-03"))


def test_model_defaults_reach_every_model_and_the_model_wins(tmp_path):
    config = ("model_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron_tz: Asia/Tokyo\n"
              "  interval_unit: hour\n")
    root = write_project(tmp_path / "p", {**FILES, "models/inc.sql": INC.format(props=",\n  cron_tz 'UTC'")}, config)
    models = load_project(root, use_cache=False).models
    assert (models["s.child"].cron_tz, models["s.inc"].cron_tz) == ("Asia/Tokyo", "UTC")
    assert {m.interval_unit for m in models.values()} == {IntervalUnit.HOUR}


def test_bad_model_defaults_are_refused_naming_the_key(tmp_path):
    from mesh_dagster.core.errors import MeshError

    for line, fragment in (("cron_tz: Mars/Base", "Unknown time zone 'Mars/Base'"),
                           ("interval_unit: fortnight", "Invalid interval_unit 'fortnight'")):
        root = write_project(tmp_path / line[:6], FILES, f"model_defaults:\n  {line}\n")
        with pytest.raises(MeshError, match=fragment) as e:
            load_project(root, use_cache=False)
        assert "model_defaults" in str(e.value)
    # a default unit longer than a model's cron is refused at that model's cron line
    root = write_project(tmp_path / "long", {**FILES, "models/inc.sql": INC.format(props=",\n  cron '@hourly'")},
                         "model_defaults:\n  interval_unit: day\n")
    with pytest.raises(MeshError, match=r"models/inc.sql:5:.*Invalid interval_unit 'day' for cron '@hourly'"):
        load_project(root, use_cache=False)


def test_allow_partials_computes_the_incomplete_interval_and_completes_it_later(tmp_path, state):
    root = tmp_path / "p"
    # due at 06:00 every day, over daily intervals: by 10:00 the cron has fired for the day so far
    props = ",\n  cron '0 6 * * *',\n  allow_partials true"
    p = plan_of(root, state, props=props, execution_time="2020-01-03 10:00:00")
    # the partial model takes today up to the cron's last fire time; its child waits for complete days
    assert p.backfills["s.inc"].intervals == [(ms("2020-01-01"), ms("2020-01-03 06:00:00"))]
    assert p.backfills["s.child"].intervals == days(("2020-01-01", "2020-01-03"))
    record_plan(p, state)
    later = build_plan(project(root, props), state, "prod", execution_time="2020-01-04 07:00:00")
    # the partial day is recomputed whole, with the new partial one
    assert later.backfills["s.inc"].intervals == [(ms("2020-01-03"), ms("2020-01-04 06:00:00"))]
    assert later.backfills["s.child"].intervals == days(("2020-01-03", "2020-01-04"))
    # without allow_partials the same cron computes complete days only
    with StateStore(f"sqlite:///{tmp_path / 'empty.db'}") as empty:
        plain = build_plan(project(tmp_path / "q", ",\n  cron '0 6 * * *'"), empty, "prod",
                           execution_time="2020-01-03 10:00:00")
    assert plain.backfills["s.inc"].intervals == days(("2020-01-01", "2020-01-03"))


def test_min_intervals_widens_a_late_start_but_not_past_the_model_start(tmp_path, state):
    root = tmp_path / "p"
    record_plan(plan_of(root, state, execution_time="2020-01-02"), state)
    write_project(root, {"models/inc.sql": INC.format(props="").replace("1 AS id", "2 AS id")})
    project_now = load_project(root, use_cache=False)
    plain = build_plan(project_now, state, "dev", start="2020-01-09", end="2020-01-09", execution_time="2020-01-10")
    wide = build_plan(project_now, state, "dev", start="2020-01-09", end="2020-01-09", execution_time="2020-01-10",
                      min_intervals=3)
    # dev plans stop where prod stops (2020-01-02): the plan's own start left nothing to compute
    assert "s.inc" not in plain.backfills
    assert wide.backfills["s.inc"].intervals == days(("2020-01-01", "2020-01-02"))  # 3 back, clipped to the start
    with pytest.raises(PlanError, match="--min-intervals must be 0 or more, got -1"):
        build_plan(project_now, state, "dev", min_intervals=-1)


def test_no_gaps_refuses_a_plan_that_leaves_the_new_version_shorter(tmp_path, state):
    root = tmp_path / "p"
    record_plan(plan_of(root, state, execution_time="2020-01-05"), state)
    # a breaking parent change plus a non-breaking child change, planned for dev over one day only
    write_project(root, {"models/inc.sql": INC.format(props="").replace("1 AS id", "2 AS id"),
                         "models/child.sql": FILES["models/child.sql"].replace("SELECT id, ds", "SELECT id, ds, 1 AS x")})
    changed = load_project(root, use_cache=False)
    before = (state.environments.get_environment("dev"), len(state.environments.get_environments()))
    with pytest.raises(PlanError) as e:
        build_plan(changed, state, "dev", start="2020-01-04", end="2020-01-04", execution_time="2020-01-05",
                   no_gaps=True)
    message = str(e.value)
    assert "--no-gaps" in message
    assert "s.inc: 2020-01-01 - 2020-01-03" in message and "s.child: 2020-01-01 - 2020-01-03" in message
    assert (state.environments.get_environment("dev"), len(state.environments.get_environments())) == before  # nothing written
    # the whole history: no gap, the plan is made
    whole = build_plan(changed, state, "dev", execution_time="2020-01-05", no_gaps=True)
    assert whole.backfills["s.inc"].intervals == days(("2020-01-01", "2020-01-05"))


def test_plan_cli_flags_are_checked(tmp_path):
    root = write_project(tmp_path / "p", {**FILES, "models/inc.sql": INC.format(props="")})
    runner = CliRunner()
    bad = runner.invoke(cli, ["--paths", str(root), "plan", "--min-intervals", "-1", "--no-prompts"])
    assert bad.exit_code != 0 and "--min-intervals" in bad.output
    mixed = runner.invoke(cli, ["--paths", str(root), "plan", "--restate-model", "s.inc", "--no-gaps",
                                "--min-intervals", "2", "--no-prompts"])
    assert mixed.exit_code != 0
    assert "--restate-model cannot be combined with --min-intervals, --no-gaps" in mixed.output
    assert not (root / ".mesh" / "state.db").exists() or "dev" not in mixed.output


def test_run_waits_for_the_cron_in_its_time_zone_unless_told_to_ignore_it(tmp_path):
    from mesh_dagster.context import Context
    from tests.execution.fake_engine import FakeEngine

    root = write_project(tmp_path / "p", {**FILES, "models/inc.sql": INC.format(
        props=",\n  cron '0 6 * * *',\n  cron_tz 'Europe/Paris'")})
    ctx = Context(root, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02 06:00:00"))  # 07:00 in Paris: the 1st is done

    def inc_intervals() -> list[tuple[int, int]]:
        key = ctx.plans.local_snapshots()["s.inc"].interval_key
        return ctx.state.intervals.get_intervals([key])[key]

    assert inc_intervals() == days(("2020-01-01", "2020-01-02"))
    # 04:30 UTC on the 3rd is 05:30 in Paris: the cron has not fired, the 2nd is not due
    assert ctx.runs.run(execution_time="2020-01-03 04:30:00", select=["s.inc"]) == 0
    assert ctx.runs.run(execution_time="2020-01-03 04:30:00", select=["s.inc"], ignore_cron=True) == 1
    assert inc_intervals() == days(("2020-01-01", "2020-01-03"))
