"""A physical table dropped by hand while its history is recorded, on the in-memory engine (issue 34,
"clear errors"): `mesh run` and Dagster materializations refuse to write it (one line naming the
model, the table and the restatement that rebuilds it; nothing written, nothing forgotten), the plan
lists it, and an apply forgets that history and backfills it. On main, run and plan said all was up
to date, and a run wrote the next days into a table created empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context, Outcome
from mesh_dagster.core.time.dates import to_ds
from mesh_dagster.execution.events import LogLines
from mesh_dagster.execution.intervals.physical_check import MissingTableError
from tests.execution.fake_engine import FakeEngine
from tests.execution.test_signal_runs import inserted

MODELS = {
    "models/a.sql": """
        MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": """
        MODEL (name s.b, kind FULL);

        SELECT id, ds FROM s.a
        """,
}
HISTORY = [("2020-01-01", "2020-01-04")]


def history(ctx: Context) -> list[tuple[str, str]]:
    """The intervals recorded of s.a's version in prod, as dates."""
    key = ("s.a", ctx.state.environments.get_environment("prod").snapshot_by_name()["s.a"].version)
    return [(to_ds(start), to_ds(end)) for start, end in ctx.state.intervals.get_intervals([key]).get(key, [])]


@pytest.fixture
def dropped(tmp_path: Path) -> tuple[Context, FakeEngine, str]:
    """Prod with three days of s.a, whose physical table was then dropped outside mesh."""
    root = write_project(tmp_path / "p", MODELS)
    engine = FakeEngine()
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-04"))
    table = ctx.state.environments.get_environment("prod").snapshot_by_name()["s.a"].table_name
    assert table is not None
    del engine.tables[table]
    engine.calls.clear()
    return ctx, engine, table


def refusal(view: str, table: str) -> str:
    return (f"Cannot write {view}: its physical table {table} is missing (dropped outside mesh?) while the state "
            "store records 3 intervals (2020-01-01 - 2020-01-03) of it. Nothing was written: rebuild it with "
            f"`mesh plan prod --restate-model {view}` (or restore the table)")


def test_run_refuses_to_write_a_table_gone_with_its_history(dropped) -> None:
    ctx, engine, table = dropped
    with pytest.raises(MissingTableError) as refused:
        ctx.runs.run("prod", execution_time="2020-01-06")
    assert str(refused.value) == refusal("s.a", table)
    assert engine.calls == [] and table not in engine.tables  # nothing created, nothing written
    assert history(ctx) == HISTORY


def test_a_materialization_of_it_fails_and_its_children_are_blocked(dropped) -> None:
    ctx, engine, table = dropped
    a, b = ctx.runs.materialize(["s.a", "s.b"], "2020-01-04", "2020-01-05", execution_time="2020-01-06")
    assert (a.outcome, str(a.error)) == (Outcome.FAILED, refusal("s.a", table))
    assert (b.outcome, b.blocked_by) == (Outcome.BLOCKED, "s.a")
    assert not [c for c in engine.calls if c.name == table] and table not in engine.tables
    assert history(ctx) == HISTORY


def test_the_plan_lists_it_and_its_apply_rebuilds_the_history(dropped) -> None:
    ctx, engine, table = dropped
    plan = ctx.plans.plan("prod", execution_time="2020-01-04")
    assert not plan.needs_apply  # the state store alone says all is up to date
    [missing] = ctx.missing_tables(plan)
    said = f"The physical table {table} of s.a is missing: 3 intervals (2020-01-01 - 2020-01-03) will be rebuilt"
    assert missing.rebuilt("s.a") == said

    log = LogLines()
    ctx.reviews.apply(plan, log)
    assert said in log.lines
    assert table in engine.tables and inserted(engine) == [(table, "CAST('2020-01-01' AS DATE)")]  # one batch
    assert history(ctx) == HISTORY
    assert ctx.missing_tables(ctx.plans.plan("prod", execution_time="2020-01-04")) == []


def test_the_restatement_the_refusal_names_rebuilds_it(dropped) -> None:
    ctx, engine, table = dropped
    ctx.reviews.apply(ctx.plans.restate("prod", ["s.a"], execution_time="2020-01-04"))
    assert table in engine.tables and inserted(engine) == [(table, "CAST('2020-01-01' AS DATE)")]
    assert history(ctx) == HISTORY
    assert ctx.runs.run("prod", execution_time="2020-01-06") > 0  # the next days are written again
    assert history(ctx) == [("2020-01-01", "2020-01-06")]
