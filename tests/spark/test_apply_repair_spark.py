"""Issue 8 on Spark: an apply records the environment before moving its views; one stopped
half-way through the views (killed, or Ctrl-C: nothing takes it back — a view that fails is put
back instead, tests/spark/test_failed_plans.py) is repaired by the next apply, even one without
changes, and the janitor keeps the tables those half-moved views still read until then."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest

from mesh_dagster.context import Context
from tests.project_builder import write_project


@pytest.fixture
def schema(engine):
    name = f"rep_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


class ViewsFailAfter:
    """The real engine's catalog, except that the apply is interrupted (Ctrl-C) while it creates the
    `n`-th view."""

    def __init__(self, catalog: Any, n: int):
        self._catalog, self._left = catalog, n

    def create_view(self, *args: Any, **kwargs: Any) -> None:
        self._left -= 1
        if self._left == 0:
            raise KeyboardInterrupt
        self._catalog.create_view(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)


def _model(schema: str, name: str, query: str) -> str:
    return f"MODEL (name {schema}.{name}, kind FULL);\n{query}\n"


def _rows(ctx: Context, view: str) -> list[tuple]:
    return [tuple(r) for r in ctx.engine.session.fetchall(f"SELECT * FROM {view}")]


def test_views_half_moved_by_a_failed_apply_are_repaired(tmp_path: Path, engine, schema: str) -> None:
    root = write_project(tmp_path / "p", {
        "models/a.sql": _model(schema, "a", "SELECT 1 AS x"),
        "models/b.sql": _model(schema, "b", f"SELECT x FROM {schema}.a"),
        "models/c.sql": _model(schema, "c", "SELECT 2 AS y"),
    })
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan())
    old_b = ctx.state.environments.get_environment("prod").snapshot_by_name()[f"{schema}.b"].table_name

    (root / "models/a.sql").write_text(_model(schema, "a", "SELECT 10 AS x"))
    (root / "models/c.sql").unlink()
    ctx.reload()
    failing_engine = copy.copy(engine)  # the real engine, its catalog wrapped
    failing_engine.catalog = ViewsFailAfter(engine.catalog, 2)
    failing = Context(root, engine=failing_engine, state_url=ctx.state.url)
    with pytest.raises(KeyboardInterrupt):
        failing.reviews.apply(failing.plans.plan())
    failing.close()
    assert ctx.state.environments.get_environment("prod").finalized_ts is None
    assert _rows(ctx, f"{schema}.a") == [(10,)] and _rows(ctx, f"{schema}.b") == [(1,)]  # half moved
    assert _rows(ctx, f"{schema}.c") == [(2,)]

    ctx.upkeep.janitor(ignore_ttl=True)
    assert engine.catalog.table_exists(old_b)  # the view of b still reads it

    repair = ctx.plans.plan()
    assert not repair.has_changes and repair.needs_apply
    ctx.reviews.apply(repair)
    assert ctx.state.environments.get_environment("prod").finalized_ts is not None
    assert _rows(ctx, f"{schema}.a") == [(10,)] and _rows(ctx, f"{schema}.b") == [(10,)]
    assert not engine.catalog.table_exists(f"{schema}.c")

    ctx.upkeep.janitor(ignore_ttl=True)
    assert not engine.catalog.table_exists(old_b)
    ctx.close()
