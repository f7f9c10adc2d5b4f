"""The DuckDB → Spark rewrites (core/sql/dialect_fixes.py) as SQL text; their values on Spark
against DuckDB's: tests/spark/test_dialect_fixes_spark.py."""

from __future__ import annotations

import pytest
import sqlglot

from mesh_dagster.core.sql.dialect_fixes import fix_transpilation


def _spark(sql: str, dialect: str = "duckdb") -> str:
    return fix_transpilation(sqlglot.parse_one(sql, read=dialect), dialect).sql("spark")


@pytest.mark.parametrize("duckdb, spark", [
    ("SELECT DAYOFWEEK(d)", "SELECT (DAYOFWEEK(d) - 1)"),
    ("SELECT DATE_PART('dow', d)", "SELECT (DAYOFWEEK(d) - 1)"),
    ("SELECT ISODOW(d)", "SELECT EXTRACT(DAYOFWEEK_ISO FROM d)"),
    ("SELECT LOG(x)", "SELECT LOG(10, x)"),
    ("SELECT LOG(2, x)", "SELECT LOG(2, x)"),
    ("SELECT STRFTIME(d, '%Y %j')", "SELECT DATE_FORMAT(d, 'yyyy DDD')"),
    ("SELECT STRFTIME(d, '%Y-%m')", "SELECT DATE_FORMAT(d, 'yyyy-MM')"),
    ("SELECT DATE_DIFF('month', a, b)",
     "SELECT DATEDIFF(MONTH, DATE_TRUNC('MONTH', a), DATE_TRUNC('MONTH', b))"),
    ("SELECT DATE_DIFF('week', a, b)", "SELECT DATEDIFF(WEEK, a, b)"),
    ("SELECT DAYNAME(LOG(x))", "SELECT DATE_FORMAT(LOG(10, x), 'EEEE')"),  # nested: both rewritten
])
def test_duckdb_rewrites(duckdb: str, spark: str) -> None:
    assert _spark(duckdb) == spark


def test_other_dialects_are_left_to_sqlglot() -> None:
    assert _spark("SELECT DAYOFWEEK(d), LOG(x)", "spark") == "SELECT DAYOFWEEK(d), LN(x)"
    assert _spark("SELECT DAYOFWEEK(d)", "hive") == "SELECT DAYOFWEEK(d)"
