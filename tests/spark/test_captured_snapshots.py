"""What was reviewed is what runs (issue 19, points 1 and 2): a snapshot captures its macros (with
the helpers they call), variables, audits and seed content when it is planned, and every later
evaluation — `mesh run`, a reviewed restatement — works from that capture, whatever the working tree
says by then. The working tree's edits show up as changes in the next plan instead."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.plan.review import PlanStatus

MACRO = """from mesh_dagster import macro


def factor():
    return {factor}


@macro()
def scaled(evaluator, column):
    return f"{{column}} * {{factor()}} * {{evaluator.var('mult', 1)}}"
"""

EVENTS = """MODEL (name {s}.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1), start '2020-01-01',
       audits (at_most(limit := 1000)));
SELECT 1 AS id, @scaled(2) AS v, CAST(@start_ds AS DATE) AS ds
"""

AUDIT = """AUDIT (name at_most);
SELECT * FROM @this_model WHERE v > @limit
"""


@pytest.fixture
def schema(engine):
    name = f"cap_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(root: Path, s: str, factor: int = 1, mult: int = 1, extra_config: str = "") -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "macros").mkdir(exist_ok=True)
    (root / "audits").mkdir(exist_ok=True)
    (root / "config.yaml").write_text(f"model_defaults:\n  dialect: spark\n  start: 2020-01-01\n"
                                      f"variables:\n  mult: {mult}\n{extra_config}")
    (root / "macros" / "m.py").write_text(MACRO.format(factor=factor))
    (root / "audits" / "at_most.sql").write_text(AUDIT)
    (root / "models" / "events.sql").write_text(EVENTS.format(s=s))
    return root


def _values(ctx: Context, view: str) -> list[tuple[str, int]]:
    return [(str(r[0]), int(r[1])) for r in ctx.engine.session.fetchall(f"SELECT CAST(ds AS STRING), v FROM {view} ORDER BY ds")]


def _applied(root: Path, engine, when: str) -> Context:
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time=when))
    return ctx


def _applied_without_captures(root: Path, engine, when: str) -> tuple[Context, Plan]:
    """Prod applied with its snapshots stored as a mesh_dagster from before captures stored them."""
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan("prod", execution_time=when)
    for snap in plan.new_snapshots:
        object.__setattr__(snap, "capture", None)
    ctx.reviews.apply(plan)
    return ctx, plan


def test_a_run_evaluates_the_macro_and_variables_that_were_planned(tmp_path, engine, schema):
    root = _project(tmp_path / "p", schema)
    _applied(root, engine, "2020-01-03")
    # Edit what the plan captured, without planning: the helper a macro calls, a variable, the audit.
    (root / "macros" / "m.py").write_text(MACRO.format(factor=1000))
    (root / "config.yaml").write_text((root / "config.yaml").read_text().replace("mult: 1", "mult: 7"))
    (root / "audits" / "at_most.sql").write_text(AUDIT.replace("v > @limit", "v > @limit OR v > 0"))

    ctx = Context(root, engine=engine)
    assert ctx.runs.run("prod", execution_time="2020-01-05") == 2
    assert _values(ctx, f"{schema}.events") == [(f"2020-01-0{d}", 2) for d in range(1, 5)]  # x1, mult 1, passed

    plan = Context(root, engine=engine).plans.plan("prod", execution_time="2020-01-05")
    assert plan.directly_modified == [f"{schema}.events"]  # the plan shows what the run did not do


def test_an_approved_restatement_runs_the_macro_it_was_approved_with(tmp_path, engine, schema, monkeypatch):
    root = _project(tmp_path / "p", schema)
    _applied(root, engine, "2020-01-03")
    protected = "protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"
    (root / "config.yaml").write_text((root / "config.yaml").read_text() + protected)
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = Context(root, engine=engine)
    restatement = ctx.plans.restate("prod", [f"{schema}.events"], start="2020-01-01", end="2020-01-02",
                              execution_time="2020-01-03")
    record = ctx.reviews.record(restatement)
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(record.plan_id, "approve")

    (root / "macros" / "m.py").write_text(MACRO.format(factor=5000))  # the author edits after the approval
    ctx = Context(root, engine=engine)
    assert ctx.reviews.apply_recorded(record.plan_id).status == PlanStatus.COMPLETED
    assert _values(ctx, f"{schema}.events") == [("2020-01-01", 2), ("2020-01-02", 2)]


def test_a_snapshot_stored_before_captures_is_evaluated_from_the_project_and_captured_by_the_next_plan(
        tmp_path, engine, schema):
    root = _project(tmp_path / "p", schema)
    ctx, plan = _applied_without_captures(root, engine, "2020-01-02")
    stored = ctx.state.snapshots.get_snapshots([plan.snapshots[f"{schema}.events"].snapshot_id])
    assert all(s.capture is None for s in stored.values())
    assert ctx.runs.run("prod", execution_time="2020-01-03") == 1  # still runs, from the project's files

    again = Context(root, engine=engine)
    again.reviews.apply(again.plans.plan("prod", execution_time="2020-01-03"))
    stored = again.state.snapshots.get_snapshots([plan.snapshots[f"{schema}.events"].snapshot_id])
    assert all(s.capture is not None and "scaled" in s.capture.macros for s in stored.values())
    assert _values(again, f"{schema}.events") == [("2020-01-01", 2), ("2020-01-02", 2)]


def test_restating_a_snapshot_stored_before_captures_needs_the_project_to_define_it_as_stored(
        tmp_path, engine, schema):
    root = _project(tmp_path / "p", schema)
    ctx, plan = _applied_without_captures(root, engine, "2020-01-03")
    (root / "macros" / "m.py").write_text(MACRO.format(factor=1000))
    with pytest.raises(PlanError, match=f"Cannot restate {schema}.events: 'prod' holds it as planned by an earlier"):
        Context(root, engine=engine).plans.restate("prod", [f"{schema}.events"], start="2020-01-01", end="2020-01-01",
                                             execution_time="2020-01-03")

    (root / "macros" / "m.py").write_text(MACRO.format(factor=1))  # the project defines it as stored again
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.restate("prod", [f"{schema}.events"], start="2020-01-01", end="2020-01-01",
                          execution_time="2020-01-03"))
    stored = ctx.state.snapshots.get_snapshots([plan.snapshots[f"{schema}.events"].snapshot_id])
    assert all(s.capture is not None for s in stored.values())  # captured by the restatement
    assert _values(ctx, f"{schema}.events") == [("2020-01-01", 2), ("2020-01-02", 2)]
