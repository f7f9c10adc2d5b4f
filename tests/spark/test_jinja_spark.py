"""A Jinja incremental model (issue 22) computes on Spark what SQLMesh computes: its query, a
`JINJA_QUERY_BEGIN` block calling a macro of `macros/*.sql`, is rendered for each interval with
`{{ start_ds }}`/`{{ end_ds }}`; its Jinja pre-statement runs before it and its Jinja audit after
it (rendering and errors without Spark: tests/unit/test_jinja.py)."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context

pytestmark = pytest.mark.spark

CONFIG = """model_defaults:
  dialect: spark
  cron: '@daily'
variables:
  bonus: 100
"""


@pytest.fixture
def schema(engine):
    name = f"j_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def test_a_jinja_incremental_model_with_a_macro_from_macros_sql(tmp_path, engine, schema) -> None:
    files = {
        "macros/amounts.sql": "{% macro with_bonus(col) -%}\n  {{ col }} * 10 + {{ var('bonus') }}\n{%- endmacro %}\n",
        "models/days.sql": f"""
            MODEL (name {schema}.days, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
                   start '2024-01-01', audits (above_bonus));

            JINJA_STATEMENT_BEGIN;
            SET mesh.jinja.day = '{{{{ start_ds }}}}';
            JINJA_END;

            JINJA_QUERY_BEGIN;
            SELECT ds, {{{{ with_bonus('day(ds)') }}}} AS amount, '{{{{ end_ds }}}}' AS end_ds
            FROM (SELECT explode(sequence(CAST('{{{{ start_ds }}}}' AS DATE), CAST('{{{{ end_ds }}}}' AS DATE))) AS ds)
            JINJA_END;

            AUDIT (name above_bonus);
            JINJA_QUERY_BEGIN;
            SELECT * FROM {{{{ this_model }}}} WHERE amount <= {{{{ var('bonus') }}}}
            JINJA_END;
            """,
    }
    ctx = Context(write_project(tmp_path / "p", files, CONFIG), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-04 00:00:00"))
        rows = engine.session.fetchall(f"SELECT CAST(ds AS STRING), amount, end_ds FROM {schema}.days ORDER BY ds")
        assert [tuple(r) for r in rows] == [("2024-01-01", 110, "2024-01-01"), ("2024-01-02", 120, "2024-01-02"),
                                            ("2024-01-03", 130, "2024-01-03")]
        assert (engine.session.spark.conf.get("mesh.jinja.day", None) or "").strip("'") in {"2024-01-01", "2024-01-02", "2024-01-03"}
    finally:
        ctx.close()
