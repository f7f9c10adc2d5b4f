"""The loader's seed value checks agree with Spark's own casts (one query for the whole table)."""

from __future__ import annotations

from mesh_dagster.engine.adapter import sql_string
from tests.unit.test_seeds import CAST_CASES


def test_spark_casts_what_the_loader_accepts_and_refuses_the_rest(engine) -> None:
    """`try_cast` parses like the ANSI `CAST` a seed load runs, returning NULL instead of failing."""
    probes = ", ".join(f"try_cast({sql_string(value)} AS {type_text}) IS NOT NULL" for type_text, value, _ in CAST_CASES)
    (row,) = engine.session.fetchall(f"SELECT {probes}")
    disagreements = [(t, v, expected) for (t, v, expected), spark in zip(CAST_CASES, row) if spark is not expected]
    assert disagreements == []
