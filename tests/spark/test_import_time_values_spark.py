"""Globals computed when a project's Python files are imported (issue 34, point 2), on real Spark:
prod applied with an environment variable and a JSON file as they were then keeps computing with
those values when `mesh run` (Context.runs.run) fills its next intervals after both changed, and an
approved plan whose variable changed after the approval is superseded instead of applied."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.execution.plans.records import PlanSupersededError

RATE_VARIABLE = "MESH_TEST_SPARK_IMPORT_RATE"
CONFIG = "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron: '@daily'\n"
RATES = f'''\
import os

import pandas as pd

from mesh_dagster import model

RATE = int(os.environ.get("{RATE_VARIABLE}", "1"))


@model("{{s}}.rates", kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds", batch_size=1),
       columns={{"ds": "date", "rate": "int"}})
def execute(context, start, end, execution_time):
    return pd.DataFrame({{"ds": [start.date()], "rate": [RATE]}})
'''
LOOKUP = '''\
import json
from pathlib import Path

from mesh_dagster import macro

REGIONS = json.loads((Path(__file__).parent / "regions.json").read_text())


@macro()
def region(evaluator, code):
    return "'" + REGIONS[code.name] + "'"
'''
SALES = """MODEL (name {s}.sales, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1));
SELECT @region(eu) AS region, CAST(@start_ds AS DATE) AS ds
"""


@pytest.fixture
def schema(engine):
    name = f"imp_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(root: Path, s: str) -> Path:
    files = {"config.yaml": CONFIG, "models/rates.py": RATES.replace("{s}", s), "macros/lookup.py": LOOKUP,
             "macros/regions.json": json.dumps({"eu": "Europe"}), "models/sales.sql": SALES.replace("{s}", s)}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _rows(ctx: Context, sql: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in ctx.engine.session.fetchall(sql)]


def test_a_run_computes_with_the_values_prod_was_planned_with(tmp_path, engine, schema, monkeypatch):
    monkeypatch.setenv(RATE_VARIABLE, "3")
    root = _project(tmp_path / "p", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))

    monkeypatch.setenv(RATE_VARIABLE, "5")  # changed after the plan, never planned
    (root / "macros" / "regions.json").write_text(json.dumps({"eu": "Elsewhere"}))
    ctx = Context(root, engine=engine)
    assert ctx.runs.run("prod", execution_time="2020-01-05") == 4  # two new days of each model
    days = [f"2020-01-0{d}" for d in range(1, 5)]
    assert _rows(ctx, f"SELECT CAST(ds AS STRING), rate FROM {schema}.rates ORDER BY ds") == [(d, "3") for d in days]
    assert _rows(ctx, f"SELECT CAST(ds AS STRING), region FROM {schema}.sales ORDER BY ds") == \
        [(d, "Europe") for d in days]

    plan = Context(root, engine=engine).plans.plan("prod", execution_time="2020-01-05")
    assert sorted(plan.directly_modified) == [f"{schema}.rates", f"{schema}.sales"]  # the plan shows what the run did not do


def test_an_approved_plan_whose_variable_changed_since_is_superseded(tmp_path, engine, schema, monkeypatch):
    monkeypatch.setenv(RATE_VARIABLE, "3")
    root = _project(tmp_path / "p", schema)
    protected = "protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"
    (root / "config.yaml").write_text(CONFIG + protected)
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = Context(root, engine=engine)
    record = ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-02"))
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(record.plan_id, "approve")

    monkeypatch.setenv(RATE_VARIABLE, "5")  # the deploy's environment differs from the reviewed one
    with pytest.raises(PlanSupersededError, match=f"Plan {record.plan_id} was not applied and is now superseded"):
        Context(root, engine=engine).reviews.apply_recorded(record.plan_id)
    assert not engine.catalog.table_exists(f"{schema}.rates")  # nothing was computed
