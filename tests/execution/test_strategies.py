"""The write path of each model kind, on the in-memory engine (no JVM): which engine calls an
interval issues, in which order, and that re-running an interval repeats the same write."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

FILES = {
    "models/seed.sql": """
        MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, ds DATE, value DOUBLE));
    """,
    "seeds/seed.csv": "id,ds,value\n1,2024-01-01,1.5\n2,2024-01-02,2.5\n",
    "models/inc.sql": """
        MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
        SET spark.sql.shuffle.partitions = 2;
        SELECT id, ds, value FROM s.emb WHERE ds BETWEEN @start_ds AND @end_ds;
        ANALYZE TABLE @this_model COMPUTE STATISTICS;
    """,
    "models/emb.sql": "MODEL (name s.emb, kind EMBEDDED);\nSELECT id, ds, value FROM s.seed\n",
    "models/full.sql": "MODEL (name s.full, kind FULL);\nSELECT id, ds, value FROM s.inc\n",
    "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id, ds FROM s.full\n",
    "models/mv.sql": "MODEL (name s.mv, kind VIEW (materialized true));\nSELECT id FROM s.full\n",
}
DAY1, DAY2, DAY3 = to_ms("2024-01-01"), to_ms("2024-01-02"), to_ms("2024-01-03")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = write_project(tmp_path_factory.mktemp("strategies") / "p", FILES)
    ctx = Context(Path(root))
    try:
        plan = ctx.plans.plan(execution_time="2024-01-03")
        yield ctx.project, plan.snapshots
    finally:
        ctx.close()


def evaluator(planned, engine: FakeEngine) -> SnapshotEvaluator:
    project, snapshots = planned
    return SnapshotEvaluator(project, engine, snapshots)


def test_time_range_interval_creates_once_then_overwrites_exactly_its_bounds(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    inc = ev.snapshots["s.inc"]
    ev.evaluate(inc, DAY1, DAY2, DAY3)
    writes = [c for c in engine.calls if c.method in ("create_table", "insert_overwrite_interval", "replace_table")]
    assert [c.method for c in writes] == ["create_table", "insert_overwrite_interval"]
    write = writes[1]
    assert write.name == inc.table_name and write.args["time_column"] == "ds"
    # The stored DATE column bounds [2024-01-01, 2024-01-02) as one day, both ends inclusive.
    assert "2024-01-01" in write.args["low"] and "2024-01-01" in write.args["high"]
    assert "2024-01-01" in write.args["query"] and "s__seed__" in write.args["query"]  # embedded inlined

    ev.evaluate(inc, DAY1, DAY2, DAY3)  # the same interval again: the very same write, no second create
    again = [c for c in engine.calls if c.method in ("create_table", "insert_overwrite_interval")][2:]
    assert [c.method for c in again] == ["insert_overwrite_interval"] and again[0] == write


def test_time_range_pre_statements_run_before_the_write_and_post_after(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    ev.evaluate(ev.snapshots["s.inc"], DAY1, DAY3, DAY3)
    sequence = [c.args.get("sql", c.method) for c in engine.calls if c.method in ("execute", "insert_overwrite_interval")]
    assert len(sequence) == 3
    assert sequence[0].upper().startswith("SET")
    assert sequence[1] == "insert_overwrite_interval"
    assert sequence[2].upper().startswith("ANALYZE") and ev.snapshots["s.inc"].table_name.split(".")[1] in sequence[2]
    low_high = next(c.args for c in engine.calls if c.method == "insert_overwrite_interval")
    assert "2024-01-01" in low_high["low"] and "2024-01-02" in low_high["high"]  # two days, inclusive


def test_full_replaces_the_whole_table(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    full = ev.snapshots["s.full"]
    ev.evaluate(full, DAY1, DAY2, DAY3)
    assert engine.methods() == ["query_columns", "replace_table"]  # its parent's columns unknown: analysed
    write = engine.calls[1]
    assert write.name == full.table_name and ev.snapshots["s.inc"].table_name in write.args["query"]
    assert write.args["produced"] == engine.output  # handed over: the engine analyses nothing again


def test_a_materialized_view_is_a_table_replaced_whole(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    mv = ev.snapshots["s.mv"]
    ev.create(mv)
    ev.evaluate(mv, DAY1, DAY2, DAY3)
    writes = [m for m in engine.methods() if m != "query_columns"]
    assert writes == ["create_schema", "create_table", "replace_table"] and not engine.views


def test_seed_is_created_empty_then_loaded_whole(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    seed = ev.snapshots["s.seed"]
    ev.create(seed)
    ev.evaluate(seed, DAY1, DAY2, DAY3)
    assert engine.methods() == ["create_schema", "create_table", "load_seed"]
    created, loaded = engine.calls[1], engine.calls[2]
    assert created.args["query"].startswith("SELECT CAST(NULL AS")
    assert loaded.args == {"rows": 2, "columns": {"id": "INT", "ds": "DATE", "value": "DOUBLE"}}


def test_view_only_ever_redefines_itself(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    view = ev.snapshots["s.v"]
    ev.create(view)
    ev.create(view)  # the same definition over the same tables: defined once per evaluation (issue 36)
    ev.evaluate(view, DAY1, DAY2, DAY3)
    assert engine.methods() == ["create_schema", "create_view", "create_schema"]
    ev.shapes.changing(ev.snapshots["s.full"])  # its parent about to change (a migration): defined anew
    ev.evaluate(view, DAY1, DAY2, DAY3)
    assert engine.methods()[-1] == "create_view"
    assert all(c.name == view.table_name for c in engine.calls if c.method == "create_view")
    assert ev.snapshots["s.full"].table_name in engine.views[view.table_name]


def test_embedded_writes_nothing(planned):
    engine = FakeEngine()
    ev = evaluator(planned, engine)
    ev.evaluate(ev.snapshots["s.emb"], DAY1, DAY2, DAY3)
    assert engine.calls == []


def test_a_rendering_only_evaluator_refuses_to_write(planned):
    project, snapshots = planned
    ev = SnapshotEvaluator(project, None, snapshots)
    assert "SELECT" in ev.render(snapshots["s.full"]).upper()
    with pytest.raises(EngineError, match="no engine"):
        ev.evaluate(snapshots["s.full"], DAY1, DAY2, DAY3)
