"""INCREMENTAL_BY_PARTITION and INCREMENTAL_UNMANAGED on Spark, through Context on the shared session.

A raw table of dated rows per region feeds each model one day at a time: BY_PARTITION (and
UNMANAGED with `insert_overwrite`) replace exactly the partitions a day's output holds, UNMANAGED
appends, and nothing outside what a batch produced is touched.
"""

from __future__ import annotations

import uuid
from datetime import date

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark

# Day 1 holds eu and us; day 2 holds only eu (a new eu content), day 3 only apac.
ROWS = [(1, "eu", 10, "2020-01-01"), (2, "eu", 20, "2020-01-01"), (3, "us", 30, "2020-01-01"),
        (4, "eu", 40, "2020-01-02"),
        (5, "apac", 50, "2020-01-03")]


@pytest.fixture
def schema(engine):
    name = f"pk_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


@pytest.fixture
def raw(engine, schema) -> str:
    table = f"{schema}_raw.sales"
    engine.catalog.create_schema(f"{schema}_raw")
    values = ", ".join(f"({i}, '{r}', {v}, DATE'{d}')" for i, r, v, d in ROWS)
    engine.session.execute(f"CREATE TABLE {table} USING parquet AS SELECT * FROM VALUES {values} AS t(id, region, v, ds)")
    return table


def _context(tmp_path, engine, schema: str, raw: str, kind: str, props: str = "") -> Context:
    root = write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}\n  columns:\n    id: int\n    region: string\n    v: int\n    ds: date\n",
        "models/sales.sql": f"""
            MODEL (name {schema}.sales, kind {kind}, start '2020-01-01'{props});

            SELECT id, region, v, ds FROM {raw} WHERE ds BETWEEN @start_ds AND @end_ds
            """,
    })
    return Context(root, engine=engine)


def _days(ctx: Context, *days: str) -> None:
    """Process what is due as each day begins: a plan first, then `mesh run`."""
    ctx.reviews.apply(ctx.plans.plan(execution_time=days[0]))
    for day in days[1:]:
        ctx.runs.run(execution_time=day)


def _ids(engine: SparkEngine, schema: str) -> list[int]:
    return sorted(r[0] for r in engine.session.fetchall(f"SELECT id FROM {schema}.sales"))


def _partitions(ctx: Context, engine: SparkEngine, schema: str) -> list[str]:
    table = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{schema}.sales"].table_name
    return sorted(p["region"] or "" for p in engine.catalog.partitions(table))


def test_by_partition_replaces_only_the_partitions_a_batch_produced(tmp_path, engine, schema, raw):
    ctx = _context(tmp_path, engine, schema, raw, "INCREMENTAL_BY_PARTITION", ",\n  partitioned_by region")
    _days(ctx, "2020-01-02")
    assert _ids(engine, schema) == [1, 2, 3]
    ctx.runs.run(execution_time="2020-01-03")  # day 2 holds eu only: eu is replaced whole, us stays
    assert _ids(engine, schema) == [3, 4]
    ctx.runs.run(execution_time="2020-01-04")  # day 3 adds apac, touching nothing else
    assert _ids(engine, schema) == [3, 4, 5]
    assert _partitions(ctx, engine, schema) == ["apac", "eu", "us"]
    rows = engine.session.fetchall(f"SELECT id, region, v, ds FROM {schema}.sales WHERE id = 4")
    assert [tuple(r) for r in rows] == [(4, "eu", 40, date(2020, 1, 2))]


def test_unmanaged_appends_each_run_and_a_run_with_nothing_due_adds_nothing(tmp_path, engine, schema, raw):
    ctx = _context(tmp_path, engine, schema, raw, "INCREMENTAL_UNMANAGED")
    _days(ctx, "2020-01-02", "2020-01-03", "2020-01-04")
    assert _ids(engine, schema) == [1, 2, 3, 4, 5]
    assert ctx.runs.run(execution_time="2020-01-04") == 0  # nothing due: nothing appended twice
    assert _ids(engine, schema) == [1, 2, 3, 4, 5]


def test_unmanaged_insert_overwrite_replaces_the_partitions_its_output_holds(tmp_path, engine, schema, raw):
    ctx = _context(tmp_path, engine, schema, raw, "INCREMENTAL_UNMANAGED (insert_overwrite true)",
                   ",\n  partitioned_by region")
    _days(ctx, "2020-01-02", "2020-01-03")
    assert _ids(engine, schema) == [3, 4]
    assert _partitions(ctx, engine, schema) == ["eu", "us"]


def test_unmanaged_insert_overwrite_without_partitions_replaces_the_table(tmp_path, engine, schema, raw):
    ctx = _context(tmp_path, engine, schema, raw, "INCREMENTAL_UNMANAGED (insert_overwrite true)")
    _days(ctx, "2020-01-02", "2020-01-03")
    assert _ids(engine, schema) == [4]
