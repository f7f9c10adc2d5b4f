"""Issue 19, point 5, on the in-memory engine and a real SQLite store: where an environment stands
after a view fails in the virtual update, in the cases Spark does not reach easily — a new
environment (taken back whole), and views that cannot be put back (the record returns to the
plan it served, unfinalized, and `mesh run` runs that plan)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError, PlanError
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

MODELS = {
    "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.a\n",
}


class ViewsFail(FakeEngine):
    """Creating the view `failing` fails; from `broken_after` failures on, every view does (the
    metastore went away)."""

    def __init__(self, failing: str, broken_after: int | None = None):
        super().__init__()
        self.failing, self.broken_after, self.failures = failing, broken_after, 0

    def create_view(self, view: str, select_sql: str, comments=None) -> None:
        if view == self.failing or (self.broken_after is not None and self.failures >= self.broken_after):
            self.failures += 1
            raise EngineError(f"cannot create {view}\n(second line of the Spark error)")
        super().create_view(view, select_sql, comments)


def _context(root: Path, engine: FakeEngine) -> Context:
    return Context(root, engine=engine, state_url=f"sqlite:///{root / 'state.db'}")


def test_a_new_environment_whose_view_fails_is_not_created(tmp_path):
    root = write_project(tmp_path / "p", MODELS)
    engine = ViewsFail("s__dev.b")
    ctx = _context(root, engine)
    plan = ctx.plans.plan("dev", execution_time="2020-01-02")
    with pytest.raises(PlanError) as failed:
        ctx.reviews.apply(plan)
    assert str(failed.value) == (
        f"Plan {plan.plan_id} was not applied to 'dev': the view s__dev.b of s.b failed: cannot create s__dev.b. "
        "'dev' was not created (the views made so far were dropped). Fix the cause and re-run `mesh plan dev`.")
    assert ctx.state.environments.get_environment("dev") is None
    assert engine.views == {}  # s__dev.a was made, then dropped
    with pytest.raises(PlanError, match="Environment 'dev' does not exist"):
        ctx.runs.run("dev", execution_time="2020-01-03")


def test_views_that_cannot_be_put_back_leave_the_served_plan_recorded_for_repair(tmp_path):
    root = write_project(tmp_path / "p", MODELS)
    ctx = _context(root, FakeEngine())
    served = ctx.plans.plan(execution_time="2020-01-02")
    ctx.reviews.apply(served)
    views = dict(ctx.engine.views)
    (root / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 2 AS id\n")

    broken = ViewsFail("s.b", broken_after=1)  # b fails, and so does putting a back
    failing = _context(root, broken)
    broken.tables, broken.views, broken.schemas = ctx.engine.tables, ctx.engine.views, ctx.engine.schemas
    plan = failing.plans.plan(execution_time="2020-01-02")
    with pytest.raises(PlanError) as failed:
        failing.reviews.apply(plan)
    assert str(failed.value) == (
        f"Plan {plan.plan_id} was not applied to 'prod': the view s.b of s.b failed: cannot create s.b. 'prod' serves "
        f"plan {served.plan_id} again (`mesh run` runs it), but putting its views back failed (the view s.a of s.a "
        "failed: cannot create s.a): the next `mesh plan prod` re-creates them. Fix the cause and re-run "
        "`mesh plan prod`.")
    env = ctx.state.environments.get_environment("prod")
    assert (env.plan_id, env.finalized_ts) == (served.plan_id, None)
    assert ctx.engine.views["s.a"] != views["s.a"] and ctx.engine.views["s.b"] == views["s.b"]  # half-moved

    repair = _context(root, ctx.engine)  # the metastore is back
    again = repair.plans.plan(execution_time="2020-01-02")
    assert again.base_environment.plan_id == served.plan_id and again.finishes_interrupted_apply
    repair.reviews.apply(again)
    assert repair.state.environments.get_environment("prod").finalized_ts is not None
    assert ctx.engine.views["s.b"] != views["s.b"]  # now over the new b
