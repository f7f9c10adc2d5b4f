"""Issue 8's wrong-data case, end to end on Spark: a breaking seed change and a non-breaking
change to its child in one plan must rebuild the grandchild, in dev and then in prod."""

from __future__ import annotations

import uuid

import pytest
from quickstart_copy import edit, quickstart

from mesh_dagster.context import Context
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

WHEN = "2020-01-08"


@pytest.fixture
def schema(engine):
    name = f"qs_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__min", f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _orders(ctx: Context, view: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(f"SELECT item_id, num_orders FROM {view} ORDER BY item_id")]


def test_breaking_seed_and_non_breaking_child_rebuild_full_model(tmp_path, engine, schema):
    root = quickstart(tmp_path / "qs", schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time=WHEN))
    assert _orders(ctx, f"{schema}.full_model") == [(1, 5), (2, 1), (3, 1)]

    seed = root / "seeds" / "seed_data.csv"
    seed.write_text(seed.read_text().rstrip("\n") + "\n1,3,2020-01-01\n")
    edit(root / "models" / "incremental_model.sql", "  item_id,", "  item_id,\n  'z' AS new_column,")
    ctx.reload()
    dev = ctx.plans.plan("min", execution_time=WHEN)
    full = f"{schema}.full_model"
    assert dev.category(f"{schema}.seed_model") == C.BREAKING
    assert dev.category(f"{schema}.incremental_model") == C.NON_BREAKING
    assert dev.category(full) == C.INDIRECT_BREAKING and full in dev.backfills
    ctx.reviews.apply(dev)
    expected = [(1, 5), (2, 1), (3, 2)]
    assert _orders(ctx, f"{schema}__min.full_model") == expected
    assert _orders(ctx, f"{schema}.full_model") == [(1, 5), (2, 1), (3, 1)]  # prod untouched so far

    prod = ctx.plans.plan(execution_time=WHEN)
    assert prod.category(full) == C.INDIRECT_BREAKING and prod.backfills == {}  # dev built it
    ctx.reviews.apply(prod)
    assert _orders(ctx, f"{schema}.full_model") == expected
