"""Python models at load time (no Spark): the decorator read like a MODEL block, its errors at the
file and line of the argument, dependencies from `resolve_table`, the stored code and the
fingerprint it gives, and the categorization of a change."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import FullKind
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.snapshots.snapshot import SnapshotFingerprint

CONFIG = """model_defaults:
  dialect: spark
  start: 2020-01-01
  cron: '@daily'
  owner: data-team
variables:
  factor: 3
  unused: 1
"""
ORDERS = "MODEL (name s.orders, kind FULL);\nSELECT 1 AS id, DATE'2020-01-01' AS ds, 2.5 AS amount\n"
MACROS = '''\
from mesh_dagster import macro


@macro()
def batch_label(evaluator):
    return "'v1'"


def scale(value):
    return value * 2
'''
# Line numbers matter: the tests below point at them.
MODEL = '''\
import pandas as pd

from mesh_dagster import ExecutionContext, model
from mesh_user_macros.helpers import scale

RATE = 3


def helper(value):
    return value * RATE


def unrelated():
    return "not used by the model"


@model(
    "s.py",
    columns={"id": "int", "ds": "date", "amount": "double"},
    grain=["id"],
    pre_statements=["SELECT @batch_label()"],
    description="orders, scaled",
)
def execute(context: ExecutionContext, start, end, execution_time, factor=1):
    orders = context.resolve_table("s.orders")
    return pd.DataFrame({"id": [1], "ds": [start.date()], "amount": [helper(scale(factor))]})
'''
DECORATOR_LINE, DEF_LINE, READ_LINE = 17, 24, 25


def project_files(model: str = MODEL, **extra: str) -> dict[str, str]:
    return {"models/orders.sql": ORDERS, "macros/helpers.py": MACROS, "models/py.py": model, **extra}


def write(tmp_path: Path, files: dict[str, str], name: str = "p") -> Path:
    root = write_project(tmp_path / name, {})
    (root / "config.yaml").write_text(CONFIG)
    for rel, text in files.items():  # not dedented: Python files are written exactly
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def load(tmp_path: Path, files: dict[str, str], name: str = "p"):
    return load_project(write(tmp_path, files, name), use_cache=False)


def model_file(*arguments: str, body: str = "    return pd.DataFrame({'id': [1]})\n",
               signature: str = "context, start, end, execution_time", prelude: str = "") -> str:
    """A model file whose `@model(` is on line 4 (after `prelude`'s lines), its name on line 5 and
    each argument on a line of its own after it."""
    args = "".join(f"    {a},\n" for a in arguments)
    return (f"import pandas as pd\nfrom mesh_dagster import model\n{prelude}\n"
            f"@model(\n    \"s.m\",\n{args})\ndef execute({signature}):\n{body}")


# ---------------------------------------------------------------------------------------------
# Loading


def test_audits_are_also_sqlmeshs_name_and_arguments_pairs(tmp_path):
    """`audits=[("not_null", {"columns": [to_column("id")]})]`, as SQLMesh documents it: sqlglot
    expressions stay expressions (a column), Python values become SQL literals — a string is a
    string literal, not a column (SQLMesh's docs write `to_column("id")` for that reason)."""
    audits = ("audits=[('not_null', {'columns': [to_column('id'), to_column('ds')]}), "
              "('accepted_values', {'column': to_column('id'), 'is_in': [1, 2], 'blocking': False}), "
              "('accepted_values', {'column': to_column('ds'), 'is_in': ['a', \"it's\"]}), "
              "('number_of_rows', {'threshold': 3}), 'unique_values(columns := (id))']")
    m = load(tmp_path, {"models/m.py": model_file("columns={'id': 'int', 'ds': 'string'}", audits,
                                                  prelude="from sqlglot.expressions import to_column")}).models["s.m"]
    assert [a.blocking for a in m.audits] == [None, False, None, None, None]
    assert [(a.name, a.args) for a in m.audits] == [
        ("not_null", {"columns": "(id, ds)"}), ("accepted_values", {"column": "id", "is_in": "(1, 2)"}),
        ("accepted_values", {"column": "ds", "is_in": "('a', 'it\\'s')"}), ("number_of_rows", {"threshold": "3"}),
        ("unique_values", {"columns": "(id)"})]


def test_python_model_loads_with_its_properties_defaults_and_dependencies(tmp_path):
    project = load(tmp_path, project_files())
    m = project.models["s.py"]
    assert m.is_python and m.query is None and isinstance(m.kind, FullKind)  # FULL by default
    assert m.columns == {"id": "INT", "ds": "DATE", "amount": "DOUBLE"}
    assert (m.grain, m.description, m.pre_statements) == (["id"], "orders, scaled", ["SELECT @batch_label()"])
    assert (m.cron, m.start, m.owner) == ("@daily", "2020-01-01", "data-team")  # model_defaults apply
    assert (m.path, m.line, m.query_line) == ("models/py.py", DECORATOR_LINE, DEF_LINE)
    assert m.property_lines["grain"] == DECORATOR_LINE + 3 and m.property_lines["columns"] == DECORATOR_LINE + 2
    assert project.parents("s.py") == ["s.orders"]  # from context.resolve_table("s.orders")
    code = m.python
    assert code is not None and code.entrypoint == "execute"
    assert code.variables == ["factor"]  # the parameter named like a config variable
    assert [(r.name, r.path, r.line) for r in code.reads] == [("s.orders", "models/py.py", READ_LINE)]


def test_stored_code_is_what_the_function_reaches_and_runs_without_the_file(tmp_path):
    root = write(tmp_path, project_files())
    code = load_project(root, use_cache=False).models["s.py"].python
    assert code is not None
    source = code.source()
    assert "import pandas as pd" in source and "from mesh_dagster import ExecutionContext" in source
    assert "RATE = 3" in source and "def helper(value):" in source
    assert "def scale(value):" in source  # imported from macros/: its code is stored, not the import
    assert "unrelated" not in source and "@model" not in source and "batch_label" not in source
    assert code.env["execute"].line == DEF_LINE and code.env["helper"].line == 9
    assert code.env["scale"].path == "macros/helpers.py"

    (root / "models" / "py.py").unlink()
    (root / "macros" / "helpers.py").unlink()
    fn = code.function()
    frame = fn(Resolver(), start=pd_timestamp("2024-01-01"), end=None, execution_time=None, factor=2)
    assert frame.to_dict("list") == {"id": [1], "ds": [pd_timestamp("2024-01-01").date()], "amount": [12]}


class Resolver:
    def resolve_table(self, name: str) -> str:
        return name


def pd_timestamp(text: str):
    import pandas as pd

    return pd.Timestamp(text, tz="UTC").to_pydatetime()


def test_stored_code_survives_the_state_store_and_keeps_lazy_annotations(tmp_path):
    """A file with `from __future__ import annotations` may annotate with names it imports only for
    type checkers: the stored code is compiled the same way, so defining the function never
    evaluates them."""
    source = model_file("columns={'id': 'int'}", signature="context: ExecutionContext, start, end, execution_time",
                        body="    return pd.DataFrame({'id': [1]})\n",
                        prelude="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from mesh_dagster import ExecutionContext\n")
    project = load(tmp_path, {"models/m.py": "from __future__ import annotations\n" + source})
    snapshot = build_snapshots(project)["s.m"]
    stored = type(snapshot).model_validate_json(snapshot.model_dump_json())
    assert stored == snapshot and stored.model.python is not None
    assert stored.model.python.function()(None, None, None, None).to_dict("list") == {"id": [1]}


def test_helpers_defined_inside_blocks_are_stored_from_their_source(tmp_path):
    prelude = ("try:\n    import no_such_json_library as json\nexcept ImportError:\n    import json\n"
               "if True:\n    def encode(value):\n        return json.dumps(value)\n"
               "    class Box:\n        size = 2\n")
    source = model_file("columns={'id': 'int', 'text': 'string'}", prelude=prelude,
                        body="    return pd.DataFrame({'id': [Box.size], 'text': [encode([1])]})\n")
    code = load(tmp_path, {"models/m.py": source}).models["s.m"].python
    assert code is not None
    assert code.env["encode"].text.startswith("def encode(value):") and code.env["encode"].line == 8
    assert code.env["Box"].text.startswith("class Box:") and code.env["json"].kind == "import"
    frame = code.function()(None, None, None, None)
    assert frame.to_dict("list") == {"id": [2], "text": ["[1]"]}


def test_no_model_module_stays_imported_and_projects_do_not_mix(tmp_path):
    first = load(tmp_path, project_files(), "a")
    assert not [name for name in sys.modules if name.startswith("mesh_user_models")]
    second = load(tmp_path, project_files(MODEL.replace("RATE = 3", "RATE = 4")), "b")
    assert "RATE = 3" in first.models["s.py"].python.source()
    assert "RATE = 4" in second.models["s.py"].python.source()


def test_kind_properties_are_read_exactly_as_in_sql(tmp_path):
    sql = ("MODEL (name s.sql_twin, kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 2, "
           "lookback 1, batch_concurrency 2, forward_only true, on_destructive_change warn), cron '@weekly');\n"
           "SELECT CAST(1 AS INT) AS id, CAST(NULL AS DATE) AS ds\n")
    python = model_file(
        "kind=dict(name='INCREMENTAL_BY_TIME_RANGE', time_column=('ds', '%Y-%m-%d'), batch_size=2, lookback=1, "
        "batch_concurrency=2, forward_only=True, on_destructive_change='warn')",
        "cron='@weekly'", "columns={'id': 'int', 'ds': 'date'}")
    project = load(tmp_path, {"models/twin.sql": sql, "models/m.py": python})
    twin, m = project.models["s.sql_twin"], project.models["s.m"]
    assert m.kind == twin.kind and m.kind.batch_size == 2 and m.forward_only
    assert m.effective_partitioned_by == ["ds"]
    full = load(tmp_path, {"models/m.py": model_file("kind='full'", "columns={'id': 'int'}")}, "full").models["s.m"]
    assert isinstance(full.kind, FullKind)


# ---------------------------------------------------------------------------------------------
# Errors, at the file and line of what is wrong


@pytest.mark.parametrize("source, where, message", [
    (model_file("columns={'id': 'int'}", "colour='red'"), "models/m.py:7", "Unknown model property 'colour'"),
    (model_file("columns={'id': 'int'}", "gateway='other'"), "models/m.py:7",
     "Property 'gateway' is not supported by mesh_dagster yet"),
    (model_file("columns={'id': 'int'}", "cron_tz='Mars/Olympus'"), "models/m.py:7", "Unknown time zone 'Mars/Olympus'"),
    (model_file("columns={'id': 'int'}", "on_virtual_update=['GRANT x']"), "models/m.py:7",
     "@model argument 'on_virtual_update' is not supported"),
    (model_file("columns={'id': 'int'}", "is_sql='yes'"), "models/m.py:7", "is_sql is True or False"),
    (model_file("grain=['id']"), "models/m.py:4", "Python model s.m needs columns={\"column\": \"type\", ...}"),
    (model_file("columns={'id': 'no_such_type'}"), "models/m.py:6", "Invalid type for column 'id'"),
    (model_file("columns=['id']"), "models/m.py:6", "columns is written columns={"),
    (model_file("columns={'id': 'int'}", "kind='VIEW'"), "models/m.py:7", "Python models cannot be VIEW models"),
    (model_file("columns={'id': 'int'}", "kind='EMBEDDED'"), "models/m.py:7",
     "Python models cannot be EMBEDDED models"),
    (model_file("columns={'id': 'int'}", "kind=dict(name='SEED', path='x.csv')"), "models/m.py:7",
     "Python models cannot be SEED models"),
    (model_file("columns={'id': 'int'}", "kind='INCREMENTAL_BY_UNIQUE_KEY'"), "models/m.py:7",
     "INCREMENTAL_BY_UNIQUE_KEY models need a unique_key"),
    (model_file("columns={'id': 'int'}", "kind='MANAGED'"), "models/m.py:7",
     "Model kind MANAGED is not supported by mesh_dagster yet"),
    (model_file("columns={'id': 'int'}", "kind='NOPE'"), "models/m.py:7", "Unknown model kind 'NOPE'"),
    (model_file("columns={'id': 'int'}", "kind=7"), "models/m.py:7", "kind is a kind name"),
    (model_file("columns={'ds': 'date'}", "kind=dict(name='INCREMENTAL_BY_TIME_RANGE')"), "models/m.py:7",
     "INCREMENTAL_BY_TIME_RANGE models need a time_column"),
    (model_file("columns={'ds': 'date'}", "kind=dict(name='INCREMENTAL_BY_TIME_RANGE', time_column='ds', "
                "batch_size='x')"), "models/m.py:7", "batch_size must be an integer, got 'x'"),
    (model_file("columns={'ds': 'date'}", "kind=dict(name='FULL', time_column='ds')"), "models/m.py:7",
     "Unknown property 'time_column' for kind FULL"),
    (model_file("columns={'id': 'int'}", "cron='every day'"), "models/m.py:7", "Invalid cron 'every day'"),
    (model_file("columns={'id': 'int'}", "start='2021-01-01'", "end='2020-01-01'"), "models/m.py:8",
     "end '2020-01-01' is before start '2021-01-01'"),
    (model_file("columns={'id': 'int'}", "audits=['no_such_audit']"), "models/m.py:7",
     "uses unknown audit 'no_such_audit'"),
    (model_file("columns={'id': 'int'}", "audits=[('not_null', {'columns': object()})]"), "models/m.py:7",
     "audits: argument 'columns' cannot be a object (write a string, a number, a boolean, a sqlglot expression such as to_column('id'), or a list of them)"),
    (model_file("columns={'id': 'int'}", "audits=[('not_null', ['id'])]"), "models/m.py:7",
     "audits is a list of audits written as in SQL, e.g. [\"not_null(columns := (id))\"], or of (name, "
     "{argument: value}) pairs"),
    (model_file("columns={'id': 'int'}", "owner=object()"), "models/m.py:7", "'owner' cannot be a object"),
    (model_file("columns={'id': 'int'}", "post_statements=[1]"), "models/m.py:7", "post_statements is a list"),
    (model_file("columns={'id': 'int'}", "name='s.other'"), "models/m.py:4",
     "Cannot import the Python model file: TypeError: model() got multiple values for argument 'name'"),
    (model_file("columns={'id': 'int'}").replace('"s.m"', "42"), "models/m.py:5", "The model's name must be a string"),
    (model_file("columns={'id': 'int'}").replace('"s.m"', '"a.b.c"'), "models/m.py:5",
     "Model name 'a.b.c' is not supported"),
    ("from mesh_dagster import model\n\n@model\ndef execute(context):\n    return None\n", "models/m.py:3",
     "The model's name is missing"),
    (model_file("columns={'id': 'int'}", signature=""), "models/m.py:8",
     "execute() must take the execution context, as its first parameter or in its keyword arguments"),
    (model_file("columns={'id': 'int'}", signature="start, end"), "models/m.py:8",
     "execute() must take the execution context, as its first parameter or in its keyword arguments"),
    (model_file("columns={'id': 'int'}", signature="context, threshold"), "models/m.py:8",
     "parameter 'threshold' has no default and no config variable 'threshold' is defined"),
    ("import pandas as pd\n\nraise RuntimeError('no connection')\n", "models/m.py:3",
     "Cannot import the Python model file: RuntimeError: no connection"),
    ("def execute(context:\n", "models/m.py:1", "Cannot import the Python model file: SyntaxError"),
    ("import pandas as pd\n\n\ndef execute(context):\n    return pd.DataFrame()\n", "models/m.py:4",
     "This Python file in models/ defines no model, but a function named 'execute': decorate it with @model("),
    (model_file("columns={'id': 'int'}") + "\n\n@model('s.n', columns={'id': 'int'})\ndef execute(context):\n"
     "    return None\n", "models/m.py:4", "The model function 'execute' is not reachable by its name"),
    (model_file("columns={'id': 'int'}", body="    return helper()\n",
                prelude="try:\n    helper = object()\nexcept ImportError:\n    helper = None\n"),
     "models/m.py:13", "The model uses the global 'helper' (a object), which cannot be stored"),
    (model_file("columns={'id': 'int'}", body="    return helper()\n", prelude="from .shared import helper\n"),
     "models/m.py:3", "Python model files cannot use relative imports"),
])
def test_bad_python_model_is_refused_at_its_line(tmp_path, source, where, message):
    with pytest.raises(ModelError) as e:
        load(tmp_path, {"models/m.py": source})
    assert str(e.value).startswith(f"{where}: "), str(e.value)
    assert message in str(e.value)


READS = "    return context.resolve_table({!r})\n"


@pytest.mark.parametrize("arguments, body, where, message", [
    (["columns={'id': 'int'}", "depends_on=['s.orders']"], READS.format("s.other"), "models/m.py:10",
     "resolve_table('s.other') reads a model missing from depends_on (s.orders)"),
    (["columns={'id': 'int'}"], "    return context.resolve_table('s.' + 'orders')\n", "models/m.py:9",
     "resolve_table is called with a computed name"),
    (["columns={'id': 'int'}"], READS.format("a.b.c"), "models/m.py:9", "resolve_table: Model name 'a.b.c'"),
    (["columns={'id': 'int'}"], "    ORDERS = 's.other'\n    return context.resolve_table(ORDERS)\n", "models/m.py:10",
     "resolve_table is called with a computed name"),  # a local, though a module constant has its name
    (["columns={'id': 'int'}"], "    return context.snapshots\n", "models/m.py:9",
     "context.snapshots is not part of mesh_dagster's execution context (it offers blueprint_var, end, engine_adapter, "
     "execution_time, fetchdf, resolve_table, spark, start, table, var)"),
    (["columns={'id': 'int'}", "depends_on=['s.orders']"], "    return context.table('s.other')\n", "models/m.py:10",
     "resolve_table('s.other') reads a model missing from depends_on (s.orders)"),
    (["columns={'id': 'int'}"], "    context.engine_adapter.execute('DROP TABLE x')\n", "models/m.py:9",
     "context.engine_adapter.execute is not supported by mesh_dagster (its engine adapter offers columns, dialect, "
     "fetch_pyspark_df, fetchall, fetchdf, fetchone, spark, table_exists)"),
    (["columns={'id': 'int'}"], READS.format("s.emb"), "models/m.py:9",
     "s.emb is an EMBEDDED model: it has no table a Python model can read"),
])
def test_bad_dependency_is_refused_at_the_call(tmp_path, arguments, body, where, message):
    files = {"models/orders.sql": ORDERS, "models/other.sql": "MODEL (name s.other, kind FULL);\nSELECT 1 AS id\n",
             "models/emb.sql": "MODEL (name s.emb, kind EMBEDDED);\nSELECT 1 AS id\n",
             "models/m.py": model_file(*arguments, body=body)}
    with pytest.raises(ModelError) as e:
        load(tmp_path, files)
    assert str(e.value).startswith(f"{where}: ") and message in str(e.value), str(e.value)


IS_SQL = """from sqlglot import exp
from mesh_dagster import model


@model("s.by_sql", is_sql=True, kind="FULL")
def entrypoint(evaluator):
    return f"SELECT id, {evaluator.var('factor', 2)} * 1 AS factor FROM s.orders WHERE id > 0"


@model("s.by_expr", is_sql=True, kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"))
def by_expression(evaluator):
    return exp.select("id", "ds").from_("s.orders").where("ds BETWEEN @start_ds AND @end_ds")
"""


def test_is_sql_models_are_sql_models_whose_query_python_returns(tmp_path):
    """SQLMesh's `is_sql=True`: the function, given a macro evaluator, returns the query (text or a
    sqlglot expression); the model is then a SQL model: columns and dependencies from its query."""
    orders = "MODEL (name s.orders, kind FULL);\nSELECT 1 AS id, CAST('2020-01-01' AS DATE) AS ds\n"
    project = load(tmp_path, {"models/orders.sql": orders, "models/m.py": IS_SQL})
    by_sql, by_expr = project.models["s.by_sql"], project.models["s.by_expr"]
    assert not by_sql.is_python and by_sql.query == "SELECT id, 3 * 1 AS factor FROM s.orders WHERE id > 0"
    assert by_expr.query == "SELECT id, ds FROM s.orders WHERE ds BETWEEN @start_ds AND @end_ds"
    assert project.parents("s.by_sql") == ["s.orders"] == project.parents("s.by_expr")
    assert (by_sql.path, by_sql.query_line, by_expr.kind.time_column) == ("models/m.py", 6, "ds")


PER_RENDER = """\
from sqlglot import exp

from sqlmesh import model


@model("s.by_columns", is_sql=True, kind="FULL")
def by_columns(evaluator):
    columns = [c for c in evaluator.columns_to_types("s.orders") if c != "ds"]
    return exp.select(*columns).from_("s.orders")


@model("s.by_locals", is_sql=True, kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds"))
def by_locals(evaluator):
    start, end = evaluator.locals["start_date"], evaluator.locals.get("end_ds")
    return f"SELECT id, ds FROM s.orders WHERE ds BETWEEN DATE '{start.isoformat()}' AND DATE '{end}'"
"""


def test_is_sql_functions_reading_columns_or_locals_run_at_every_render(tmp_path):
    """As in SQLMesh: a function reading the parents' columns or the render's locals is called as a
    macro at every render (its query depends on them), and captured with the snapshot."""
    from datetime import UTC, datetime

    from mesh_dagster.core.snapshots.fingerprint import build_snapshots
    from mesh_dagster.core.sql.renderer import RenderContext, render_sql

    orders = "MODEL (name s.orders, kind FULL);\nSELECT 1 AS id, 'x' AS label, CAST('2020-01-01' AS DATE) AS ds\n"
    project = load(tmp_path, {"models/orders.sql": orders, "models/m.py": PER_RENDER})
    by_columns, by_locals = project.models["s.by_columns"], project.models["s.by_locals"]
    assert (by_columns.query, by_locals.query) == ("@is_sql__s_by_columns()", "@is_sql__s_by_locals()")
    assert project.parents("s.by_columns") == ["s.orders"] == project.parents("s.by_locals")
    assert project.columns("s.by_columns") == {"id": "INT", "label": "STRING"}  # the parents' real columns
    snapshots = build_snapshots(project)
    captured = snapshots["s.by_locals"].capture
    registry = captured.macro_registry(tmp_path)  # what an evaluation from the stored snapshot renders with
    ctx = RenderContext(start=datetime(2024, 1, 3, tzinfo=UTC), end=datetime(2024, 1, 4, tzinfo=UTC))
    sql = render_sql(by_locals, ctx, registry)
    assert "ds BETWEEN CAST('2024-01-03' AS DATE) AND CAST('2024-01-03' AS DATE)" in sql  # this interval's
    assert "@model" not in captured.macros["is_sql__s_by_locals"].env["by_locals"].text  # decorator left out


@pytest.mark.parametrize("body, where, message", [
    ("    return evaluator.locals['start_ds'] + 1\n", "models/m.py:6",
     "The is_sql model function entrypoint failed as the project loaded (it runs then, with the macro evaluator "
     "of a load): TypeError: can only concatenate str (not \"int\") to str"),
    ("    return 42\n", "models/m.py:5",
     "The is_sql model function entrypoint must return its query (SQL text or a sqlglot expression), got int"),
])
def test_a_failing_is_sql_function_is_refused_at_its_line(tmp_path, body, where, message):
    source = ("from mesh_dagster import model\n\n\n@model('s.m', is_sql=True)\n"
              f"def entrypoint(evaluator):\n{body}")
    with pytest.raises(ModelError) as e:
        load(tmp_path, {"models/m.py": source})
    assert str(e.value) == f"{where}: {message}"


@pytest.mark.parametrize("signature, body", [
    ("context, start, end, execution_time", "    return context.table('s.orders')\n"),
    ("start, end, **kwargs", "    context = kwargs['context']\n    return context.table('s.orders')\n"),
    ("start, end, execution_time, **kwargs", "    return kwargs['context'].table('s.orders')\n"),
])
def test_sqlmeshs_context_table_is_a_dependency_and_the_context_may_come_by_keyword(tmp_path, signature, body):
    """SQLMesh calls a model function with `context=` as a keyword, and names `resolve_table` `table`."""
    project = load(tmp_path, {"models/orders.sql": ORDERS, "models/m.py": model_file(
        "columns={'id': 'int'}", signature=signature, body=body)})
    assert project.parents("s.m") == ["s.orders"]


@pytest.mark.parametrize("written, as_dict", [
    ("IncrementalByTimeRangeKind(time_column=TimeColumn(column='ds', format='%Y%m%d'), batch_size=1, lookback=2)",
     "dict(name='INCREMENTAL_BY_TIME_RANGE', time_column=('ds', '%Y%m%d'), batch_size=1, lookback=2)"),
    ("IncrementalByTimeRangeKind(time_column='ds')", "dict(name='INCREMENTAL_BY_TIME_RANGE', time_column='ds')"),
    ("IncrementalByUniqueKeyKind(unique_key=['id'], batch_size=3)",
     "dict(name='INCREMENTAL_BY_UNIQUE_KEY', unique_key=['id'], batch_size=3)"),
    ("SCDType2ByColumnKind(unique_key=['id'], columns=['v'])",
     "dict(name='SCD_TYPE_2_BY_COLUMN', unique_key=['id'], columns=['v'])"),
    ("FullKind()", "'FULL'"),
])
def test_sqlmeshs_kind_classes_are_read_as_the_kind_dict(tmp_path, written, as_dict):
    prelude = ("from sqlmesh.core.model.kind import IncrementalByTimeRangeKind, IncrementalByUniqueKeyKind, "
               "SCDType2ByColumnKind, TimeColumn\nfrom sqlmesh.core.model import FullKind\n")
    columns = "columns={'id': 'int', 'ds': 'string', 'v': 'int'}"
    by_class = load(tmp_path, {"models/m.py": model_file(columns, f"kind={written}", prelude=prelude)}, "a")
    by_dict = load(tmp_path, {"models/m.py": model_file(columns, f"kind={as_dict}", prelude=prelude)}, "b")
    assert by_class.models["s.m"].kind == by_dict.models["s.m"].kind


def test_a_bad_property_of_a_sqlmesh_kind_class_is_refused_at_the_decorator(tmp_path):
    prelude = "from sqlmesh.core.model.kind import IncrementalByTimeRangeKind\n"
    source = model_file("columns={'ds': 'string'}", "kind=IncrementalByTimeRangeKind(time_column='ds', batch_size=0)",
                        prelude=prelude)
    with pytest.raises(ModelError, match=r"^models/m\.py:8: .*batch_size"):
        load(tmp_path, {"models/m.py": source})


def test_a_helper_module_in_models_is_imported_by_the_models_not_refused(tmp_path):
    """SQLMesh projects keep shared helpers in `models/` (`from models.src.shared import ...`)."""
    shared = "DEFAULT_ID = 7\n\n\ndef frame(value):\n    import pandas as pd\n    return pd.DataFrame({'id': [value]})\n"
    model = model_file("columns={'id': 'int'}", body="    return frame(DEFAULT_ID)\n",
                       prelude="from models.src.shared import DEFAULT_ID, frame\n")
    project = load(tmp_path, {"models/src/shared.py": shared, "models/m.py": model})
    assert sorted(project.models) == ["s.m"]
    code = project.models["s.m"].python
    assert code is not None and code.function()(None, None, None, None).to_dict("list") == {"id": [7]}  # the helper stored with it


def test_each_stored_piece_finds_its_own_file_where_the_project_is_now(tmp_path):
    """`__file__` in a helper module the model imports is that module's file (a data file beside
    it), the model's own is the model's: in the folder of the project the stored code runs for."""
    helper = ("from pathlib import Path\n\nHERE = Path(__file__).parent\n\n\ndef data_file():\n"
              "    return str(Path(__file__).parent / 'rates.csv')\n")
    model = model_file("columns={'here': 'string', 'data': 'string', 'mine': 'string'}",
                       body="    return pd.DataFrame({'here': [str(HERE)], 'data': [data_file()], 'mine': [MINE]})\n",
                       prelude="from pathlib import Path\nfrom models.lib.helpers import HERE, data_file\n"
                               "MINE = Path(__file__).name\n")
    code = load(tmp_path, {"models/lib/helpers.py": helper, "models/m.py": model}).models["s.m"].python
    moved = tmp_path / "elsewhere"  # the stored code, run for the project where it is now
    assert code is not None and code.function(moved)(None, None, None, None).to_dict("list") == {
        "here": [str(moved / "models" / "lib")], "data": [str(moved / "models" / "lib" / "rates.csv")],
        "mine": ["m.py"]}


def test_sparks_own_table_call_is_no_dependency(tmp_path):
    """`spark.table(...)` is Spark's, not the context's: neither a dependency nor a computed-name refusal."""
    body = "    name = 'raw.' + 'events'\n    return context.spark.table(name).union(context.spark.table('s.x'))\n"
    model = load(tmp_path, {"models/orders.sql": ORDERS, "models/m.py": model_file(
        "columns={'id': 'int'}", "depends_on=['s.orders']", body=body)}).models["s.m"]
    assert model.python is not None and model.python.reads == [] and model.python.dynamic_reads == []


def test_a_module_constant_read_by_name_is_a_dependency(tmp_path):
    """`resolve_table(ORDERS)` with `ORDERS = "s.orders"` at the top of the file (or imported): the
    dependency is inferred, as SQLMesh does, and the constant is stored with the model."""
    files = {"models/orders.sql": ORDERS, "models/m.py": model_file(
        "columns={'id': 'int'}", body="    return context.resolve_table(ORDERS)\n", prelude="ORDERS = 's.orders'")}
    project = load(tmp_path, files)
    assert project.parents("s.m") == ["s.orders"]
    assert "ORDERS = 's.orders'" in {piece.text for piece in project.models["s.m"].python.env.values()}


def test_an_unknown_table_read_is_an_implicit_external_model(tmp_path):
    files = {"models/orders.sql": ORDERS, "models/m.py": model_file("columns={'id': 'int'}",
                                                                    body=READS.format("s.nope"))}
    project = load(tmp_path, files)
    assert project.parents("s.m") == ["s.nope"] and project.models["s.nope"].kind.is_external
    assert any(w.startswith("models/m.py:9: s.m reads s.nope, which is neither a model nor declared")
               for w in project.warnings), project.warnings


def test_depends_on_replaces_inferred_dependencies(tmp_path):
    files = {"models/orders.sql": ORDERS, "models/other.sql": "MODEL (name s.other, kind FULL);\nSELECT 1 AS id\n",
             "models/m.py": model_file("columns={'id': 'int'}", "depends_on=['s.other', 's.orders']",
                                       body="    name = 's.orders'\n    return context.resolve_table(name)\n")}
    assert sorted(load(tmp_path, files).parents("s.m")) == ["s.orders", "s.other"]
    files["models/m.py"] = model_file("columns={'id': 'int'}", "depends_on=['s.other']",
                                      body="    return None\n")
    assert load(tmp_path, files, "q").parents("s.m") == ["s.other"]


# ---------------------------------------------------------------------------------------------
# Fingerprints


def fingerprint(tmp_path: Path, name: str, model: str = MODEL, macros: str = MACROS,
                config: str = CONFIG) -> SnapshotFingerprint:
    root = write(tmp_path, project_files(model, **{"macros/helpers.py": macros}), name)
    (root / "config.yaml").write_text(config)
    return build_snapshots(load_project(root, use_cache=False))["s.py"].fingerprint


@pytest.mark.parametrize("what, model, macros, config", [
    ("the function", MODEL.replace("[1], \"ds\"", "[2], \"ds\""), MACROS, CONFIG),
    ("a helper it calls", MODEL.replace("return value * RATE", "return value * RATE + 1"), MACROS, CONFIG),
    ("a global it reads", MODEL.replace("RATE = 3", "RATE = 5"), MACROS, CONFIG),
    ("a macro function it imports", MODEL, MACROS.replace("value * 2", "value * 3"), CONFIG),
    ("a macro its SQL statements call", MODEL, MACROS.replace("'v1'", "'v2'"), CONFIG),
    ("a config variable a parameter takes", MODEL, MACROS, CONFIG.replace("factor: 3", "factor: 4")),
])
def test_data_hash_follows_the_code_the_model_runs(tmp_path, what, model, macros, config):
    base = fingerprint(tmp_path, "base")
    changed = fingerprint(tmp_path, "changed", model, macros, config)
    assert changed.data_hash != base.data_hash, what


@pytest.mark.parametrize("what, model, macros, config", [
    ("an unrelated function", MODEL.replace("not used by the model", "still unused"), MACROS, CONFIG),
    ("an unrelated macro file function", MODEL, MACROS + "\n\ndef other():\n    return 1\n", CONFIG),
    ("an unused variable", MODEL, MACROS, CONFIG.replace("unused: 1", "unused: 2")),
])
def test_fingerprint_ignores_code_the_model_does_not_run(tmp_path, what, model, macros, config):
    assert fingerprint(tmp_path, "changed", model, macros, config) == fingerprint(tmp_path, "base"), what


def test_moving_the_code_changes_metadata_only(tmp_path):
    base = fingerprint(tmp_path, "base")
    moved = fingerprint(tmp_path, "moved", "\n\n" + MODEL)
    assert moved.data_hash == base.data_hash and moved.metadata_hash != base.metadata_hash


# ---------------------------------------------------------------------------------------------
# Categorization


CHILD = "MODEL (name s.child, kind FULL);\nSELECT id, amount FROM s.py\n"


@pytest.mark.parametrize("old, new, category, child", [
    ("\"amount\": [helper(", "\"amount\": [1 + helper(", C.BREAKING, C.INDIRECT_BREAKING),
    # Adding a column is non-breaking for a SQL model; a Python model's change cannot be compared.
    ("\"amount\": \"double\"}", "\"amount\": \"double\", \"extra\": \"int\"}", C.BREAKING, C.INDIRECT_BREAKING),
    ("description=\"orders, scaled\"", "description=\"orders\"", C.METADATA, C.METADATA),
    ("RATE = 3\n", "# the rate\nRATE = 3\n", C.METADATA, C.METADATA),  # moved lines: same code
])
def test_a_changed_python_model_is_breaking(tmp_path, state, old, new, category, child):
    root = write(tmp_path, project_files(**{"models/child.sql": CHILD}))
    record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-05"), state)
    path = root / "models" / "py.py"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    plan = build_plan(load_project(root, use_cache=False), state, "dev", execution_time="2020-01-05")
    assert plan.category("s.py") == category and plan.category("s.child") == child
    assert ("s.py" in plan.backfills) == (category == C.BREAKING)
    if old.startswith("\"amount\": [helper("):
        assert "+    return pd.DataFrame({\"id\": [1], \"ds\": [start.date()], \"amount\": [1 + helper(" \
            in plan.diffs["s.py"]
