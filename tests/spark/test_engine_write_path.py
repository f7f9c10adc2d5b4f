"""The engine's cheap paths keep their guarantees: a remembered schema dropped by another
process is recreated, and an interval write where the table holds no row in that interval yet (a
first write, the next day of a daily model) is one INSERT yet exact, decided on the metastore's
partition values without reading the table."""

from __future__ import annotations

import pytest

from mesh_dagster.engine import writes
from mesh_dagster.engine.adapter import SQL_TRACE_ENV, SparkEngine
from mesh_dagster.engine.writes import Scope


def test_a_remembered_schema_dropped_elsewhere_is_recreated(spark, unique_schema) -> None:
    engine, other = SparkEngine(spark), SparkEngine(spark)  # `other` stands for another process
    engine.catalog.create_table(f"{unique_schema}.a", None, columns={"x": "int"})
    other.catalog.drop_schema(unique_schema, cascade=True)
    assert not engine.catalog.schema_exists(unique_schema)

    engine.catalog.create_table(f"{unique_schema}.b", None, columns={"x": "int"})
    engine.catalog.create_view(f"{unique_schema}.v", f"SELECT x FROM {unique_schema}.b")
    assert engine.catalog.list_objects(unique_schema) == {"b": "table", "v": "view"}


def test_a_new_interval_is_one_insert_and_a_rewritten_one_clears_empty_partitions(
        spark, unique_schema, tmp_path, monkeypatch) -> None:
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    engine = SparkEngine(spark)
    table = f"{unique_schema}.inc"
    engine.catalog.create_table(table, None, ["ds"], columns={"id": "int", "ds": "date"})
    days = "SELECT 1 AS id, DATE'2024-01-01' AS ds UNION ALL SELECT 2, DATE'2024-01-02' UNION ALL SELECT 3, DATE'2024-01-05'"
    trace.write_text("")
    engine.writes.insert_overwrite_interval(table, days, "ds", "DATE'2024-01-01'", "DATE'2024-01-03'")
    first = trace.read_text()
    assert "INSERT OVERWRITE" in first and "CACHE TABLE" not in first and "SELECT DISTINCT" not in first
    assert sorted(engine.session.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}")) == [
        (1, "2024-01-01"), (2, "2024-01-02")]

    # The same interval again, now producing no row for 2024-01-02: that partition must go.
    engine.writes.insert_overwrite_interval(table, "SELECT 9 AS id, DATE'2024-01-01' AS ds", "ds",
                                            "DATE'2024-01-01'", "DATE'2024-01-03'")
    assert engine.session.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}") == [(9, "2024-01-01")]
    assert engine.catalog.partitions(table) == [{"ds": "2024-01-01"}]

    # The next interval, on a table holding other days: nothing in it could be left stale.
    trace.write_text("")
    engine.writes.insert_overwrite_interval(table, "SELECT 7 AS id, DATE'2024-01-04' AS ds", "ds",
                                            "DATE'2024-01-04'", "DATE'2024-01-04'")
    later = trace.read_text()
    assert "INSERT OVERWRITE" in later and "CACHE TABLE" not in later and "EXCEPT" not in later
    assert f"FROM `{unique_schema}`.`inc` WHERE" not in later  # decided on partition values, not rows
    assert sorted(engine.session.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}")) == [
        (7, "2024-01-04"), (9, "2024-01-01")]


def test_whether_a_scope_holds_rows_is_told_by_partition_values_of_every_type(spark, unique_schema) -> None:
    """Timestamps (escaped `:` in SHOW PARTITIONS), a second partition column, a NULL partition."""
    engine = SparkEngine(spark)
    table = f"{unique_schema}.hourly"
    types = {"id": "int", "ts": "timestamp", "region": "string"}
    engine.catalog.create_table(table, None, ["ts", "region"], columns=types)
    engine.session.execute(f"INSERT INTO {table} VALUES (1, TIMESTAMP'2024-01-01 10:00:00', 'north'), "
                           f"(2, TIMESTAMP'2024-01-01 11:00:00', NULL)")
    holds = engine.writes._holds_rows

    def scope(condition: str) -> Scope:
        return Scope(condition, types)

    assert holds(table, scope("`ts` BETWEEN TIMESTAMP'2024-01-01 10:00:00' AND TIMESTAMP'2024-01-01 10:59:59'"))
    assert not holds(table, scope("`ts` BETWEEN TIMESTAMP'2024-01-01 12:00:00' AND TIMESTAMP'2024-01-01 23:59:59'"))
    assert holds(table, scope("`region` IS NULL AND `ts` = TIMESTAMP'2024-01-01 11:00:00'"))
    assert not holds(table, scope("`region` = 'south'"))
    assert holds(table, None)


@pytest.mark.parametrize("limit", [2_000, 1])
def test_a_partition_value_that_does_not_cast_or_too_many_partitions_ask_the_table(
        spark, unique_schema, monkeypatch, limit: int) -> None:
    """Types that do not fit the stored values (a declared DATE over text partitions), or more
    partitions than are tested in memory: the table itself is queried, and answers right."""
    monkeypatch.setattr(writes, "_PARTITIONS_TESTED_IN_MEMORY", limit)
    engine = SparkEngine(spark)
    table = f"{unique_schema}.texts"
    engine.catalog.create_table(table, None, ["ds"], columns={"id": "int", "ds": "string"})
    engine.session.execute(f"INSERT INTO {table} VALUES (1, 'not a date'), (2, 'other')")
    holds = engine.writes._holds_rows
    types = {"id": "int", "ds": "date"} if limit > 1 else {"id": "int", "ds": "string"}
    assert holds(table, Scope("`ds` = 'not a date'", types))
    assert not holds(table, Scope("`ds` = 'missing'", types))


