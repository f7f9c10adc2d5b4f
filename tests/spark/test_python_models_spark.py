"""Python models on the shared SparkSession: PySpark and pandas output, incremental intervals,
chunks, failures that record nothing, and proof that a PySpark output never reaches the driver."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import no_collect_frames
import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.time.dates import to_ms

CONFIG = """model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
variables:
  factor: 10
"""


@pytest.fixture
def schema(engine):
    name = f"py_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def project(tmp_path: Path, schema: str, files: dict[str, str]) -> Path:
    return write_project(tmp_path / "p", {k: v.replace("{s}", schema) for k, v in files.items()}, CONFIG)


def rows(ctx: Context, sql: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(sql)]


ORDERS = """MODEL (name {s}.orders, kind FULL);
SELECT * FROM VALUES (1, 'a', 2.5), (2, 'b', 4.0), (3, 'a', 1.5) AS t(id, customer, amount)
"""
TOTALS = """
from pyspark.sql import functions as F

from mesh_dagster import ExecutionContext, model


@model("{s}.totals", columns={"customer": "string", "total": "double", "orders": "bigint"}, grain=["customer"])
def execute(context: ExecutionContext, start, end, execution_time, factor):
    orders = context.spark.table(context.resolve_table("{s}.orders"))
    return orders.groupBy("customer").agg((F.sum("amount") * factor).alias("total"), F.count("*").alias("orders"))
"""


def test_pyspark_model_reads_its_sql_parent_in_each_environment(tmp_path, engine, schema):
    root = project(tmp_path, schema, {"models/orders.sql": ORDERS, "models/totals.py": TOTALS})
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert rows(ctx, f"SELECT * FROM {schema}.totals ORDER BY customer") == [("a", 40.0, 2), ("b", 40.0, 1)]

    # A breaking change of the parent in dev: the Python model reads dev's table of it, prod is untouched.
    orders = root / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace("(2, 'b', 4.0)", "(2, 'b', 5.0)"))
    ctx.reload()
    plan = ctx.plans.plan("dev", execution_time="2024-01-02")
    assert plan.category(f"{schema}.totals").label == "Indirect Breaking"
    ctx.reviews.apply(plan)
    assert rows(ctx, f"SELECT * FROM {schema}__dev.totals ORDER BY customer") == [("a", 40.0, 2), ("b", 50.0, 1)]
    assert rows(ctx, f"SELECT * FROM {schema}.totals ORDER BY customer") == [("a", 40.0, 2), ("b", 40.0, 1)]
    assert ctx.inspection.render(f"{schema}.totals").startswith(f"-- {schema}.totals is a Python model (models/totals.py:6)")
    assert ctx.inspection.evaluate(f"{schema}.totals").sort_values("customer").values.tolist() == [["a", 40.0, 2],
                                                                                       ["b", 50.0, 1]]
    assert not [t for t in engine.session.spark.catalog.listTables() if t.isTemporary]  # every temporary view dropped


DAILY = """
import pandas as pd

from mesh_dagster import model


@model(
    "{s}.daily",
    kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds", batch_size=1),
    columns={"ds": "date", "n": "int", "note": "string", "at": "timestamp"},
)
def execute(context, start, end, execution_time):
    day = start.date()
    return pd.DataFrame({
        "ds": [day, day, pd.Timestamp("2023-12-31").date()],  # the last row is outside the interval
        "n": [day.day, None, 0],
        "note": ["x", None, "stale"],
        "at": [pd.Timestamp(start), pd.NaT, pd.Timestamp(start)],
    })
"""


def test_incremental_pandas_model_writes_each_interval(tmp_path, engine, schema):
    root = project(tmp_path, schema, {"models/daily.py": DAILY})
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-03")
    assert plan.backfills[f"{schema}.daily"].intervals == [(to_ms("2024-01-01"), to_ms("2024-01-03"))]
    ctx.reviews.apply(plan)
    got = rows(ctx, f"SELECT CAST(ds AS STRING), n, note, CAST(`at` AS STRING) FROM {schema}.daily ORDER BY ds, n")
    assert got == [("2024-01-01", None, None, None), ("2024-01-01", 1, "x", "2024-01-01 00:00:00"),
                   ("2024-01-02", None, None, None), ("2024-01-02", 2, "x", "2024-01-02 00:00:00")]
    assert engine.catalog.columns(plan.snapshots[f"{schema}.daily"].table_name) == {
        "n": "int", "note": "string", "at": "timestamp", "ds": "date"}  # declared types; partitioned by ds
    assert f"{schema}.daily" not in ctx.plans.plan(execution_time="2024-01-03").backfills  # both days recorded


CHUNKS = """
import pandas as pd

