"""A child never computes over an interval its parent still owes, when that parent is not part of
the backfill (issue 34, point 5): a development plan backfills only its changed models, and reads
prod's tables for the others, which prod's `mesh run` fills. A day due but not yet run in prod is
not data the new child may be recorded complete over. On the in-memory engine; the race with a
real `mesh run` process is tests/races/test_run_beside_plan.py.
"""

from __future__ import annotations

from pathlib import Path

from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.time.dates import to_ds
from mesh_dagster.execution.events import LogLines
from tests.execution.fake_engine import FakeEngine

MODELS = {
    "models/a.sql": """
        MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": """
        MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT id, ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
        """,
}
ADDED = {  # dev's change: a new model over the unchanged s.a, and a FULL one over it
    "models/n.sql": """
        MODEL (name s.n, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT id, ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
        """,
    "models/f.sql": """
        MODEL (name s.f, kind FULL);

        SELECT COUNT(*) AS days FROM s.n
        """,
}


def recorded(ctx: Context, environment: str) -> dict[str, list[tuple[str, str]]]:
    env = ctx.state.environments.get_environment(environment)
    assert env is not None
    keys = [(s.name, s.version) for s in env.snapshots]
    found = ctx.state.intervals.get_intervals(keys)
    return {name: [(to_ds(s), to_ds(e)) for s, e in found.get((name, version), [])] for name, version in keys}


def test_a_dev_plan_leaves_the_day_prod_has_not_run_to_a_later_run(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", MODELS)
    engine = FakeEngine()
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    write_project(root, ADDED)
    ctx = Context(root, engine=engine)
    log = LogLines()
    # 2020-01-03 is due for s.a, but prod's run has not written it yet
    ctx.reviews.apply(ctx.plans.plan("dev", execution_time="2020-01-04"), listener=log)

    dev = recorded(ctx, "dev")
    assert dev["s.a"] == [("2020-01-01", "2020-01-03")]
    assert dev["s.n"] == [("2020-01-01", "2020-01-03")]  # not through 2020-01-03: s.a owes it
    assert dev["s.f"] == [("2020-01-01", "2020-01-03")]  # rebuilt as of what s.n holds
    assert "s__dev.n: waiting for upstream s.a (2020-01-03 - 2020-01-03)" in log.lines

    ctx.runs.run("prod", execution_time="2020-01-04")  # prod writes its due day
    assert recorded(ctx, "prod")["s.a"] == [("2020-01-01", "2020-01-04")]
    ctx.runs.run("dev", execution_time="2020-01-04")  # and dev's next run what waited for it
    dev = recorded(ctx, "dev")
    assert dev["s.n"] == dev["s.f"] == [("2020-01-01", "2020-01-04")]


def test_a_run_of_a_selected_model_without_its_upstream_waits_for_what_the_parent_owes(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", MODELS)
    ctx = Context(root, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    log = LogLines()
    ctx.runs.run("prod", execution_time="2020-01-04", select=["s.b"], auto_upstream=False, listener=log)
    assert recorded(ctx, "prod") == {"s.a": [("2020-01-01", "2020-01-03")], "s.b": [("2020-01-01", "2020-01-03")]}
    assert "s.b: waiting for upstream s.a (2020-01-03 - 2020-01-03)" in log.lines
    ctx.runs.run("prod", execution_time="2020-01-04")
    assert recorded(ctx, "prod") == {"s.a": [("2020-01-01", "2020-01-04")], "s.b": [("2020-01-01", "2020-01-04")]}
