"""The engine's cheap paths keep their guarantees: a remembered schema dropped by another
process is recreated, and an interval write where the table holds no row in that interval yet (a
first write, the next day of a daily model) is one INSERT yet exact."""

from __future__ import annotations

from mesh_dagster.engine.adapter import SQL_TRACE_ENV, SparkEngine


def test_a_remembered_schema_dropped_elsewhere_is_recreated(spark, unique_schema) -> None:
    engine, other = SparkEngine(spark), SparkEngine(spark)  # `other` stands for another process
    engine.create_table(f"{unique_schema}.a", None, columns={"x": "int"})
    other.drop_schema(unique_schema, cascade=True)
    assert not engine.schema_exists(unique_schema)

    engine.create_table(f"{unique_schema}.b", None, columns={"x": "int"})
    engine.create_view(f"{unique_schema}.v", f"SELECT x FROM {unique_schema}.b")
    assert engine.list_objects(unique_schema) == {"b": "table", "v": "view"}


def test_a_new_interval_is_one_insert_and_a_rewritten_one_clears_empty_partitions(
        spark, unique_schema, tmp_path, monkeypatch) -> None:
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(SQL_TRACE_ENV, str(trace))
    engine = SparkEngine(spark)
    table = f"{unique_schema}.inc"
    engine.create_table(table, None, ["ds"], columns={"id": "int", "ds": "date"})
    days = "SELECT 1 AS id, DATE'2024-01-01' AS ds UNION ALL SELECT 2, DATE'2024-01-02' UNION ALL SELECT 3, DATE'2024-01-05'"
    trace.write_text("")
    engine.insert_overwrite_interval(table, days, "ds", "DATE'2024-01-01'", "DATE'2024-01-03'")
    first = trace.read_text()
    assert "INSERT OVERWRITE" in first and "CACHE TABLE" not in first and "SELECT DISTINCT" not in first
    assert sorted(engine.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}")) == [
        (1, "2024-01-01"), (2, "2024-01-02")]

    # The same interval again, now producing no row for 2024-01-02: that partition must go.
    engine.insert_overwrite_interval(table, "SELECT 9 AS id, DATE'2024-01-01' AS ds", "ds",
                                     "DATE'2024-01-01'", "DATE'2024-01-03'")
    assert engine.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}") == [(9, "2024-01-01")]
    assert engine.partitions(table) == [{"ds": "2024-01-01"}]

    # The next interval, on a table holding other days: nothing in it could be left stale.
    trace.write_text("")
    engine.insert_overwrite_interval(table, "SELECT 7 AS id, DATE'2024-01-04' AS ds", "ds",
                                     "DATE'2024-01-04'", "DATE'2024-01-04'")
    later = trace.read_text()
    assert "INSERT OVERWRITE" in later and "CACHE TABLE" not in later and "EXCEPT" not in later
    assert sorted(engine.fetchall(f"SELECT id, CAST(ds AS STRING) FROM {table}")) == [
        (7, "2024-01-04"), (9, "2024-01-01")]
