"""Column names with spaces or hyphens, as SQLMesh projects write them (`MAX(0) AS "country code"`,
issue 22), through every kind that writes a table, on Spark: created, written, rewritten by a
second run, read through the environment's views; a name we could not quote everywhere is refused
at its line before anything is written."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError

pytestmark = pytest.mark.spark

CONFIG = """model_defaults:
  dialect: duckdb
  cron: '@daily'
  start: '2023-01-01'
"""


@pytest.fixture
def schema(engine):
    name = f"sp_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _files(schema: str) -> dict[str, str]:
    return {
        "seeds/places.csv": "id,country code,ship-to\n1,DE,Berlin\n2,FR,Paris\n3,DE,Bonn\n",
        "models/places.sql": f"MODEL (name {schema}.places, kind SEED (path '../seeds/places.csv'));",
        "models/full.sql": f"""
            MODEL (name {schema}.by_country, kind FULL);
            SELECT "country code", COUNT(*) AS "place count", MAX(0) AS "max zero"
            FROM {schema}.places GROUP BY "country code" """,
        "models/daily.sql": f"""
            MODEL (name {schema}.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column order_day, batch_size 1), partitioned_by id);
            SELECT p.id, p."country code", CAST(@start_ds AS DATE) AS order_day, p.id * 10 AS "order total"
            FROM {schema}.places AS p""",
        "models/latest.sql": f"""
            MODEL (name {schema}.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));
            SELECT id, "country code", CAST(@start_ds AS DATE) AS "last seen" FROM {schema}.places""",
        "models/history.sql": f"""
            MODEL (name {schema}.history, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns ["ship-to"]));
            SELECT id, "ship-to" FROM {schema}.places""",
        "models/view.sql": f"""
            MODEL (name {schema}.totals, kind VIEW);
            SELECT "country code", SUM("order total") AS "sum total" FROM {schema}.daily GROUP BY "country code" """,
    }


def test_spaced_names_are_written_by_every_kind_and_read_back(tmp_path, engine, schema) -> None:
    ctx = Context(write_project(tmp_path / "p", _files(schema), CONFIG), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2023-01-03 00:00:00"))
        ctx.runs.run(execution_time="2023-01-04 00:00:00")  # the incremental kinds write again, into what they wrote
        rows = {
            "by_country": f"SELECT `country code`, `place count`, `max zero` FROM {schema}.by_country",
            "daily": f"SELECT COUNT(*), SUM(`order total`), COUNT(DISTINCT order_day) FROM {schema}.daily",
            "latest": f"SELECT id, `country code`, CAST(`last seen` AS STRING) FROM {schema}.latest",
            "history": f"SELECT id, `ship-to`, valid_to IS NULL FROM {schema}.history",
            "totals": f"SELECT `country code`, `sum total` FROM {schema}.totals",
        }
        got = {name: sorted(tuple(r) for r in engine.session.fetchall(sql)) for name, sql in rows.items()}
        assert got == {
            "by_country": [("DE", 2, 0), ("FR", 1, 0)],
            "daily": [(9, 180, 3)],  # 3 days of 3 places
            "latest": [(1, "DE", "2023-01-03"), (2, "FR", "2023-01-03"), (3, "DE", "2023-01-03")],
            "history": [(1, "Berlin", True), (2, "Paris", True), (3, "Bonn", True)],
            "totals": [("DE", 120), ("FR", 60)],
        }
    finally:
        ctx.close()


@pytest.mark.parametrize(("query", "message"), [
    ('MODEL (name {s}.m, kind FULL);\nSELECT 1 AS id,\n  2 AS "a.b"',
     r"models/m.sql:3: Column name 'a.b' is not supported: use letters, digits and underscores "
     r"\(words may be separated by spaces or hyphens\)"),
    ('MODEL (name {s}.m, kind FULL,\n  partitioned_by "a b");\nSELECT 1 AS "a b"',
     r"models/m.sql:2: Partition column 'a b' is not supported: the Hive metastore cannot filter partitions "
     r"by a name with spaces or hyphens; output it as `a_b` instead"),
    ('MODEL (name {s}.m,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column "order-day"));\nSELECT CURRENT_DATE AS "order-day"',
     r"models/m.sql:2: Partition column 'order-day' is not supported"),
])
def test_a_name_we_cannot_quote_or_partition_by_is_refused_at_its_line(tmp_path, engine, schema, query,
                                                                       message) -> None:
    files = {"models/m.sql": query.format(s=schema)}
    with pytest.raises(ModelError, match=message):
        Context(write_project(tmp_path / "p", files, CONFIG), engine=engine).plans.plan()
    assert not engine.catalog.schema_exists(f"mesh__{schema}")