from mesh_dagster import model


@model("{s}.chunks", columns={"id": "bigint", "source": "string"})
def execute(context, start, end, execution_time):
    yield context.spark.range(3).selectExpr("id", "'spark' AS source")
    yield pd.DataFrame({"SOURCE": ["pandas"], "ID": [10]})  # any column order and case


@model("{s}.nothing", columns={"id": "bigint"})
def nothing(context, start, end, execution_time):
    yield from ()
"""


def test_generator_chunks_are_unioned_and_an_empty_generator_is_no_rows(tmp_path, engine, schema):
    root = project(tmp_path, schema, {"models/chunks.py": CHUNKS})
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert rows(ctx, f"SELECT id, source FROM {schema}.chunks ORDER BY id") == [
        (0, "spark"), (1, "spark"), (2, "spark"), (10, "pandas")]
    assert rows(ctx, f"SELECT COUNT(*) FROM {schema}.nothing") == [(0,)]


FAILING = {
    "models/orders.sql": ORDERS,
    "models/bad.py": """
from mesh_dagster import model


@model("{s}.bad", columns={"id": "int"})
def execute(context, start, end, execution_time):
    orders = context.spark.table(context.resolve_table("{s}.orders"))
    raise ValueError(f"cannot price {orders.columns[0]}")
""",
    "models/wrong.py": """
from mesh_dagster import model


@model("{s}.wrong", columns={"id": "int", "price": "double"})
def execute(context, start, end, execution_time):
    return context.spark.range(2).selectExpr("id", "id AS cost")
""",
    "models/udf.py": """
from pyspark.sql import functions as F

from mesh_dagster import model


def explode_on(value):
    raise ZeroDivisionError("in a UDF")


@model("{s}.udf", columns={"id": "bigint"})
def execute(context, start, end, execution_time):
    return context.spark.range(2).select(F.udf(explode_on, "bigint")("id").alias("id"))
""",
}


@pytest.mark.parametrize("name, message", [
    ("bad", "models/bad.py:7: Python model {s}.bad failed: ValueError: cannot price id"),
    ("wrong", "models/wrong.py:4: Python model {s}.wrong: its DataFrame lacks the declared column(s) price and has "
              "undeclared column(s) cost (declared columns: id, price)"),
    ("udf", "models/udf.py:10: Python model {s}.udf failed while its output was written: "),
])
def test_a_failing_python_model_records_nothing(tmp_path, engine, schema, name, message):
    root = project(tmp_path, schema, {"models/orders.sql": ORDERS, f"models/{name}.py": FAILING[f"models/{name}.py"]})
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-02")
    with pytest.raises(ModelError) as e:
        ctx.reviews.apply(plan)
    assert str(e.value).startswith(message.replace("{s}", schema)), str(e.value)
    assert "\n" not in str(e.value)
    assert ctx.state.environments.get_environment("prod") is None  # nothing was promoted
    assert f"{schema}.{name}" in ctx.plans.plan(execution_time="2024-01-02").backfills  # its interval was not recorded
    assert f"{schema}.orders" not in ctx.plans.plan(execution_time="2024-01-02").backfills  # the parent's was
    assert not [t for t in engine.session.spark.catalog.listTables() if t.isTemporary]


MANY = """
from mesh_dagster import model
from no_collect_frames import NoCollect


@model("{s}.many", columns={"id": "bigint", "bucket": "int"})
def execute(context, start, end, execution_time):
    return NoCollect(context.spark.range(ROWS).selectExpr("id", "CAST(id % 7 AS INT) AS bucket"))
