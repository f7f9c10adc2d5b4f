"""INCREMENTAL_BY_UNIQUE_KEY on plain Parquet, through Context on the shared session: batches upsert
by key in order (no MERGE: the table is rewritten from itself and the batch's rows), `when_matched`
and `merge_filter` shape what a match does, and a batch repeating a key writes nothing.

Each test is a small project over a raw table of dated changes: the model reads the changes of
its interval, so day after day the table holds the latest row of every key.
"""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator

pytestmark = pytest.mark.spark

# Day 1 inserts three keys; day 2 changes key 2 and adds key 4; day 3 brings a late change of key 1.
CHANGES = [
    (1, "ann", 10, "2020-01-01"), (2, "bob", 20, "2020-01-01"), (3, "cid", 30, "2020-01-01"),
    (2, "bob", 21, "2020-01-02"), (4, "dan", 40, "2020-01-02"),
    (1, "ann", 11, "2020-01-03"),
]


@pytest.fixture
def schema(engine):
    name = f"uk_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _raw(engine: SparkEngine, schema: str, rows: list[tuple]) -> str:
    table = f"{schema}_raw.changes"
    engine.catalog.create_schema(f"{schema}_raw")
    values = ", ".join(f"({i}, {_sql(n)}, {_sql(v)}, DATE'{d}')" for i, n, v, d in rows)
    engine.session.execute(f"CREATE TABLE {table} USING parquet AS SELECT * FROM VALUES {values} AS t(id, name, v, ds)")
    return table


def _sql(value) -> str:
    return "NULL" if value is None else repr(value) if isinstance(value, str) else str(value)


def _project(tmp_path, schema: str, raw: str, kind_props: str = "", props: str = "", select: str = "id, name, v, ds"):
    return write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}\n  columns:\n    id: int\n    name: string\n    v: int\n    ds: date\n",
        "models/latest.sql": f"""
            MODEL (
              name {schema}.latest,
              kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id{kind_props}),
              start '2020-01-01'{props}
            );

            SELECT {select} FROM {raw} WHERE ds BETWEEN @start_ds AND @end_ds
            """,
    })


def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    """Sorted by value, NULLs last."""
    return sorted((tuple(r) for r in engine.session.fetchall(sql)), key=lambda row: [(v is None, v or 0) for v in row])


def _day(ctx: Context, day: str) -> None:
    """Process the intervals due when `day` begins (the first one through a plan, later ones by `run`)."""
    if ctx.state.environments.get_environment("prod") is None:
        ctx.reviews.apply(ctx.plans.plan(execution_time=day))
    else:
        ctx.runs.run(execution_time=day)


