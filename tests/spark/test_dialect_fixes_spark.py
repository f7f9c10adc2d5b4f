"""A DuckDB-dialect model computes on Spark what DuckDB computes, for the functions sqlglot
transpiles to other results (core/sql/dialect_fixes.py). The expected values were read from DuckDB
(1.x, in SQLMesh's compat venv: `duckdb.sql("SELECT CAST(<expr> AS VARCHAR)")`); each expression is
rendered by our renderer from the DuckDB dialect and run on Spark, all in one query."""

from __future__ import annotations

import pytest

from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_sql

pytestmark = pytest.mark.spark

# DuckDB expression -> DuckDB's value (as text). 2024-01-07 is a Sunday.
DUCKDB = {
    "DAYOFWEEK(DATE '2024-01-07')": "0",
    "DAYOFWEEK(DATE '2024-01-13')": "6",
    "WEEKDAY(DATE '2024-01-07')": "0",
    "DATE_PART('dow', DATE '2024-01-07')": "0",
    "DATE_PART('dayofweek', DATE '2024-01-08')": "1",
    "DATE_PART('weekday', DATE '2024-01-13')": "6",
    "EXTRACT(dow FROM DATE '2024-01-07')": "0",
    "ISODOW(DATE '2024-01-07')": "7",
    "ISODOW(DATE '2024-01-08')": "1",
    "DATE_PART('isodow', DATE '2024-01-07')": "7",
    "DAYNAME(DATE '2024-01-07')": "Sunday",
    "MONTHNAME(DATE '2024-01-07')": "January",
    "STRFTIME(DATE '2024-01-07', '%j')": "007",
    "STRFTIME(DATE '2024-02-10', '%Y-%j')": "2024-041",
    "LOG(100)": "2.0",
    "LOG(DAYOFWEEK(DATE '2024-01-08') * 100)": "2.0",
    "DATE_DIFF('month', DATE '2024-01-31', DATE '2024-02-01')": "1",
    "DATE_DIFF('month', DATE '2024-03-31', DATE '2024-01-01')": "-2",
    "DATE_DIFF('year', DATE '2023-12-31', DATE '2024-01-01')": "1",
    "DATEDIFF('quarter', DATE '2024-03-31', DATE '2024-04-01')": "1",
    "DATE_DIFF('day', TIMESTAMP '2024-01-01 23:00', TIMESTAMP '2024-01-02 01:00')": "1",
    "DATE_DIFF('hour', TIMESTAMP '2024-01-01 23:59', TIMESTAMP '2024-01-02 00:01')": "1",
    "DATE_DIFF('week', DATE '2024-01-07', DATE '2024-01-08')": "0",
    "EPOCH(TIMESTAMP '2024-01-07 12:00:00.5')": "1704628800.5",
    "DATE_PART('epoch', TIMESTAMP '2024-01-07 12:00:00.5')": "1704628800.5",
    "DATE_PART('epoch', DATE '2024-01-07')": "1704585600.0",
    "WEEK(DATE '2021-01-01')": "53",
    # right as sqlglot writes them (kept here so a sqlglot upgrade cannot break them silently)
    "DATE_PART('doy', DATE '2024-03-01')": "61",
    "DATE_PART('week', DATE '2021-01-01')": "53",
    "WEEKOFYEAR(DATE '2021-01-01')": "53",
    "DAYOFYEAR(DATE '2024-03-01')": "61",
    "DATE_TRUNC('week', TIMESTAMP '2024-01-10 12:00:00')": "2024-01-08 00:00:00",
    "STRFTIME(TIMESTAMP '2024-01-07 13:05:09', '%Y-%m-%d %H:%M:%S')": "2024-01-07 13:05:09",
    "STRFTIME(DATE '2024-01-07', '%a %A %b %B %-m/%-d')": "Sun Sunday Jan January 1/7",
    "-7 // 2": "-3",
    "7 / 2": "3.5",
    "CAST(7 AS BIGINT) / CAST(2 AS BIGINT)": "3.5",
    "[10, 20, 30][1]": "10",
}


def _same(duckdb: str, spark: str | None) -> bool:
    try:
        return spark is not None and float(duckdb) == float(spark)
    except ValueError:
        return duckdb == spark


def test_duckdb_functions_compute_duckdbs_values_on_spark(engine) -> None:
    exprs = list(DUCKDB)
    query = "SELECT " + ", ".join(f"CAST({e} AS VARCHAR) AS v{i}" for i, e in enumerate(exprs))
    model = Model(name="db.m", kind=ModelKind(name=KindName.FULL), dialect="duckdb", query=query,
                  path="models/m.sql", line=1)
    row = engine.session.fetchall(render_sql(model, RenderContext(), MacroRegistry()))[0]
    wrong = {e: (DUCKDB[e], row[i]) for i, e in enumerate(exprs) if not _same(DUCKDB[e], row[i])}
    assert wrong == {}
