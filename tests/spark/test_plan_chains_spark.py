"""Issue 8's wrong-data case, end to end on Spark: a breaking seed change and a non-breaking
change to its child in one plan must rebuild the grandchild, in dev and then in prod."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.snapshot import ChangeCategory as C

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
WHEN = "2020-01-08"


@pytest.fixture
def schema(engine):
    name = f"qs_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__min", f"mesh__{name}"):
        engine.drop_schema(s, cascade=True)


def _quickstart(root: Path, schema: str) -> Path:
    """The example project under its own schema (tests share one metastore), starting in 2020."""
    root.mkdir(parents=True)
    for part in ("config.yaml", "models", "seeds", "audits", "macros"):
        source = EXAMPLE / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, root / part)
    for path in [root / "config.yaml", *(root / "models").glob("*.sql")]:
        text = path.read_text().replace("sqlmesh_example", schema)
        path.write_text(text.replace("start: 2025-06-12", "start: 2020-01-01"))
    return root


def _edit(path: Path, old: str, new: str) -> None:
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def _orders(ctx: Context, view: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.fetchall(f"SELECT item_id, num_orders FROM {view} ORDER BY item_id")]


def test_breaking_seed_and_non_breaking_child_rebuild_full_model(tmp_path, engine, schema):
    root = _quickstart(tmp_path / "qs", schema)
    ctx = Context(root, engine=engine)
    ctx.apply(ctx.plan(execution_time=WHEN))
    assert _orders(ctx, f"{schema}.full_model") == [(1, 5), (2, 1), (3, 1)]

    seed = root / "seeds" / "seed_data.csv"
    seed.write_text(seed.read_text().rstrip("\n") + "\n1,3,2020-01-01\n")
    _edit(root / "models" / "incremental_model.sql", "  item_id,", "  item_id,\n  'z' AS new_column,")
    ctx.reload()
    dev = ctx.plan("min", execution_time=WHEN)
    full = f"{schema}.full_model"
    assert dev.category(f"{schema}.seed_model") == C.BREAKING
    assert dev.category(f"{schema}.incremental_model") == C.NON_BREAKING
    assert dev.category(full) == C.INDIRECT_BREAKING and full in dev.backfills
    ctx.apply(dev)
    expected = [(1, 5), (2, 1), (3, 2)]
    assert _orders(ctx, f"{schema}__min.full_model") == expected
    assert _orders(ctx, f"{schema}.full_model") == [(1, 5), (2, 1), (3, 1)]  # prod untouched so far

    prod = ctx.plan(execution_time=WHEN)
    assert prod.category(full) == C.INDIRECT_BREAKING and prod.backfills == {}  # dev built it
    ctx.apply(prod)
    assert _orders(ctx, f"{schema}.full_model") == expected
