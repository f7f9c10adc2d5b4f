"""SQLMesh's defaults that decide data, applied on Spark (issue 22): a seed without `columns` is
typed as pandas infers it (so a join on its ids and arithmetic on its numbers work as in SQLMesh),
and a start-less incremental child holds its parent's whole history, not the last day."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context

pytestmark = pytest.mark.spark

CONFIG = """model_defaults:
  dialect: spark
  cron: '@daily'
"""


@pytest.fixture
def schema(engine):
    name = f"d_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def test_untyped_seed_and_start_less_child_compute_what_sqlmesh_computes(tmp_path, engine, schema) -> None:
    files = {
        "seeds/items.csv": "id,price,active,day\n1,1.5,true,2023-01-01\n2,2.25,false,2023-01-02\n",
        "models/items.sql": f"MODEL (name {schema}.items, kind SEED (path '../seeds/items.csv'));",
        "models/orders.sql": f"""
            MODEL (name {schema}.orders, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2023-01-01');
            SELECT explode(sequence(CAST(@start_ds AS DATE), CAST(@end_ds AS DATE))) AS ds, 1 AS item_id""",
        "models/daily.sql": f"""
            MODEL (name {schema}.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
            SELECT o.ds, i.price * 2 AS doubled, i.active
            FROM {schema}.orders AS o JOIN {schema}.items AS i ON o.item_id = i.id
            WHERE o.ds BETWEEN @start_ds AND @end_ds""",
    }
    ctx = Context(write_project(tmp_path / "p", files, CONFIG), engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2023-01-08 00:00:00"))
        (types,) = engine.session.fetchall(f"SELECT typeof(id), typeof(price), typeof(active), typeof(day) "
                                           f"FROM {schema}.items LIMIT 1")
        assert tuple(types) == ("bigint", "double", "boolean", "string")
        days = engine.session.fetchall(f"SELECT COUNT(*), MIN(ds), SUM(doubled) FROM {schema}.daily")[0]
        assert (days[0], str(days[1]), days[2]) == (7, "2023-01-01", 21.0)  # 7 days of history, not 1
    finally:
        ctx.close()


def test_a_seeds_batch_size_sends_its_rows_in_batches_and_writes_them_once(tmp_path, engine, schema,
                                                                         monkeypatch) -> None:
    """SQLMesh's seed `batch_size`: rows reach Spark at most that many at a time; the table holds
    every row once, loaded in one write."""
    rows = "".join(f"{i},n{i}\n" for i in range(7))
    files = {"seeds/s.csv": "id,name\n" + rows,
             "models/s.sql": f"MODEL (name {schema}.s, kind SEED (path '../seeds/s.csv', batch_size 2));"}
    ctx = Context(write_project(tmp_path / "p", files, CONFIG), engine=engine)
    sent: list[int] = []
    create = engine.session.spark.createDataFrame

    def counted(data, *args, **kwargs):
        if isinstance(data, list):
            sent.append(len(data))
        return create(data, *args, **kwargs)

    monkeypatch.setattr(engine.session.spark, "createDataFrame", counted)
    try:
        ctx.reviews.apply(ctx.plans.plan())
        assert [n for n in sent if n] == [2, 2, 2, 1]
        got = engine.session.fetchall(f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(id), MAX(name) FROM {schema}.s")[0]
        assert tuple(got) == (7, 7, 21, "n6")
    finally:
        ctx.close()
