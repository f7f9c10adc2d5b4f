"""SparkEngine and build_session against a real local Spark (one session per test process)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.adapter import SparkEngine, quote_name
from mesh_dagster.engine.session import SparkSQLError, local_session_config, spark_error_message, to_engine_error

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted(engine.session.fetchall(sql), key=repr)


# -- session ---------------------------------------------------------------------------------


def test_session_settings(spark, tmp_path_factory) -> None:
    conf = spark.conf
    assert conf.get("spark.sql.catalogImplementation") == "hive"
    assert conf.get("spark.sql.sources.partitionOverwriteMode") == "dynamic"
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("hive.exec.dynamic.partition.mode") == "nonstrict"
    assert conf.get("spark.sql.hive.metastorePartitionPruningFallbackOnException") == "true"
    assert conf.get("spark.sql.shuffle.partitions") == "2"  # the user's config wins over ours (twice the cores)
    warehouse = conf.get("spark.sql.warehouse.dir")
    assert warehouse.endswith("/warehouse") and str(tmp_path_factory.getbasetemp()) in warehouse


def test_a_partition_filter_the_metastore_refuses_is_done_by_spark(engine, unique_schema) -> None:
    """The metastore's ORM path filters string partition keys only; it is taken for a DATE key when
    its direct SQL fails (seen under load: a killed client's statement still holding a lock). A key
    whose name direct SQL cannot filter by reproduces it: the read still answers."""
    engine.catalog.create_schema(unique_schema)
    engine.session.execute(f"CREATE TABLE {unique_schema}.f (id INT, `a b` DATE) USING parquet PARTITIONED BY (`a b`)")
    engine.session.execute(f"INSERT OVERWRITE TABLE {unique_schema}.f VALUES (1, DATE'2020-01-01'), (2, DATE'2020-01-03')")
    sql = f"SELECT COUNT(*) FROM {unique_schema}.f WHERE `a b` BETWEEN DATE'2020-01-01' AND DATE'2020-01-02'"
    assert engine.session.fetchall(sql) == [(1,)]


def test_local_and_cluster_session_config(tmp_path: Path) -> None:
    local = local_session_config(
        SparkConnectionConfig(config={"spark.sql.shuffle.partitions": 8, "spark.driver.extraJavaOptions": "-Dx=1"}),
        tmp_path / ".mesh",
    )
    assert local["spark.sql.warehouse.dir"] == str(tmp_path / ".mesh" / "warehouse")
    assert local["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={tmp_path / '.mesh' / 'metastore_db'};create=true"
    )
    assert local["spark.sql.shuffle.partitions"] == "8"
    assert local["spark.driver.extraJavaOptions"] == (
        f'"-Dderby.system.home={tmp_path / ".mesh"}" '
        f'"-Dlog4j2.configurationFile={tmp_path / ".mesh" / "log4j2.properties"}" '
        f'"-XX:ErrorFile={tmp_path / ".mesh" / "hs_err_pid%p.log"}" -Dx=1'
    )
    assert "rootLogger.level = error" in (tmp_path / ".mesh" / "log4j2.properties").read_text()

    cluster = local_session_config(SparkConnectionConfig(master="spark://spark-master:7077"), tmp_path / ".mesh")
    assert "spark.sql.warehouse.dir" not in cluster
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in cluster
    assert "derby" not in cluster["spark.driver.extraJavaOptions"]
    assert cluster["spark.sql.sources.partitionOverwriteMode"] == "dynamic"


def test_engine_insists_on_dynamic_partition_overwrite(spark) -> None:
    """In STATIC mode INSERT OVERWRITE would delete every partition of the table first."""
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
    SparkEngine(spark)
    assert spark.conf.get("spark.sql.sources.partitionOverwriteMode") == "dynamic"


def test_nothing_is_written_to_the_directory_spark_started_in(engine, unique_schema, spark_launch_dir) -> None:
    table = f"{unique_schema}.t"
    engine.writes.replace_table(table, "SELECT 1 AS id, DATE'2020-01-01' AS ds", ["ds"])
    assert engine.session.fetchall(f"SELECT id FROM {table}") == [(1,)]
    assert list(spark_launch_dir.iterdir()) == []


_QUIET_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import SparkEngine, build_session

spark = build_session(SparkConnectionConfig(master="local[1]"), Path({mesh_dir!r}))
engine = SparkEngine(spark)
engine.catalog.create_schema("quiet")
engine.session.execute("CREATE SCHEMA IF NOT EXISTS quiet")  # the metastore logs this one unless silenced
engine.writes.replace_table("quiet.t", "SELECT 1 AS id, DATE'2020-01-01' AS ds", ["ds"])
assert engine.session.fetchall("SELECT id FROM quiet.t") == [(1,)]
try:
    engine.session.fetchall("SELECT * FROM quiet.missing")
except EngineError as e:
    print(e)
"""

_CONNECT_SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
from pathlib import Path
import pandas as pd
from pyspark.sql import SparkSession
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import SparkEngine
from mesh_dagster.engine.session import local_session_config

builder = SparkSession.builder.remote("local[1]")  # a Spark Connect server in a child JVM
for key, value in local_session_config(SparkConnectionConfig(), Path({mesh_dir!r})).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
e = SparkEngine(spark)
out = {{"session": type(spark).__module__}}
days = "SELECT 1 AS v, DATE'2020-01-01' AS ds UNION ALL SELECT 2, DATE'2020-01-02' UNION ALL SELECT 3, DATE'2020-01-03'"
e.catalog.create_table("c.inc", days, ["ds"])
e.writes.insert_overwrite_interval("c.inc", days, "ds", "DATE'2020-01-01'", "DATE'2020-01-03'")
e.writes.insert_overwrite_interval("c.inc", "SELECT DATE'2020-01-02' AS ds, 20 AS v", "ds", "DATE'2020-01-02'", "DATE'2020-01-03'")
out["inc"] = sorted(e.session.fetchall("SELECT v, CAST(ds AS STRING) FROM c.inc"))
out["partitions"] = e.catalog.partitions("c.inc")
e.writes.replace_table("c.full", "SELECT 1 AS a, 2 AS b", [])
e.writes.replace_table("c.full", "SELECT 20 AS b, 10 AS a", [])
out["full"] = e.session.fetchall("SELECT a, b FROM c.full")
e.writes.load_seed("c.seed", pd.DataFrame({{"id": [1, 2], "d": ["2020-01-01", None]}}), {{"id": "int", "d": "date"}})
out["seed_columns"] = e.catalog.columns("c.seed")
out["seed"] = sorted(e.session.fetchall("SELECT id, CAST(d AS STRING) FROM c.seed"))
e.catalog.create_view("c.v", "SELECT * FROM c.full")
out["objects"] = e.catalog.list_objects("c")
out["view"] = e.session.fetchdf("SELECT * FROM c.v").to_dict("records")
try:
    e.session.fetchall("SELECT * FROM c.missing")
except EngineError as err:
    out["error"] = err.condition
print(json.dumps(out))
"""

_BACKGROUND = {
    "test_separate_process_is_quiet_and_keeps_cwd_clean": _QUIET_SCRIPT,
    "test_adapter_over_spark_connect": _CONNECT_SCRIPT,
}


@pytest.fixture(scope="module", autouse=True)
def background(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Separate Python processes with their own Spark, for the selected tests that need one.

    They are launched when this module starts so their JVMs boot while the shared session does;
    each test then waits for its process.
    """
    selected = {item.name for item in request.session.items}
    processes = {}
    for test, script in _BACKGROUND.items():
        if test not in selected:
            continue
        root = tmp_path_factory.mktemp(test[5:20])
        cwd, mesh_dir = root / "cwd", root / "project" / ".mesh"
        cwd.mkdir()
        source = script.format(repo=str(REPO), mesh_dir=str(mesh_dir))
        process = subprocess.Popen(
            [sys.executable, "-c", source], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        processes[test] = (process, cwd, mesh_dir)
    yield processes
    for process, _, _ in processes.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_separate_process_is_quiet_and_keeps_cwd_clean(background) -> None:
    """Starting Spark, DDL, a write and a failing query print nothing on stderr and nothing in cwd."""
    process, cwd, mesh_dir = background["test_separate_process_is_quiet_and_keeps_cwd_clean"]
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    assert stderr.strip() == "", f"unexpected stderr:\n{stderr}"
    assert stdout.startswith("Spark query failed: [TABLE_OR_VIEW_NOT_FOUND]")
    assert list(cwd.iterdir()) == []
    assert (mesh_dir / "metastore_db").is_dir()
    assert (mesh_dir / "derby.log").is_file()
    assert (mesh_dir / "warehouse" / "quiet.db" / "t").is_dir()


@pytest.mark.slow
def test_adapter_over_spark_connect(background) -> None:
    """The adapter uses only APIs Spark Connect has: the same writes work through a Connect session."""
    process, cwd, _ = background["test_adapter_over_spark_connect"]
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["session"] == "pyspark.sql.connect.session"
    assert out["inc"] == [[1, "2020-01-01"], [20, "2020-01-02"]]
    assert out["partitions"] == [{"ds": "2020-01-01"}, {"ds": "2020-01-02"}]
    assert out["full"] == [[10, 20]]
    assert out["seed_columns"] == {"id": "int", "d": "date"}
    assert out["seed"] == [[1, "2020-01-01"], [2, None]]
    assert out["objects"] == {"full": "table", "inc": "table", "seed": "table", "v": "view"}
    assert out["view"] == [{"a": 10, "b": 20}]
    assert out["error"] == "TABLE_OR_VIEW_NOT_FOUND"
    assert list(cwd.iterdir()) == []


# -- errors ----------------------------------------------------------------------------------


def test_spark_errors_surface_as_one_line_engine_errors(engine) -> None:
    with pytest.raises(SparkSQLError) as info:
        engine.session.fetchall("SELECT * FROM no_such_schema.no_such_table")
    error = info.value
    assert isinstance(error, EngineError)
    assert error.condition == "TABLE_OR_VIEW_NOT_FOUND"
    assert str(error).startswith("Spark query failed: [TABLE_OR_VIEW_NOT_FOUND] The table or view")
    assert "\n" not in str(error) and "JVM" not in str(error) and "at org.apache" not in str(error)

    with pytest.raises(SparkSQLError) as info:
        engine.session.execute("SELEC 1")
    assert str(info.value) == "Spark SQL failed: [PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601"

    with pytest.raises(SparkSQLError, match=r"^Spark query failed: \[CAST_INVALID_INPUT\] The value 'x'") as info:
        engine.session.fetchall("SELECT CAST('x' AS INT)")
    assert info.value.sql == "SELECT CAST('x' AS INT)"


def test_error_message_of_a_raw_py4j_failure() -> None:
    """Py4J errors that PySpark does not convert keep the Java exception line, not the stack."""
    raw = RuntimeError(
        "An error occurred while calling o42.sql.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: boom\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2)\n"
    )
    assert spark_error_message(raw) == "org.apache.spark.SparkException: Job aborted due to stage failure: boom"
    error = to_engine_error(ValueError("\nbad things\nmore detail"), "Cannot start Spark")
    assert str(error) == "Cannot start Spark: bad things" and error.condition is None


def test_names_are_validated_before_reaching_sql(engine) -> None:
    assert quote_name("a.b_1") == "`a`.`b_1`"
    with pytest.raises(EngineError, match=r"Invalid identifier 'b; DROP TABLE x'"):
        engine.catalog.drop_table("a.b; DROP TABLE x")
    with pytest.raises(EngineError, match=r"Invalid identifier 'x`y'"):
        engine.catalog.create_schema("x`y")


# -- catalog ---------------------------------------------------------------------------------


def test_schemas_tables_views_and_columns(engine, unique_schema) -> None:
    assert not engine.catalog.schema_exists(unique_schema)
    assert engine.catalog.list_objects(unique_schema) == {}
    engine.catalog.create_schema(unique_schema)
    assert engine.catalog.schema_exists(unique_schema)

    table, view = f"{unique_schema}.t", f"{unique_schema}.v"
    query = "SELECT 1 AS id, 'a' AS name, DATE'2020-01-01' AS ds, CAST(1.5 AS DECIMAL(10,2)) AS amount"
    assert engine.catalog.query_columns(query) == {"id": "int", "name": "string", "ds": "date", "amount": "decimal(10,2)"}
    engine.catalog.create_table(table, query, ["ds"])
    # partition columns come last in a Spark table
    assert engine.catalog.columns(table) == {"id": "int", "name": "string", "amount": "decimal(10,2)", "ds": "date"}
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {table}") == [(0,)]  # created from the query, not filled
    engine.catalog.create_view(view, f"SELECT id, name FROM {table}")
    assert engine.catalog.table_exists(table) and engine.catalog.table_exists(view)
    assert engine.catalog.list_objects(unique_schema) == {"t": "table", "v": "view"}

    engine.catalog.drop_view(view)
    engine.catalog.drop_table(table)
    assert not engine.catalog.table_exists(view) and not engine.catalog.table_exists(table)
    assert engine.catalog.list_objects(unique_schema) == {}
    engine.catalog.drop_schema(unique_schema)
    assert not engine.catalog.schema_exists(unique_schema)


def test_query_columns_does_not_run_the_query(engine) -> None:
    assert engine.catalog.query_columns("SELECT CAST('not a number' AS INT) AS n, NULL AS x") == {"n": "int", "x": "string"}


def test_create_table_checks_partition_columns(engine, unique_schema) -> None:
    with pytest.raises(EngineError, match=r"partition column\(s\) day are not among its columns \(id, ds\)"):
        engine.catalog.create_table(f"{unique_schema}.t", None, ["day"], columns={"id": "int", "ds": "date"})


# -- full refresh ----------------------------------------------------------------------------


def test_replace_table_maps_columns_by_name_and_refreshes(engine, unique_schema) -> None:
    table = f"{unique_schema}.full"
    engine.writes.replace_table(table, "SELECT 1 AS a, 2 AS b UNION ALL SELECT 10, 20", [])
    assert rows(engine, f"SELECT a, b FROM {table}") == [(1, 2), (10, 20)]

    # same columns, different order in the SELECT: values must follow their names
    engine.writes.replace_table(table, "SELECT 200 AS b, 100 AS a", [])
    assert rows(engine, f"SELECT a, b FROM {table}") == [(100, 200)]

    # the query's types are cast to the table's; a new column recreates the table
    engine.writes.replace_table(table, "SELECT 'x' AS c, 5 AS b, 3 AS a", [])
    assert engine.catalog.columns(table) == {"c": "string", "b": "int", "a": "int"}
    assert rows(engine, f"SELECT a, b, c FROM {table}") == [(3, 5, "x")]

    with pytest.raises(EngineError, match=r"Cannot write .*full: the query does not produce column\(s\) c"):
        engine.writes.replace_table(table, "SELECT 1 AS a, 2 AS b", [], columns={"c": "string", "b": "int", "a": "int"})


def test_replace_partitioned_table_drops_partitions_no_longer_produced(engine, unique_schema) -> None:
    table = f"{unique_schema}.parts"
    engine.writes.replace_table(
        table, "SELECT 1 AS v, DATE'2020-01-01' AS ds UNION ALL SELECT 2, DATE'2020-01-02'", ["ds"]
    )
    engine.writes.replace_table(table, "SELECT DATE'2020-01-02' AS ds, 20 AS v", ["ds"])
    assert rows(engine, f"SELECT ds, v FROM {table}") == [(dt.date(2020, 1, 2), 20)]
    assert engine.catalog.partitions(table) == [{"ds": "2020-01-02"}]

    engine.writes.replace_table(table, "SELECT 1 AS v, DATE'2020-01-01' AS ds WHERE false", ["ds"])
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    assert engine.catalog.partitions(table) == []


# -- incremental by time range ---------------------------------------------------------------


def _days(values: dict[str, tuple[int, ...]]) -> str:
    """SELECT producing, for each day, one row per (value, region) — regions 'eu' and 'us'."""
    selects = [
        f"SELECT {v} AS v, '{region}' AS region, DATE'{day}' AS ds"
        for day, vs in values.items()
        for v, region in zip(vs, ("eu", "us"))
    ]
    return " UNION ALL ".join(selects)


def test_interval_overwrite_replaces_exactly_the_interval(engine, unique_schema) -> None:
    table = f"{unique_schema}.inc"
    everything = _days({"2020-01-01": (1, 1), "2020-01-02": (2, 2), "2020-01-03": (3, 3), "2020-01-04": (4, 4)})
    engine.catalog.create_table(table, everything, ["ds", "region"])
    low, high = "CAST('2020-01-01' AS DATE)", "CAST('2020-01-04' AS DATE)"
    engine.writes.insert_overwrite_interval(table, everything, "ds", low, high)
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {table}") == [(8,)]

    # Reprocess [01-02, 01-03]: the query now yields new values for 01-02 (eu only) and nothing for
    # 01-03. It also yields rows outside the interval, which must be ignored.
    changed = _days({"2020-01-01": (100,), "2020-01-02": (20,), "2020-01-04": (400,)})
    interval = ("DATE'2020-01-02'", "DATE'2020-01-03'")
    engine.writes.insert_overwrite_interval(table, changed, "ds", *interval)
    expected = [
        (1, "eu", dt.date(2020, 1, 1)),
        (1, "us", dt.date(2020, 1, 1)),
        (20, "eu", dt.date(2020, 1, 2)),
        (4, "eu", dt.date(2020, 1, 4)),
        (4, "us", dt.date(2020, 1, 4)),
    ]
    assert rows(engine, f"SELECT v, region, ds FROM {table}") == expected
    # the stale partitions (01-02/us, 01-03/eu, 01-03/us) are gone, not just empty of new rows
    assert sorted(engine.catalog.partitions(table), key=repr) == sorted(
        [
            {"ds": "2020-01-01", "region": "eu"},
            {"ds": "2020-01-01", "region": "us"},
            {"ds": "2020-01-02", "region": "eu"},
            {"ds": "2020-01-04", "region": "eu"},
            {"ds": "2020-01-04", "region": "us"},
        ],
        key=repr,
    )

    # idempotent
    engine.writes.insert_overwrite_interval(table, changed, "ds", *interval)
    assert rows(engine, f"SELECT v, region, ds FROM {table}") == expected


def test_interval_overwrite_on_timestamp_partitions(engine, unique_schema) -> None:
    table = f"{unique_schema}.hourly"
    first = (
        "SELECT 1 AS v, TIMESTAMP'2020-01-01 00:00:00' AS ts UNION ALL "
        "SELECT 2, TIMESTAMP'2020-01-01 01:00:00' UNION ALL "
        "SELECT 3, TIMESTAMP'2020-01-01 01:30:00.5' UNION ALL "
        "SELECT 4, TIMESTAMP'2020-01-01 02:00:00'"
    )
    engine.catalog.create_table(table, first, ["ts"])
    engine.writes.insert_overwrite_interval(
        table, first, "ts", "TIMESTAMP'2020-01-01 00:00:00'", "TIMESTAMP'2020-01-01 02:59:59.999999'"
    )
    assert {p["ts"] for p in engine.catalog.partitions(table)} == {
        "2020-01-01 00:00:00", "2020-01-01 01:00:00", "2020-01-01 01:30:00.5", "2020-01-01 02:00:00"
    }
    # Hour 01 now produces only 01:00 with a new value; 01:30:00.5 must disappear.
    second = "SELECT 20 AS v, TIMESTAMP'2020-01-01 01:00:00' AS ts"
    interval = ("TIMESTAMP'2020-01-01 01:00:00'", "TIMESTAMP'2020-01-01 01:59:59.999999'")
    for _ in range(2):
        engine.writes.insert_overwrite_interval(table, second, "ts", *interval)
        assert rows(engine, f"SELECT v, CAST(ts AS STRING) FROM {table}") == [
            (1, "2020-01-01 00:00:00"), (20, "2020-01-01 01:00:00"), (4, "2020-01-01 02:00:00")
        ]


def test_interval_overwrite_on_string_time_column(engine, unique_schema) -> None:
    table = f"{unique_schema}.by_text"
    first = "SELECT 1 AS v, '2020-01-01' AS day UNION ALL SELECT 2, '2020-01-02' UNION ALL SELECT 3, '2020-01-10'"
    engine.catalog.create_table(table, first, ["day"])
    engine.writes.insert_overwrite_interval(table, first, "day", "'2020-01-01'", "'2020-01-31'")
    # '2020-01-10' sorts between the bounds as text too, so it is in range and dropped
    engine.writes.insert_overwrite_interval(table, "SELECT 5 AS v, '2020-01-02' AS day", "day", "'2020-01-02'", "'2020-01-31'")
    assert rows(engine, f"SELECT v, day FROM {table}") == [(1, "2020-01-01"), (5, "2020-01-02")]


def test_interval_overwrite_on_unpartitioned_table(engine, unique_schema) -> None:
    table = f"{unique_schema}.flat"
    first = _days({"2020-01-01": (1, 1), "2020-01-02": (2, 2), "2020-01-03": (3, 3)})
    engine.catalog.create_table(table, first, [])
    engine.writes.insert_overwrite_interval(table, first, "ds", "DATE'2020-01-01'", "DATE'2020-01-03'")
    engine.session.execute(f"INSERT INTO {table} SELECT 9, 'eu', CAST(NULL AS DATE)")  # NULL times are kept

    changed = _days({"2020-01-01": (100,), "2020-01-02": (20,)})
    for _ in range(2):
        engine.writes.insert_overwrite_interval(table, changed, "ds", "DATE'2020-01-02'", "DATE'2020-01-03'")
        assert rows(engine, f"SELECT v, region, ds FROM {table}") == sorted(
            [(1, "eu", dt.date(2020, 1, 1)), (1, "us", dt.date(2020, 1, 1)), (20, "eu", dt.date(2020, 1, 2)), (9, "eu", None)],
            key=repr,
        )
    assert not [name for name in engine.catalog.list_objects(unique_schema) if name.startswith("__mesh")]


def test_rewrite_table_from_a_query_reading_the_table(engine, unique_schema) -> None:
    """A unique-key style upsert: the new content is computed from the old."""
    table = f"{unique_schema}.by_key"
    engine.writes.replace_table(table, "SELECT 1 AS id, 'a' AS v, 'x' AS grp UNION ALL SELECT 2, 'b', 'y'", ["grp"])
    upsert = f"SELECT id, v, grp FROM {table} WHERE id NOT IN (2, 3) UNION ALL SELECT 2, 'B', 'x' UNION ALL SELECT 3, 'c', 'x'"
    engine.writes.rewrite_table(table, f"SELECT grp, v, id FROM ({upsert}) AS u")  # mapped to the table by name
    assert rows(engine, f"SELECT id, v, grp FROM {table}") == [(1, "a", "x"), (2, "B", "x"), (3, "c", "x")]
    assert engine.catalog.partitions(table) == [{"grp": "x"}]  # 'y' no longer has rows
    assert not [name for name in engine.catalog.list_objects(unique_schema) if name.startswith("__mesh")]


def test_interval_overwrite_needs_the_time_column(engine, unique_schema) -> None:
    table = f"{unique_schema}.no_time"
    engine.catalog.create_table(table, None, [], columns={"v": "int"})
    with pytest.raises(EngineError, match=r"no_time: it has no time column 'ds'"):
        engine.writes.insert_overwrite_interval(table, "SELECT 1 AS v", "ds", "DATE'2020-01-01'", "DATE'2020-01-01'")


# -- seeds and views -------------------------------------------------------------------------


def test_load_seed_casts_to_declared_types(engine, unique_schema) -> None:
    table = f"{unique_schema}.seed"
    columns = {"id": "int", "name": "string", "day": "date", "amount": "decimal(10,2)", "flag": "boolean", "code": "string"}
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", None, "c"],
            "day": ["2020-01-01", "2020-01-02", None],
            "amount": [1.5, float("nan"), 3.0],
            "flag": [True, False, True],
            "code": ["007", "010", "x"],
        }
    )
    engine.writes.load_seed(table, frame, columns)
    assert engine.catalog.columns(table) == columns
    assert rows(engine, f"SELECT * FROM {table}") == [
        (1, "a", dt.date(2020, 1, 1), Decimal("1.50"), True, "007"),
        (2, None, dt.date(2020, 1, 2), None, False, "010"),
        (3, "c", None, Decimal("3.00"), True, "x"),
    ]
    # Loading again replaces the content; an empty frame leaves an empty table.
    engine.writes.load_seed(table, frame.head(1), columns)
    assert engine.session.fetchall(f"SELECT id FROM {table}") == [(1,)]
    engine.writes.load_seed(table, frame.head(0), columns)
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {table}") == [(0,)]
    # A floating-point column declared INT (pandas reads `1` as 1.0 when a value is missing).
    engine.writes.load_seed(table, pd.DataFrame({"id": [1.0, None]}), {"id": "int"})
    assert engine.catalog.columns(table) == {"id": "int"}
    assert rows(engine, f"SELECT id FROM {table}") == [(1,), (None,)]


