"""Issue 19, point 5 on Spark: a failed plan leaves a way out.

A forward-only plan where a FULL model gains a column and a unique-key model changes its key used
to fail half-way through its views (the kept FULL table lacked the column), naming no model, and
left prod on the failed plan: `mesh run` then upserted by the never-applied key. Now the kept
FULL table takes the column; a view that fails names its model and puts the environment back
(record and views) as it served before; `mesh run` only evaluates a finished plan's snapshots,
even while an interrupted apply is recorded; and a retry once the cause is fixed applies.

The project: raw dated changes (an external table); `uk` keeps the latest row per key; `f`, a
FULL model, counts its rows per item. On 2020-01-04 key 1 comes back with another item: keyed on
`id` it replaces its row, keyed on `(id, item_id)` it becomes a second row.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.review import PlanStatus
from mesh_dagster.core.snapshots.snapshot import ChangeCategory
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.execution.events import LogLines

CHANGES = [(1, 10, "2020-01-01"), (2, 20, "2020-01-01"), (3, 10, "2020-01-02"), (4, 30, "2020-01-03"),
           (1, 20, "2020-01-04")]
UK = """MODEL (
  name {schema}.uk,
  kind INCREMENTAL_BY_UNIQUE_KEY (unique_key {key}),
  start '2020-01-01',
  cron '@daily'
);
SELECT id, item_id, ds FROM {schema}_raw.changes WHERE ds BETWEEN @start_ds AND @end_ds
"""
FULL = "MODEL (name {schema}.f, kind FULL, cron '@daily');\nSELECT item_id, {extra}COUNT(*) AS n FROM {schema}.uk GROUP BY item_id\n"
NEW = "MODEL (name {schema}.zz_new, kind FULL, cron '@daily');\nSELECT item_id FROM {schema}.f\n"


@pytest.fixture
def schema(engine: SparkEngine):
    name = f"fp_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _project(tmp_path: Path, engine: SparkEngine, schema: str) -> Path:
    engine.catalog.create_schema(f"{schema}_raw")
    values = ", ".join(f"({i}, {item}, DATE'{d}')" for i, item, d in CHANGES)
    engine.session.execute(f"CREATE TABLE {schema}_raw.changes USING parquet AS "
                           f"SELECT * FROM VALUES {values} AS t(id, item_id, ds)")
    return write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {schema}_raw.changes\n  columns:\n    id: int\n    item_id: int\n"
                                "    ds: date\n",
        "models/uk.sql": UK.format(schema=schema, key="id"),
        "models/f.sql": FULL.format(schema=schema, extra=""),
    })


def _change(root: Path, schema: str, *, new_model: bool = False) -> None:
    """The issue's plan: `f` gains `1 AS flag`, `uk` is keyed on (id, item_id) (and a new model)."""
    (root / "models" / "f.sql").write_text(FULL.format(schema=schema, extra="1 AS flag, "))
    (root / "models" / "uk.sql").write_text(UK.format(schema=schema, key="(id, item_id)"))
    if new_model:
        (root / "models" / "zz_new.sql").write_text(NEW.format(schema=schema))


def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in engine.session.fetchall(sql))


def _prod(tmp_path: Path, engine: SparkEngine, schema: str) -> tuple[Path, Context, str]:
    """Prod built over days 1-3; the plan id it serves."""
    root = _project(tmp_path, engine, schema)
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-04")
    ctx.reviews.apply(plan)
    return root, ctx, plan.plan_id


BEFORE = [(10, 2), (20, 1), (30, 1)]  # f over days 1-3: item -> rows


def test_a_full_model_gaining_a_column_in_a_forward_only_plan_is_applied(tmp_path, engine, schema):
    root, ctx, _ = _prod(tmp_path, engine, schema)
    f = f"{schema}.f"
    _change(root, schema)
    ctx.reload()
    plan = ctx.plans.plan(execution_time="2020-01-04", forward_only=True)
    assert plan.category(f) == ChangeCategory.FORWARD_ONLY and plan.category(f"{schema}.uk") == ChangeCategory.FORWARD_ONLY
    ctx.reviews.apply(plan)  # failed with UNRESOLVED_COLUMN flag, naming no model

    env = ctx.state.environments.get_environment("prod")
    assert env.plan_id == plan.plan_id and env.finalized_ts is not None
    assert list(engine.catalog.columns(f)) == ["item_id", "flag", "n"]
    assert _rows(engine, f"SELECT item_id, flag, n FROM {f}") == [(10, None, 2), (20, None, 1), (30, None, 1)]

    ctx.runs.run(execution_time="2020-01-05")  # the next run rebuilds f with the new query, uk upserts by the new key
    assert _rows(engine, f"SELECT id, item_id FROM {schema}.uk WHERE id = 1") == [(1, 10), (1, 20)]
    assert _rows(engine, f"SELECT item_id, flag, n FROM {f}") == [(10, 1, 2), (20, 1, 2), (30, 1, 1)]


