"""Restatement on Spark: one day of an upstream model recomputes exactly that day downstream, a
full model below is rebuilt, prod restatements forget the same day of development versions, and
the refusals and skips say why."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import PlanError

WHEN = "2020-01-04"
UP = """MODEL (name {s}.up, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
SELECT id, v, ds FROM {s}_raw.events WHERE ds BETWEEN @start_ds AND @end_ds
"""
DOWN = """MODEL (name {s}.down, kind INCREMENTAL_BY_TIME_RANGE (time_column ds{props}), start '2020-01-01');
SELECT id, v * {factor} AS v2, ds FROM {s}.up WHERE ds BETWEEN @start_ds AND @end_ds
"""
TOTAL = """MODEL (name {s}.total, kind FULL);
SELECT SUM(v2) AS total FROM {s}.down
"""


@pytest.fixture
def schema(engine):
    name = f"rs_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(root: Path, s: str, factor: int = 10, props: str = "") -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: 2020-01-01\n")
    (root / "external_models.yaml").write_text(
        f"- name: {s}_raw.events\n  columns:\n    id: int\n    v: int\n    ds: date\n")
    (root / "models" / "up.sql").write_text(UP.format(s=s))
    (root / "models" / "down.sql").write_text(DOWN.format(s=s, factor=factor, props=props))
    (root / "models" / "total.sql").write_text(TOTAL.format(s=s))
    return root


def _raw(engine, s: str, values: list[int]) -> None:
    engine.session.execute(f"CREATE SCHEMA IF NOT EXISTS {s}_raw")
    engine.session.execute(f"CREATE TABLE IF NOT EXISTS {s}_raw.events (id INT, v INT, ds DATE) USING parquet")
    rows = ", ".join(f"({i + 1}, {v}, DATE'2020-01-0{i + 1}')" for i, v in enumerate(values))
    engine.session.execute(f"INSERT OVERWRITE TABLE {s}_raw.events VALUES {rows}")


def _by_day(ctx: Context, view: str, column: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(f"SELECT CAST(ds AS STRING), {column} FROM {view} ORDER BY ds")]


def test_restating_one_day_upstream_recomputes_that_day_downstream(tmp_path, engine, schema):
    s = schema
    _raw(engine, s, [1, 2, 3])
    root = _project(tmp_path / "p", s)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time=WHEN))
    # A dev environment with its own version of `down` (a breaking change: a new table).
    _project(root, s, factor=100)
    ctx.reload()
    ctx.reviews.apply(ctx.plans.plan("dev", execution_time=WHEN))
    dev_down = ctx.plans.plan("dev", execution_time=WHEN).snapshots[f"{s}.down"]
    assert _by_day(ctx, f"{s}__dev.down", "v2") == [("2020-01-01", 100), ("2020-01-02", 200), ("2020-01-03", 300)]

    _raw(engine, s, [7, 8, 9])  # late corrections for every day; only the 2nd is restated
    with pytest.raises(PlanError, match=r"--restate-model \(in 'prod'\) '.*\.nope' matches no model"):
        ctx.plans.restate("prod", [f"{s}.nope"], execution_time=WHEN)
    plan = ctx.plans.restate("prod", [f"{s}.up"], start="2020-01-02", end="2020-01-02", execution_time=WHEN)
    assert set(plan.restated) == {f"{s}.up", f"{s}.down", f"{s}.total"}
    assert any("Local changes" in w for w in plan.warnings)  # the factor edit is not part of it
    ctx.reviews.apply(plan)

    assert _by_day(ctx, f"{s}.up", "v") == [("2020-01-01", 1), ("2020-01-02", 8), ("2020-01-03", 3)]
    assert _by_day(ctx, f"{s}.down", "v2") == [("2020-01-01", 10), ("2020-01-02", 80), ("2020-01-03", 30)]
    assert [tuple(r) for r in engine.session.fetchall(f"SELECT total FROM {s}.total")] == [(120,)]
    # The dev version of `down` forgets that day (its table is not prod's): `mesh run dev` refills it.
    day = 24 * 3600 * 1000
    kept = ctx.state.intervals.get_intervals([dev_down.interval_key])[dev_down.interval_key]
    assert [(e - b) // day for b, e in kept] == [1, 1]
    assert _by_day(ctx, f"{s}__dev.down", "v2")[1] == ("2020-01-02", 200)  # not recomputed by prod
    ctx.runs.run("dev", execution_time=WHEN)
    assert _by_day(ctx, f"{s}__dev.down", "v2")[1] == ("2020-01-02", 800)


def test_restatement_skips_protected_and_prod_owned_models(tmp_path, engine, schema):
    s = schema
    _raw(engine, s, [1, 2, 3])
    root = _project(tmp_path / "p", s, props=", disable_restatement true")
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time=WHEN))
    plan = ctx.plans.restate("prod", [f"{s}.up"], start="2020-01-01", end="2020-01-01", execution_time=WHEN)
    assert f"{s}.down" not in plan.backfills
    assert any(f"{s}.down is not restated: its kind sets disable_restatement" in w for w in plan.warnings)

    _project(root, s, factor=100, props=", disable_restatement true")  # dev gets its own `down`
    ctx.reload()
    ctx.reviews.apply(ctx.plans.plan("dev", execution_time=WHEN))
    dev = ctx.plans.restate("dev", [f"{s}.up"], execution_time=WHEN)
    assert f"{s}.up" not in dev.backfills  # dev reads prod's table: restating it there would change prod
    assert any("restate it in prod instead" in w for w in dev.warnings)
