"""Signals in `mesh run`, plan apply, Dagster ticks and materializations, on the in-memory engine:
what waits is skipped (and said), what is ready is computed and recorded, a later run fills the
rest once the signal passes, and a signal that raises leaves everything as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.project.signals import SignalError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.events import LogLines
from mesh_dagster.execution.intervals.readiness import NotReadyError, SignalsPendingError
from tests.execution.fake_engine import FakeEngine

# `landed_through` reads the last landed day from a file of the project, as a real signal would
# look at a bucket or a control table.
SIGNALS = '''
from datetime import UTC, datetime
from pathlib import Path

from mesh_dagster import signal


@signal()
def landed_through(batch, marker: str):
    text = (Path(__file__).parents[1] / marker).read_text().strip()
    landed = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return [(start, end) for start, end in batch if end <= landed]
'''

MODELS = {
    "models/a.sql": """
        MODEL (
          name s.a,
          kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
          signals (landed_through(marker := 'landed.txt'))
        );

        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": """
        MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT id, ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
        """,
    "models/c.sql": """
        MODEL (name s.c, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT 2 AS id, CAST(@start_ds AS DATE) AS ds
        """,
}



def landed(root: Path, day: str) -> None:
    (root / "landed.txt").write_text(day)


def setup(tmp_path: Path, day: str) -> tuple[Path, Context, FakeEngine]:
    root = write_project(tmp_path / "p", {"signals/__init__.py": SIGNALS, **MODELS})
    landed(root, day)
    engine = FakeEngine()
    return root, Context(root, engine=engine), engine


def intervals(ctx: Context, environment: str = "prod") -> dict[str, list[tuple[str, str]]]:
    """Each model's recorded intervals as dates, for the environment's snapshots."""
    from mesh_dagster.core.time.dates import to_ds

    env = ctx.state.environments.get_environment(environment)
    assert env is not None
    keys = [(s.name, s.version) for s in env.snapshots]
    found = ctx.state.intervals.get_intervals(keys)
    return {name: [(to_ds(s), to_ds(e)) for s, e in found.get((name, version), [])] for name, version in keys}


def inserted(engine: FakeEngine) -> list[tuple[str, str]]:
    """(table, low bound) of each interval written."""
    return [(c.name, c.args["low"]) for c in engine.calls if c.method == "insert_overwrite_interval"]


def test_run_skips_what_waits_records_what_is_ready_and_a_later_run_fills_the_rest(tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "2020-01-03")
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    assert intervals(ctx) == {n: [("2020-01-01", "2020-01-03")] for n in ("s.a", "s.b", "s.c")}

    landed(root, "2020-01-04")
    log = LogLines()
    assert ctx.runs.run("prod", execution_time="2020-01-06", listener=log) > 0
    assert intervals(ctx) == {"s.a": [("2020-01-01", "2020-01-04")], "s.b": [("2020-01-01", "2020-01-04")],
                              "s.c": [("2020-01-01", "2020-01-06")]}
    assert "s.a: waiting for signal landed_through(marker := 'landed.txt') (2020-01-04 - 2020-01-05)" in log.lines
    assert "s.b: waiting for upstream s.a (2020-01-04 - 2020-01-05)" in log.lines

    log = LogLines()
    assert ctx.runs.run("prod", execution_time="2020-01-06", listener=log) == 0  # still not landed
    assert log.lines[-1] == "Nothing to run: every due interval waits (for a signal, or for upstream data)"

    landed(root, "2020-01-06")
    engine.calls.clear()
    assert ctx.runs.run("prod", execution_time="2020-01-06") > 0
    assert intervals(ctx) == {n: [("2020-01-01", "2020-01-06")] for n in ("s.a", "s.b", "s.c")}
    assert {low for _, low in inserted(engine)} == {"CAST('2020-01-04' AS DATE)"}  # one batch per model: the two days
    assert ctx.runs.run("prod", execution_time="2020-01-06") == 0


def test_a_raising_signal_stops_the_run_with_nothing_written(tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "2020-01-03")
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    before = intervals(ctx)
    landed(root, "not a date")
    engine.calls.clear()
    with pytest.raises(SignalError) as e:
        ctx.runs.run("prod", execution_time="2020-01-06")
    line = SIGNALS.lstrip().splitlines().index("    landed = datetime.fromisoformat(text).replace(tzinfo=UTC)") + 1
    assert str(e.value) == (f"signals/__init__.py:{line}: Signal landed_through(marker := 'landed.txt') of model s.a "
                            "failed: ValueError: Invalid isoformat string: 'not a date'")
    assert intervals(ctx) == before
    assert engine.calls == []


def test_a_plan_moves_the_environment_over_new_intervals_that_wait_and_a_run_fills_them(tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "2020-01-02")
    log = LogLines()
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"), listener=log)
    # like intervals whose cron has not fired: prod is created with what is ready
    assert intervals(ctx) == {"s.a": [("2020-01-01", "2020-01-02")], "s.b": [("2020-01-01", "2020-01-02")],
                              "s.c": [("2020-01-01", "2020-01-04")]}
    assert "s.a: waiting for signal landed_through(marker := 'landed.txt') (2020-01-02 - 2020-01-03)" in log.lines
    landed(root, "2020-01-04")
    assert ctx.runs.run("prod", execution_time="2020-01-04") > 0
    assert intervals(ctx) == {n: [("2020-01-01", "2020-01-04")] for n in ("s.a", "s.b", "s.c")}


def test_a_plan_that_would_hide_data_the_environment_shows_records_the_ready_part_and_changes_nothing(
        tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "2020-01-04")
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"))
    before = ctx.state.environments.get_environment("prod")
    # a breaking change of s.a (and so of s.b) while only the 1st has landed again
    landed(root, "2020-01-02")
    path = root / "models" / "a.sql"
    path.write_text(path.read_text().replace("SELECT 1 AS id", "SELECT 3 AS id"))
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan("prod", execution_time="2020-01-04")
    engine.calls.clear()
    with pytest.raises(SignalsPendingError) as e:
        ctx.reviews.apply(plan)
    assert str(e.value).startswith(
        "Plan not applied: 2 model(s) wait (for signals, or for upstream data) on intervals 'prod' shows today (or "
        "have no data yet), so 'prod' was not changed (its views and record are as before).\n"
        "  s.a: waiting for signal landed_through(marker := 'landed.txt') (2020-01-02 - 2020-01-03)\n"
        "  s.b: waiting for upstream s.a (2020-01-02 - 2020-01-03)\n"
        "The intervals that were ready are computed and recorded. Run `mesh plan prod` again once the signals pass "
        "and the upstream intervals are recorded")
    assert ctx.state.environments.get_environment("prod") == before
    assert not any(c.method == "create_view" for c in engine.calls)
    versions = {s.name: s.version for s in plan.snapshots.values()}
    recorded = ctx.state.intervals.get_intervals(list(versions.items()))
    assert recorded[("s.a", versions["s.a"])] == [(to_ms("2020-01-01"), to_ms("2020-01-02"))]

    landed(root, "2020-01-04")
    engine.calls.clear()
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"))
    assert intervals(ctx) == {n: [("2020-01-01", "2020-01-04")] for n in ("s.a", "s.b", "s.c")}
    assert sorted(inserted(engine)) == [(plan.snapshots["s.a"].table_name, "CAST('2020-01-02' AS DATE)"),
                                        (plan.snapshots["s.b"].table_name, "CAST('2020-01-02' AS DATE)")]


def test_a_raising_signal_stops_a_plan_before_anything_is_written(tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "soon")
    with pytest.raises(SignalError, match="Signal landed_through"):
        ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"))
    assert engine.calls == []
    assert ctx.state.snapshots.all_snapshot_ids() == set()


def test_dagster_ticks_request_only_ready_intervals_and_materializing_a_waiting_one_is_refused(
        tmp_path: Path) -> None:
    root, ctx, engine = setup(tmp_path, "2020-01-02")
    log = LogLines()
    pending = ctx.runs.pending_intervals("prod", execution_time="2020-01-04", listener=log)
    assert "s.a: waiting for signal landed_through(marker := 'landed.txt') (2020-01-02 - 2020-01-03)" in log.lines
    day = 86_400_000
    assert pending == {"s.a": [(to_ms("2020-01-01"), to_ms("2020-01-01") + day)],
                       "s.b": [(to_ms("2020-01-01"), to_ms("2020-01-01") + day)],
                       "s.c": [(to_ms("2020-01-01"), to_ms("2020-01-04"))]}
    with pytest.raises(NotReadyError) as e:
        list(ctx.runs.materialize(["s.c", "s.a"], "2020-01-01", "2020-01-03", "prod", execution_time="2020-01-04"))
    assert str(e.value) == ("Cannot materialize s.a for 2020-01-01 - 2020-01-02: signal landed_through(marker := "
                            "'landed.txt') says 2020-01-02 - 2020-01-02 is not ready. Nothing was written; materialize "
                            "it once the signal passes.")
    assert engine.calls == []
    assert ctx.state.snapshots.all_snapshot_ids() == set()
    done = list(ctx.runs.materialize(["s.a"], "2020-01-01", "2020-01-02", "prod", execution_time="2020-01-04"))
    assert [m.recorded for m in done] == [[(to_ms("2020-01-01"), to_ms("2020-01-02"))]]