"""


def test_a_pyspark_output_never_reaches_the_driver(tmp_path, engine, schema, spark):
    count = 300_000 + random.randrange(1000)  # a Range no other test builds
    root = project(tmp_path, schema, {"models/many.py": MANY.replace("ROWS", str(count))})
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-02")
    with pytest.raises(AssertionError, match="would bring the model's rows to the driver"):
        no_collect_frames.NoCollect(spark.range(3)).collect()  # the guard works
    no_collect_frames.EVENTS.clear()
    seen = _executions(spark)

    ctx.reviews.apply(plan)

    assert no_collect_frames.EVENTS == ["registered"]  # registered as a view, nothing else asked of it
    assert rows(ctx, f"SELECT COUNT(*), COUNT(DISTINCT bucket) FROM {schema}.many") == [(count, 7)]
    # Spark's own record: every execution that read the model's rows ran a command (defining the view,
    # writing the table), none returned them (a collect would run e.g. `CollectLimit` over the Range).
    reading = [plan for eid, plan in _executions(spark).items()
               if eid not in seen and (f"Range (0, {count}," in plan or f"Arguments: 0, {count}," in plan)]
    assert reading and all(_root(plan).startswith("Execute ") for plan in reading), [_root(p) for p in reading]
    assert any("InsertIntoHadoopFsRelationCommand" in _root(plan) for plan in reading)


def _executions(spark) -> dict[int, str]:
    """Spark's SQL executions so far: id -> physical plan description."""
    listed = spark._jsparkSession.sharedState().statusStore().executionsList().iterator()
    out = {}
    while listed.hasNext():
        execution = listed.next()
        out[execution.executionId()] = execution.physicalPlanDescription()
    return out


def _root(plan: str) -> str:
    lines = [line for line in plan.splitlines() if line.strip()]
    return lines[1].strip() if len(lines) > 1 else ""



ADAPTER = """
import pandas as pd
from sqlglot import exp

from mesh_dagster import model

ORDERS = "{s}.orders"


@model("{s}.adapted", columns={"dialect": "string", "n": "bigint", "top": "double", "has": "boolean"})
def execute(context, start, end, execution_time):
    table = context.resolve_table(ORDERS)
    query = exp.select(exp.func("count", exp.Star()).as_("n")).from_(exp.to_table(table))
    n = int(context.fetchdf(query, quote_identifiers=True)["n"][0])
    adapter = context.engine_adapter
    (top,) = adapter.fetchone(f"SELECT CAST(MAX(amount) AS DOUBLE) FROM {table}")
    return pd.DataFrame({"dialect": [adapter.dialect], "n": [n], "top": [top], "has": [adapter.table_exists(table)]})
"""


