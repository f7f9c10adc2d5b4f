"""`Context.runs.materialize` (what a Dagster step runs) past a failing model, on real Spark: the model
fails alone, the models reading it (directly or through an EMBEDDED one) are blocked without being
evaluated, the others are evaluated and recorded. Nothing is written for the failed or the blocked."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError

pytestmark = pytest.mark.spark

CONFIG = "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n"


@pytest.fixture
def schema(engine):
    name = f"mf_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def test_a_failing_model_blocks_only_its_readers(tmp_path, schema, engine):
    models = {
        "broken": "MODEL (name {s}.broken, kind FULL);\n\nSELECT CAST('oops' AS INT) AS x",
        "reader": "MODEL (name {s}.reader, kind FULL);\n\nSELECT x FROM {s}.broken",
        "inlined": "MODEL (name {s}.inlined, kind EMBEDDED);\n\nSELECT x FROM {s}.broken",
        "via_inlined": "MODEL (name {s}.via_inlined, kind FULL);\n\nSELECT x FROM {s}.inlined",
        "healthy": "MODEL (name {s}.healthy, kind FULL);\n\nSELECT 1 AS y",
    }
    root = write_project(tmp_path / "p", {f"models/{n}.sql": t.format(s=schema) for n, t in models.items()},
                         CONFIG)
    ctx = Context(root)
    try:
        names = [f"{schema}.{n}" for n in ("broken", "reader", "via_inlined", "healthy")]
        results = {r.name.split(".")[1]: r for r in ctx.runs.materialize(names, "2024-01-01", "2024-01-02")}
        assert {n: r.outcome.value for n, r in results.items()} == {
            "broken": "failed", "reader": "blocked", "via_inlined": "blocked", "healthy": "evaluated"}
        assert isinstance(results["broken"].error, EngineError)
        assert str(results["broken"].error).startswith("Spark SQL failed: [CAST_INVALID_INPUT] The value 'oops'")
        assert results["reader"].blocked_by == results["via_inlined"].blocked_by == f"{schema}.broken"
        assert results["reader"].error is None and not results["reader"].succeeded
        assert results["healthy"].succeeded and results["healthy"].recorded

        plan = ctx.plans.plan("prod", allow_empty=True)
        for name in ("broken", "reader", "via_inlined"):
            snap = plan.snapshots[f"{schema}.{name}"]
            assert ctx.state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, []) == [], name
        for name in ("reader", "via_inlined"):
            assert not engine.catalog.table_exists(plan.snapshots[f"{schema}.{name}"].table_name), name
        assert [tuple(r) for r in engine.session.fetchall(f"SELECT y FROM {plan.snapshots[f'{schema}.healthy'].table_name}")] \
            == [(1,)]
    finally:
        ctx.close()
