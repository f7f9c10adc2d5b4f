"""Forward-only changes on Spark: previews in dev (children included, never empty), schema
migration of the kept table in prod, --effective-from, and the schema-change policies at plan
and at run time."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from quickstart_copy import edit, quickstart

from mesh_dagster.context import Context
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

WHEN = "2020-01-08"


@pytest.fixture
def schema(engine):
    name = f"fo_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__fo", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _rows(ctx: Context, sql: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(sql)]


def test_forward_only_previews_in_dev_then_migrates_prod_in_place(tmp_path, engine, schema):
    root = quickstart(tmp_path / "qs", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time=WHEN))
    inc, full = f"{schema}.incremental_model", f"{schema}.full_model"
    prod_table = ctx.plans.plan(execution_time=WHEN).snapshots[inc].table_name
    prod_orders = _rows(ctx, f"SELECT item_id, num_orders FROM {full} ORDER BY item_id")

    edit(root / "models" / "incremental_model.sql", "  item_id,", "  item_id,\n  'z' AS new_column,")
    ctx.reload()
    dev = ctx.plans.plan("fo", execution_time=WHEN, forward_only=True)
    assert dev.category(inc) == C.FORWARD_ONLY
    assert dev.category(full) == C.INDIRECT_NON_BREAKING
    assert dev.previews == [inc, full]
    assert dev.snapshots[inc].table_name.endswith("__dev") and dev.snapshots[full].table_name.endswith("__dev")
    day = 24 * 3600 * 1000
    assert [(e - s) // day for s, e in dev.backfills[inc].intervals] == [1]  # the last interval only
    ctx.reviews.apply(dev)

    # The preview holds the last day with the new logic; the child's preview is built on it and
    # is not empty (SQLMesh on Spark shows 0 rows there).
    assert _rows(ctx, f"SELECT DISTINCT new_column, CAST(event_date AS STRING) FROM {schema}__fo.incremental_model") \
        == [("z", "2020-01-07")]
    assert _rows(ctx, f"SELECT COUNT(*) FROM {schema}__fo.full_model")[0][0] > 0
    # Prod is untouched: same table, same columns, same rows.
    assert "new_column" not in engine.catalog.columns(prod_table)
    assert _rows(ctx, f"SELECT item_id, num_orders FROM {full} ORDER BY item_id") == prod_orders

    again = ctx.plans.plan("fo", execution_time=WHEN)  # the environment keeps reading its previews
    assert not again.has_changes and again.snapshots[inc].table_name == dev.snapshots[inc].table_name

    prod = ctx.plans.plan(execution_time=WHEN)
    assert prod.category(inc) == C.FORWARD_ONLY and prod.previews == []
    assert prod.snapshots[inc].table_name == prod_table and prod.backfills == {}
    assert "adds column new_column" in prod.schema_changes[inc].diff.describe_additive()
    ctx.reviews.apply(prod)
    assert "new_column" in engine.catalog.columns(prod_table)  # migrated in place: ALTER TABLE ADD COLUMNS
    assert _rows(ctx, f"SELECT COUNT(*), COUNT(new_column) FROM {inc}") == [(7, 0)]  # history kept, not recomputed
    assert _rows(ctx, f"SELECT item_id, num_orders FROM {full} ORDER BY item_id") == prod_orders

    # Once no environment reads them, the janitor drops the previews and forgets their intervals.
    previews = [dev.snapshots[n] for n in (inc, full)]
    ctx.upkeep.invalidate("fo")
    dropped = ctx.upkeep.janitor(ignore_ttl=True)["tables"]
    assert {p.table_name for p in previews} <= set(dropped)
    assert not any(engine.catalog.table_exists(p.table_name) for p in previews)
    assert not any(ctx.state.intervals.get_intervals([p.interval_key]).get(p.interval_key) for p in previews)
    assert engine.catalog.table_exists(prod_table)


def test_effective_from_recomputes_from_that_date_after_deploy(tmp_path, engine, schema):
    root = quickstart(tmp_path / "qs", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time=WHEN))
    inc = f"{schema}.incremental_model"
    edit(root / "models" / "incremental_model.sql", "  item_id,", "  item_id,\n  'z' AS new_column,")
    ctx.reload()
    with pytest.raises(PlanError, match="in the future"):
        ctx.plans.plan(execution_time=WHEN, forward_only=True, effective_from="2020-02-01")
    prod = ctx.plans.plan(execution_time=WHEN, forward_only=True, effective_from="2020-01-05")
    assert [b for b in prod.backfills] == [inc]
    ctx.reviews.apply(prod)
    assert _rows(ctx, f"SELECT CAST(event_date AS STRING), new_column FROM {inc} "
                      "WHERE event_date >= '2020-01-04' ORDER BY event_date") == [
        ("2020-01-04", None), ("2020-01-05", "z"), ("2020-01-06", "z"), ("2020-01-07", "z")]


INC = """MODEL (
  name {schema}.inc,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds{props}),
  start '2020-01-01',
  cron '@daily'
);
SELECT id, {extra}CAST(ds AS DATE) AS ds FROM VALUES (1, 'a', '2020-01-01'), (2, 'b', '2020-01-02') AS t(id, a, ds)
WHERE ds BETWEEN @start_ds AND @end_ds
"""


def _inc_project(root: Path, schema: str, extra: str = "a, ", props: str = "") -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: 2020-01-01\n")
    (root / "models" / "inc.sql").write_text(INC.format(schema=schema, extra=extra, props=props))
    return root


def test_destructive_forward_only_change_is_refused_then_allowed(tmp_path, engine, schema):
    root = _inc_project(tmp_path / "p", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    name = f"{schema}.inc"
    table = ctx.plans.plan(execution_time="2020-01-03").snapshots[name].table_name
    stored = ctx.state.snapshots.all_snapshot_ids()

    _inc_project(root, schema, extra="")  # drops column a
    ctx.reload()
    with pytest.raises(PlanError) as refused:
        ctx.plans.plan(execution_time="2020-01-03", forward_only=True)
    assert name in str(refused.value) and "drops column a" in str(refused.value)
    assert "--allow-destructive-model" in str(refused.value)
    assert ctx.state.snapshots.all_snapshot_ids() == stored and "a" in engine.catalog.columns(table)  # nothing written

    plan = ctx.plans.plan(execution_time="2020-01-03", forward_only=True, allow_destructive=[name])
    ctx.reviews.apply(plan)
    assert list(engine.catalog.columns(table)) == ["id", "ds"]  # the kept table lost the column, not its rows
    assert _rows(ctx, f"SELECT id FROM {name} ORDER BY id") == [(1,), (2,)]


def test_policies_are_checked_against_the_real_table_at_run_time(tmp_path, engine, schema):
    root = _inc_project(tmp_path / "p", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    snap = ctx.plans.plan(execution_time="2020-01-03").snapshots[f"{schema}.inc"]
    engine.session.execute(f"ALTER TABLE {snap.table_name} ADD COLUMNS (by_hand STRING)")  # changed outside mesh

    with pytest.raises(PlanError, match="drops column by_hand"):
        ctx.runs.run(execution_time="2020-01-04")
    day = 24 * 3600 * 1000
    [(start, end)] = ctx.state.intervals.get_intervals([snap.interval_key])[snap.interval_key]
    assert (end - start) // day == 2  # 01-01 and 01-02: nothing recorded for 01-03
    assert "by_hand" in engine.catalog.columns(snap.table_name)


def test_ignore_policy_keeps_the_column_and_writes_null(tmp_path, engine, schema):
    root = _inc_project(tmp_path / "p", schema, props=", on_destructive_change ignore")
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    table = ctx.plans.plan(execution_time="2020-01-03").snapshots[f"{schema}.inc"].table_name
    _inc_project(root, schema, extra="", props=", on_destructive_change ignore")
    ctx.reload()
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03", forward_only=True, effective_from="2020-01-02"))
    assert "a" in engine.catalog.columns(table)
    assert _rows(ctx, f"SELECT id, a FROM {table} ORDER BY id") == [(1, "a"), (2, None)]