def test_each_day_upserts_changed_and_new_keys_and_a_late_row_updates_an_old_key(tmp_path, engine, schema):
    raw = _raw(engine, schema, CHANGES)
    ctx = Context(_project(tmp_path, schema, raw), engine=engine)
    view = f"{schema}.latest"

    _day(ctx, "2020-01-02")  # the first load is the query's output
    assert _rows(engine, f"SELECT id, name, v FROM {view}") == [(1, "ann", 10), (2, "bob", 20), (3, "cid", 30)]
    _day(ctx, "2020-01-03")  # key 2 replaced, key 4 inserted, keys 1 and 3 untouched
    assert _rows(engine, f"SELECT id, v, ds FROM {view}") == [
        (1, 10, _d("2020-01-01")), (2, 21, _d("2020-01-02")), (3, 30, _d("2020-01-01")), (4, 40, _d("2020-01-02"))]
    _day(ctx, "2020-01-04")  # the late row of key 1 replaces it whole
    assert _rows(engine, f"SELECT id, v, ds FROM {view}") == [
        (1, 11, _d("2020-01-03")), (2, 21, _d("2020-01-02")), (3, 30, _d("2020-01-01")), (4, 40, _d("2020-01-02"))]
    assert engine.session.fetchall(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {view}") == [(4, 4)]

    snap = ctx.plans.plan("prod", allow_empty=True).snapshots[view]
    assert ctx.state.intervals.get_intervals([snap.interval_key])[snap.interval_key] == [
        (to_ms("2020-01-01"), to_ms("2020-01-04"))]
    leftovers = [t for t in engine.catalog.list_objects(f"mesh__{schema}") if t.startswith("__mesh_tmp_")]
    assert leftovers == []  # the staging tables of each rewrite are gone


def test_batches_of_a_backfill_run_in_order(tmp_path, engine, schema):
    """One apply over three days, one day per batch: each batch upserts over the previous one."""
    raw = _raw(engine, schema, CHANGES)
    ctx = Context(_project(tmp_path, schema, raw, kind_props=", batch_size 1"), engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-04")
    ctx.reviews.apply(plan)
    assert _rows(engine, f"SELECT id, v FROM {schema}.latest") == [(1, 11), (2, 21), (3, 30), (4, 40)]


def _d(text: str):
    from datetime import date

    return date.fromisoformat(text)


def test_when_matched_updates_only_the_columns_it_sets_and_may_delete(tmp_path, engine, schema):
    changes = [(1, "ann", 10, "2020-01-01"), (2, "bob", 20, "2020-01-01"), (3, "cid", 30, "2020-01-01"),
               (1, "ANN", 11, "2020-01-02"),  # name kept (not set), v updated
               (2, "BOB", None, "2020-01-02"),  # a NULL value deletes the key
               (5, "eve", 50, "2020-01-02")]  # new keys are inserted whole
    raw = _raw(engine, schema, changes)
    when_matched = (", when_matched (WHEN MATCHED AND source.v IS NULL THEN DELETE "
                    "WHEN MATCHED THEN UPDATE SET target.v = source.v, target.ds = source.ds)")
    ctx = Context(_project(tmp_path, schema, raw, kind_props=when_matched), engine=engine)
    _day(ctx, "2020-01-02")
    _day(ctx, "2020-01-03")
    assert _rows(engine, f"SELECT id, name, v FROM {schema}.latest") == [
        (1, "ann", 11), (3, "cid", 30), (5, "eve", 50)]


def test_merge_filter_limits_the_rows_a_new_row_can_replace(tmp_path, engine, schema):
    """Like a MERGE's ON condition: a table row the filter excludes is not matched, so the new row
    of its key is inserted beside it (the filter is the user's promise that such rows need no update)."""
    changes = [(1, "ann", 10, "2020-01-01"), (2, "bob", 20, "2020-01-01"),
               (1, "ann", 5, "2020-01-02"), (2, "bob", 25, "2020-01-02")]
    raw = _raw(engine, schema, changes)
    ctx = Context(_project(tmp_path, schema, raw, kind_props=", merge_filter source.v > target.v"), engine=engine)
    _day(ctx, "2020-01-02")
    _day(ctx, "2020-01-03")
    assert _rows(engine, f"SELECT id, v FROM {schema}.latest") == [(1, 5), (1, 10), (2, 25)]


def test_a_key_repeated_in_a_batch_is_refused_naming_it_and_nothing_is_written(tmp_path, engine, schema):
    changes = [(1, "ann", 10, "2020-01-01"), (2, "bob", 20, "2020-01-01"),
               (2, "bob", 21, "2020-01-02"), (2, "bob", 22, "2020-01-02"), (3, "cid", 30, "2020-01-02")]
    raw = _raw(engine, schema, changes)
    ctx = Context(_project(tmp_path, schema, raw), engine=engine)
    _day(ctx, "2020-01-02")
    with pytest.raises(ModelError) as e:
        _day(ctx, "2020-01-03")
    assert str(e.value) == (
        f"models/latest.sql:3: unique_key id of {schema}.latest is not unique in the query's output for "
        "[2020-01-02 - 2020-01-02]: "
        "id=2 (2 rows). Nothing was written: make the query return one row per key (e.g. keep the latest with "
        "QUALIFY ROW_NUMBER() OVER (PARTITION BY <key> ORDER BY <column> DESC) = 1)")
    assert _rows(engine, f"SELECT id, v FROM {schema}.latest") == [(1, 10), (2, 20)]
    snap = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{schema}.latest"]
    assert ctx.state.intervals.get_intervals([snap.interval_key])[snap.interval_key] == [
        (to_ms("2020-01-01"), to_ms("2020-01-02"))]  # the refused day is still to do


def test_a_compound_key_of_expressions_and_a_partitioned_table(tmp_path, engine, schema):
    """Keys compare null-safely (a NULL key part matches NULL, so re-runs never duplicate); on a
    partitioned table a row moving to another partition leaves no copy behind."""
    changes = [(1, "ann", 10, "2020-01-01"), (1, None, 11, "2020-01-01"), (2, "bob", 20, "2020-01-01"),
               (1, "ANN", 12, "2020-01-02"), (1, None, 13, "2020-01-02")]
    raw = _raw(engine, schema, changes)
    root = _project(tmp_path, schema, raw, kind_props="", props=",\n  partitioned_by ds")
    path = root / "models" / "latest.sql"
    path.write_text(path.read_text().replace("unique_key id", "unique_key (id, LOWER(name))"))
    ctx = Context(root, engine=engine)
    _day(ctx, "2020-01-02")
    _day(ctx, "2020-01-03")
    assert _rows(engine, f"SELECT id, name, v, ds FROM {schema}.latest") == [
        (1, "ANN", 12, _d("2020-01-02")), (1, None, 13, _d("2020-01-02")), (2, "bob", 20, _d("2020-01-01"))]
    table = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{schema}.latest"].table_name
    assert sorted(p["ds"] for p in engine.catalog.partitions(table)) == ["2020-01-01", "2020-01-02"]

    plan = ctx.plans.plan("prod", allow_empty=True)
    evaluator = SnapshotEvaluator(ctx.project, engine, plan.snapshots)  # day 2 once more, as a retry would
    evaluator.evaluate(plan.snapshots[f"{schema}.latest"], to_ms("2020-01-02"), to_ms("2020-01-03"), to_ms("2020-01-03"))
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {schema}.latest") == [(3,)]