def test_partitioning_names_the_columns_from_one_listing(spark, unique_schema, tmp_path, monkeypatch) -> None:
    """A table with partitions: one SHOW PARTITIONS (no DESCRIBE); an empty partitioned table: a
    DESCRIBE names its columns; an unpartitioned table: none, and no partitions."""
    engine = SparkEngine(spark)
    parted, flat = f"{unique_schema}.parted", f"{unique_schema}.flat"
    engine.catalog.create_table(parted, None, ["ds", "region"], columns={"id": "int", "ds": "date", "region": "string"})
    engine.catalog.create_table(flat, None, columns={"id": "int"})
    assert engine.catalog.partitioning(parted, 10) == (["ds", "region"], [])
    assert engine.catalog.partitioning(flat, 10) == ([], [])

    engine.session.execute(f"INSERT INTO {parted} VALUES (1, DATE'2024-01-01', 'a/b'), (2, DATE'2024-01-02', NULL)")
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    columns, specs = SparkEngine(spark).catalog.partitioning(parted, 10)
    assert columns == ["ds", "region"] and len(specs) == 2
    calls = [line.split("\t")[1] for line in trace.read_text().splitlines()]
    assert calls == ["[Cannot configure the Spark session]", f"SHOW PARTITIONS `{unique_schema}`.`parted`"]
    assert engine.catalog.partitions(parted) == [{"ds": "2024-01-01", "region": "a/b"}, {"ds": "2024-01-02", "region": None}]


def _traced(trace) -> list[str]:
    return [line.split("\t")[1] for line in trace.read_text().splitlines()]


def test_a_generation_switch_needs_no_refresh_to_be_read(spark, unique_schema, tmp_path, monkeypatch) -> None:
    """ALTER TABLE ... SET LOCATION forgets the session's cached listing itself: the full rewrite
    issues no refresh after it (issue 36), and the session reads the new rows straight away."""
    engine = SparkEngine(spark)
    table = f"{unique_schema}.full"
    engine.writes.replace_table(table, "SELECT 1 AS a")
    assert engine.session.fetchall(f"SELECT a FROM {table}") == [(1,)]  # the session has listed its files
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    traced = SparkEngine(spark)
    traced.writes.replace_table(table, "SELECT 2 AS a UNION ALL SELECT 3")
    calls = _traced(trace)
    switched = next(i for i, call in enumerate(calls) if "SET LOCATION" in call)
    assert not any(call.startswith("[Cannot refresh") for call in calls[switched:]), calls
    assert sorted(traced.session.fetchall(f"SELECT a FROM {table}")) == [(2,), (3,)]
    assert sorted(engine.session.fetchall(f"SELECT a FROM {table}")) == [(2,), (3,)]


def test_a_listed_schema_is_not_looked_up_again(spark, unique_schema, tmp_path, monkeypatch) -> None:
    """SHOW TABLES answering proves the schema exists: creating a table in it asks no more."""
    SparkEngine(spark).catalog.create_schema(unique_schema)
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    engine = SparkEngine(spark)
    assert engine.catalog.table_names(unique_schema) == set()
    engine.catalog.create_schema(unique_schema)
    assert not any("look up schema" in call for call in _traced(trace))


def test_a_full_rewrite_reads_its_tables_columns_once(spark, unique_schema, tmp_path, monkeypatch) -> None:
    """DESCRIBE TABLE EXTENDED names the columns of plain types as the schema does: the rewrite of
    such a table asks for no column look-up besides it; one of a type spelled otherwise there
    (varchar) is looked up, and its columns are the schema's."""
    from mesh_dagster.engine.catalog import described_columns
    from mesh_dagster.engine.generations import describe_rows

    engine = SparkEngine(spark)
    engine.catalog.create_schema(unique_schema)
    types = ("a int, b bigint, c double, d string, e date, f timestamp, g decimal(10,2), h boolean, i smallint, "
             "j tinyint, k float, l binary, m timestamp_ntz, ds date")
    engine.session.execute(f"CREATE TABLE {unique_schema}.plain ({types}) USING parquet PARTITIONED BY (ds)")
    engine.session.execute(f"CREATE TABLE {unique_schema}.odd (a int, n varchar(5)) USING parquet")
    plain = described_columns(describe_rows(engine.session, f"{unique_schema}.plain") or [])
    assert plain == engine.catalog.columns(f"{unique_schema}.plain")
    assert described_columns(describe_rows(engine.session, f"{unique_schema}.odd") or []) is None

    table = f"{unique_schema}.full"
    engine.writes.replace_table(table, "SELECT 1 AS a, 'x' AS b")
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    traced = SparkEngine(spark)
    assert traced.writes.replace_table(table, "SELECT 2 AS a, 'y' AS b", produced={"a": "int", "b": "string"}) == (
        {"a": "int", "b": "string"}, False)
    calls = _traced(trace)
    assert not any(call.startswith("[Cannot read the columns") for call in calls), calls
    assert not any(call.startswith("SELECT") for call in calls), calls  # handed its columns: no analysis
    assert traced.session.fetchall(f"SELECT a, b FROM {table}") == [(2, "y")]
    columns, relaid = traced.writes.replace_table(table, "SELECT 3 AS a, 'z' AS b, 1.5D AS c")
    assert (columns, relaid) == ({"a": "int", "b": "string", "c": "double"}, True)  # a new layout