def test_sqlmesh_style_models_read_through_fetchdf_expressions_and_the_engine_adapter(tmp_path, engine, schema):
    """A model as SQLMesh projects write them: its parent named by a module constant, a sqlglot
    expression given to `fetchdf(..., quote_identifiers=True)`, reads through `engine_adapter`."""
    ctx = Context(project(tmp_path, schema, {"models/orders.sql": ORDERS, "models/adapted.py": ADAPTER}),
                  engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert rows(ctx, f"SELECT * FROM {schema}.adapted") == [("spark", 3, 4.0, True)]


IS_SQL = """
from sqlglot import exp

from mesh_dagster import model


@model("{s}.big", is_sql=True, kind="VIEW")
def entrypoint(evaluator):
    return f"SELECT id, amount * {evaluator.var('factor')} AS scaled FROM {s}.orders WHERE amount > 2"


@model("{s}.daily_ids", is_sql=True, kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"))
def daily(evaluator):
    return exp.select("id", "CAST(@start_ds AS DATE) AS ds").from_("{s}.orders")
"""


def test_is_sql_models_are_planned_and_written_as_sql_models(tmp_path, engine, schema):
    ctx = Context(project(tmp_path, schema, {"models/orders.sql": ORDERS, "models/is_sql.py": IS_SQL}), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-03"))
    assert rows(ctx, f"SELECT id, CAST(scaled AS DOUBLE) FROM {schema}.big ORDER BY id") == [(1, 25.0), (2, 40.0)]
    assert rows(ctx, f"SELECT CAST(ds AS STRING), COUNT(*) FROM {schema}.daily_ids GROUP BY ds ORDER BY ds") == [
        ("2024-01-01", 3)]  # one batch from the model's start: @start_ds is its first day


PER_RENDER = """
from mesh_dagster import model


@model("{s}.per_day", is_sql=True, kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds", batch_size=1))
def per_day(evaluator):
    columns = ", ".join(c for c in evaluator.columns_to_types("{s}.orders") if c != "customer")
    return f"SELECT {columns}, CAST('{evaluator.locals['start_ds']}' AS DATE) AS ds FROM {s}.orders"
"""


def test_an_is_sql_function_reading_locals_and_columns_writes_each_interval_from_its_own_render(
        tmp_path, engine, schema):
    """SQLMesh calls such a function at every render: each daily batch gets its own day, and the
    parent's columns (known at load only once the parents are) are the real ones."""
    files = {"models/orders.sql": ORDERS, "models/m.py": PER_RENDER.replace("{s}", schema)}
    ctx = Context(project(tmp_path, schema, files), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-04"))
    assert rows(ctx, f"SELECT CAST(ds AS STRING), COUNT(*), SUM(amount) FROM {schema}.per_day GROUP BY ds "
                     "ORDER BY ds") == [("2024-01-01", 3, 8.0), ("2024-01-02", 3, 8.0), ("2024-01-03", 3, 8.0)]


DECIMALS = """
from decimal import Decimal

import pandas as pd

from mesh_dagster import model


@model("{s}.prices", kind="FULL", columns={"id": "int", "price": "double", "exact": "decimal(10,2)"})
def execute(context, start, end, execution_time):
    values = [Decimal("1.50"), None, Decimal("12345678.125")]
    return pd.DataFrame({"id": [1, 2, 3], "price": values, "exact": values})
"""


def test_decimal_values_of_a_pandas_frame_reach_double_and_decimal_columns(tmp_path, engine, schema):
    """Python `Decimal`s (what database drivers and money code hand over) fit any declared numeric
    type, cast by Spark's rules; Spark alone would refuse them for a DOUBLE column."""
    ctx = Context(project(tmp_path, schema, {"models/prices.py": DECIMALS}), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    got = rows(ctx, f"SELECT id, price, CAST(exact AS STRING) FROM {schema}.prices ORDER BY id")
    assert got == [(1, 1.5, "1.50"), (2, None, None), (3, 12345678.125, "12345678.13")]


KEYWORD_CONTEXT = """
import typing as t

from sqlmesh import model


@model("{s}.by_keyword", columns={"customer": "string", "n": "bigint", "day": "date"},
       kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="day", batch_size=1))
def execute(start, end, **kwargs: t.Any):
    context = kwargs["context"]
    orders = context.spark.table(context.table("{s}.orders"))
    return orders.groupBy("customer").count().withColumnRenamed("count", "n").selectExpr(
        "customer", "n", f"DATE '{start:%Y-%m-%d}' AS day")
"""


def test_a_function_written_for_sqlmesh_gets_the_context_by_keyword_and_reads_with_table(tmp_path, engine, schema):
    """SQLMesh calls a model function with `context=` as a keyword: `def execute(start, end, **kwargs)`
    finds it in its keyword arguments, and `context.table` is SQLMesh's `resolve_table`."""
    ctx = Context(project(tmp_path, schema, {"models/orders.sql": ORDERS, "models/by_keyword.py": KEYWORD_CONTEXT}),
                  engine=engine)
    assert ctx.project.parents(f"{schema}.by_keyword") == [f"{schema}.orders"]
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-03"))
    assert rows(ctx, f"SELECT customer, n, CAST(day AS STRING) FROM {schema}.by_keyword ORDER BY day, customer") == [
        ("a", 2, "2024-01-01"), ("b", 1, "2024-01-01"), ("a", 2, "2024-01-02"), ("b", 1, "2024-01-02")]


def test_a_helper_module_finds_its_data_file_through_file_when_the_stored_code_runs(tmp_path, engine, schema):
    """The stored code runs with each piece's `__file__` in the project it runs for."""
    helper = ("from pathlib import Path\n\n\ndef rates():\n"
              "    return (Path(__file__).parent / 'rates.csv').read_text().split()\n")
    model = ("import pandas as pd\nfrom models.lib.rates import rates\nfrom sqlmesh import model\n\n\n"
             "@model('{s}.rates', columns={'rate': 'string'})\n"
             "def execute(context, **kwargs):\n    return pd.DataFrame({'rate': rates()})\n")
    ctx = Context(project(tmp_path, schema, {"models/lib/rates.py": helper, "models/lib/rates.csv": "a\nb\n",
                                             "models/rates.py": model}), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert rows(ctx, f"SELECT rate FROM {schema}.rates ORDER BY rate") == [("a",), ("b",)]