def test_load_seed_rejects_columns_that_do_not_match(engine, unique_schema) -> None:
    with pytest.raises(EngineError, match=r"seed: the data has missing column\(s\) b and undeclared column\(s\) c"):
        engine.writes.load_seed(f"{unique_schema}.seed", pd.DataFrame({"a": [1], "c": [2]}), {"a": "int", "b": "int"})


def test_recreated_view_shows_new_physical_columns(engine, unique_schema) -> None:
    table, view = f"{unique_schema}.physical", f"{unique_schema}__dev.model"
    engine.writes.replace_table(table, "SELECT 1 AS a", [])
    engine.catalog.create_view(view, f"SELECT * FROM {table}")
    assert engine.catalog.columns(view) == {"a": "int"}

    engine.writes.replace_table(table, "SELECT 1 AS a, 'b' AS b", [])
    engine.catalog.create_view(view, f"SELECT * FROM {table}")
    assert engine.catalog.columns(view) == {"a": "int", "b": "string"}
    assert engine.session.fetchdf(f"SELECT * FROM {view}").to_dict("records") == [{"a": 1, "b": "b"}]
    engine.catalog.drop_schema(f"{unique_schema}__dev")


def test_column_comments_on_tables_and_views(engine, unique_schema) -> None:
    """Comments are escaped like any literal, matched to columns case-insensitively, and a view's
    column list (needed for comments) follows the query's output columns."""
    table, view = f"{unique_schema}.t", f"{unique_schema}.v"
    comments = {"ID": "it's the \\key\\", "name": 'a "name"'}
    engine.writes.replace_table(table, "SELECT 1 AS id, 'a' AS name, 2 AS other", [], comments=comments)
    engine.catalog.create_view(view, f"SELECT name, other, id * 10 AS id FROM {table}", {"id": "tenfold"})

    def described(name: str) -> dict:
        return {r[0]: r[2] for r in engine.session.fetchall(f"DESCRIBE TABLE {name}")}

    assert described(table) == {"id": "it's the \\key\\", "name": 'a "name"', "other": None}
    assert described(view) == {"name": 'a "name"', "other": None, "id": "tenfold"}  # name's comes from the table
    assert rows(engine, f"SELECT * FROM {view}") == [("a", 2, 10)]
