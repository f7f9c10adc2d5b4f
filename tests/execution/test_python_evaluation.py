"""Python models on the in-memory engine (no JVM): what the function is called with, the write its
output goes through, and how a failing model fails (nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

CONFIG = """model_defaults:
  dialect: spark
  start: 2024-01-01
variables:
  factor: 3
  label: x
"""
HEADER = "import pandas as pd\nfrom mesh_dagster import model\n\n"
FILES = {
    "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n",
    "models/orders.sql": "MODEL (name s.orders, kind FULL);\nSELECT 1 AS id\n",
    "models/py.py": HEADER + """\
@model(
    "s.py",
    kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"),
    columns={"ds": "date", "orders": "string", "events": "string", "own": "string", "start": "string",
             "end": "string", "factor": "int", "label": "string"},
    pre_statements=["SET spark.sql.shuffle.partitions = 2"],
    post_statements=["ANALYZE TABLE @this_model COMPUTE STATISTICS"],
)
def execute(context, start, end, execution_time, factor):
    return pd.DataFrame({
        "ds": [start.date()], "orders": [context.resolve_table("s.orders")],
        "events": [context.resolve_table("raw.events")], "own": [context.resolve_table("s.py")],
        "start": [start.isoformat()], "end": [end.isoformat()], "factor": [factor],
        "label": [context.var("label", "none")],
    })
""",
    "models/bad.py": HEADER + """\
@model("s.bad", columns={"id": "int"})
def execute(context, start, end, execution_time):
    raise ValueError(f"no rows for {start.date()}")
""",
    "models/chunks.py": HEADER + """\
@model("s.chunks", columns={"id": "int"})
def execute(context, start, end, execution_time):
    yield pd.DataFrame({"id": [1]})
    raise KeyError("id")
""",
    "models/full_py.py": HEADER + """\
@model("s.full_py", kind="FULL", columns={"id": "int"})
def execute(context, start, end, execution_time):
    return pd.DataFrame({"id": [1, 2]})
""",
    "models/odd.py": HEADER + """\
@model("s.none", columns={"id": "int"})
def none(context, start, end, execution_time):
    return None


@model("s.list", columns={"id": "int"})
def a_list(context, start, end, execution_time):
    return [1, 2]


@model("s.dyn", columns={"id": "int"}, depends_on=["s.orders"])
def dyn(context, start, end, execution_time):
    name = "s.py"
    return context.resolve_table(name)
""",
}
DAY1, DAY2 = to_ms("2024-01-01"), to_ms("2024-01-02")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = write_project(tmp_path_factory.mktemp("python_eval") / "p", FILES, CONFIG)
    ctx = Context(Path(root))
    try:
        yield ctx.project, ctx.plans.plan(execution_time="2024-01-02").snapshots
    finally:
        ctx.close()


def evaluate(planned, name: str) -> tuple[FakeEngine, SnapshotEvaluator]:
    engine = FakeEngine()
    ev = SnapshotEvaluator(planned[0], engine, planned[1])
    ev.evaluate(ev.snapshots[name], DAY1, DAY2, DAY2)
    return engine, ev


def test_the_output_is_written_by_the_kind_strategy_from_a_temporary_view(planned):
    engine, ev = evaluate(planned, "s.py")
    py = ev.snapshots["s.py"]
    # The model reads its own table (`resolve_table("s.py")`): self-referencing, so its output is
    # written as a write reading the table it overwrites (the engine stages it first).
    assert engine.methods() == ["execute", "register_frames", "create_schema", "create_table", "columns",
                                "insert_overwrite_interval", "drop_temp_view", "execute"]
    pre, registered, _, created, _, written, dropped, post = engine.calls
    assert pre.args["sql"].startswith("SET") and post.args["sql"].startswith("ANALYZE TABLE")
    assert py.table_name.split(".")[1] in post.args["sql"]
    assert created.args["columns"] == py.model.columns  # the table is created from the declared columns
    assert created.args["query"].startswith("SELECT CAST(NULL AS DATE) AS `ds`") and "WHERE FALSE" in created.args["query"]
    assert written.args["reads_self"] is True
    assert written.args["query"] == (
        "SELECT CAST(`ds` AS DATE) AS `ds`, CAST(`orders` AS STRING) AS `orders`, CAST(`events` AS STRING) AS "
        "`events`, CAST(`own` AS STRING) AS `own`, CAST(`start` AS STRING) AS `start`, CAST(`end` AS STRING) AS "
        f"`end`, CAST(`factor` AS INT) AS `factor`, CAST(`label` AS STRING) AS `label` FROM `{registered.name}`")
    assert dropped.name == registered.name and written.args["time_column"] == "ds"


def test_the_function_gets_the_context_interval_and_variables(planned):
    engine, ev = evaluate(planned, "s.py")
    (frame,) = next(iter(engine.frames.values()))
    row = frame.iloc[0].to_dict()
    assert row["orders"] == ev.snapshots["s.orders"].table_name  # the parent's physical table
    assert row["events"] == "raw.events"  # an external table is read where it is
    assert row["own"] == ev.snapshots["s.py"].table_name
    assert (row["start"], row["end"]) == ("2024-01-01T00:00:00+00:00", "2024-01-01T23:59:59.999999+00:00")
    assert (row["factor"], row["label"]) == (3, "x")  # a parameter and context.var, from config variables


@pytest.mark.parametrize("name, message", [
    ("s.bad", "models/bad.py:6: Python model s.bad failed: ValueError: no rows for 2024-01-01"),
    ("s.chunks", "models/chunks.py:7: Python model s.chunks failed: KeyError: 'id'"),  # a generator, mid-way
    ("s.none", "models/odd.py:4: Python model s.none returned None: return a DataFrame, or yield nothing"),
    ("s.list", "models/odd.py:9: Python model s.list: it returned a list: return (or yield) PySpark or pandas"),
    ("s.dyn", "models/odd.py:17: Python model s.dyn failed: resolve_table('s.py'): s.py is not a dependency of "
              "s.dyn (its dependencies: s.orders); list it in depends_on"),
])
def test_a_failing_model_is_one_error_at_its_line_and_writes_nothing(planned, name, message):
    engine = FakeEngine()
    ev = SnapshotEvaluator(planned[0], engine, planned[1])
    with pytest.raises(ModelError) as e:
        ev.evaluate(ev.snapshots[name], DAY1, DAY2, DAY2)
    assert str(e.value).startswith(message), str(e.value)
    if "failed" in message:
        assert e.value.__cause__ is not None  # the user's exception, with its traceback for the log
    assert not {"create_table", "replace_table", "insert_overwrite_interval", "register_frames"} & set(engine.methods())


def test_a_full_python_models_output_is_analysed_without_looking_its_temporary_view_up(planned):
    """Its output is a temporary view new in every evaluation: nothing is remembered of it, and its
    columns are not read to digest it (issue 36); the write is handed the one analysis."""
    class Looking(FakeEngine):
        looked: list[str] = []

        def existing_columns(self, name):
            self.looked.append(name)
            return super().existing_columns(name)

    engine = Looking({"id": "int"})
    ev = SnapshotEvaluator(planned[0], engine, planned[1])
    ev.evaluate(ev.snapshots["s.full_py"], DAY1, DAY2, DAY2)
    (view,) = engine.frames
    assert view not in engine.looked
    assert engine.methods().count("query_columns") == 1
    assert next(c for c in engine.calls if c.method == "replace_table").args["produced"] == {"id": "int"}