def test_a_view_that_fails_names_its_model_and_puts_the_environment_back(tmp_path, engine, schema):
    root, ctx, served = _prod(tmp_path, engine, schema)
    f, uk = f"{schema}.f", f"{schema}.uk"
    uk_before = _rows(engine, f"SELECT * FROM {uk}")
    _change(root, schema, new_model=True)
    # Someone made a table where the new model's view goes: its view cannot be created.
    engine.session.execute(f"CREATE TABLE {schema}.zz_new USING parquet AS SELECT 'by hand' AS note")
    ctx.reload()
    plan = ctx.plans.plan(execution_time="2020-01-04", forward_only=True)
    assert plan.promoted.index(f) < plan.promoted.index(f"{schema}.zz_new")  # f's view moves first

    with pytest.raises(PlanError) as failed:
        ctx.reviews.apply(plan)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"Plan {plan.plan_id} was not applied to 'prod': the view {schema}.zz_new of "
                              f"{schema}.zz_new failed: ")
    assert f"'prod' is back on plan {served} and its views were put back" in message

    env = ctx.state.environments.get_environment("prod")
    assert (env.plan_id, env.finalized_ts is not None) == (served, True)
    assert ctx.state.environments.replaced_environment("prod") is None
    assert list(engine.catalog.columns(f)) == ["item_id", "n"]  # its kept table has the new column; its view does not
    assert _rows(engine, f"SELECT * FROM {f}") == BEFORE and _rows(engine, f"SELECT * FROM {uk}") == uk_before
    assert _rows(engine, f"SELECT * FROM {schema}.zz_new") == [("by hand",)]  # not ours: untouched
    record = ctx.reviews.records.find(plan.plan_id)
    assert record.status == PlanStatus.FAILED and record.events[-1].note == message

    ctx.runs.run(execution_time="2020-01-05")  # prod runs the plan it serves: keyed on id, key 1 is replaced
    assert _rows(engine, f"SELECT id, item_id FROM {uk} WHERE id = 1") == [(1, 20)]

    engine.session.execute(f"DROP TABLE {schema}.zz_new")  # the cause fixed, the plan made again applies
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-05", forward_only=True))
    assert ctx.state.environments.get_environment("prod").finalized_ts is not None
    assert list(engine.catalog.columns(f)) == ["item_id", "flag", "n"]
    assert _rows(engine, f"SELECT * FROM {schema}.zz_new") == [(10,), (20,), (30,)]


class ViewsInterrupted:
    """The real engine's catalog, except that Ctrl-C arrives while the first view is created:
    nothing is taken back, as after a kill, and the environment stays recorded but unfinalized."""

    def __init__(self, catalog: Any):
        self._catalog = catalog

    def create_view(self, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)


def test_mesh_run_evaluates_the_served_plan_while_an_interrupted_one_is_recorded(tmp_path, engine, schema):
    root, ctx, served = _prod(tmp_path, engine, schema)
    uk = f"{schema}.uk"
    _change(root, schema)
    ctx.reload()
    interrupted_engine = copy.copy(engine)  # the real engine, its catalog wrapped
    interrupted_engine.catalog = ViewsInterrupted(engine.catalog)
    interrupted = Context(root, engine=interrupted_engine, state_url=ctx.state.url)
    plan = interrupted.plans.plan(execution_time="2020-01-04", forward_only=True)
    with pytest.raises(KeyboardInterrupt):
        interrupted.reviews.apply(plan)
    interrupted.close()
    env = ctx.state.environments.get_environment("prod")
    assert (env.plan_id, env.finalized_ts) == (plan.plan_id, None)
    assert ctx.state.environments.served_environment("prod").plan_id == served

    log = LogLines()
    ctx.runs.run(execution_time="2020-01-05", listener=log)  # keyed on id (the served plan's key): replaced
    assert _rows(engine, f"SELECT id, item_id FROM {uk} WHERE id = 1") == [(1, 20)]
    assert f"The apply of plan {plan.plan_id} to 'prod' did not finish: running the snapshots of plan {served}, " \
           "which it serves" in log.lines

    finish = ctx.plans.plan(execution_time="2020-01-05")  # completes the interrupted apply
    assert finish.finishes_interrupted_apply and not finish.has_changes
    ctx.reviews.apply(finish)
    env = ctx.state.environments.get_environment("prod")
    assert env.plan_id == finish.plan_id and env.finalized_ts is not None and env.previous_plan_id == plan.plan_id
    assert list(engine.catalog.columns(f"{schema}.f")) == ["item_id", "flag", "n"]
