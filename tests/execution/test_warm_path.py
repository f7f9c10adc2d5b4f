"""The warm path (issue 36): what a run asks Spark about a model once nothing it reads changed,
on the in-memory engine (every call counted), with the state store keeping what each evaluation
learned of its tables (`shapes`), as a `mesh run` after a plan apply does.

Each saving is pinned by the calls it spares; each skip's safety by the change that must bring the
call back: a parent whose columns changed, an external table that did, a view's parent laid out anew.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import write_project

FILES = {
    "external_models.yaml": "- name: raw.events\n  columns:\n    id: INT\n    ds: DATE\n    value: DOUBLE\n",
    "models/up.sql": "MODEL (name s.up, kind FULL);\nSELECT id, ds, value FROM raw.events\n",
    "models/inc.sql": """
        MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, on_additive_change allow));
        SELECT * FROM s.up WHERE ds BETWEEN @start_ds AND @end_ds
    """,
    "models/raw_inc.sql": """
        MODEL (name s.raw_inc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, on_additive_change allow));
        SELECT * FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds
    """,
    "models/v.sql": "MODEL (name s.v, kind VIEW);\nSELECT id, ds FROM s.up\n",
}
CONFIG = "model_defaults:\n  dialect: spark\n  start: 2024-01-01\n  cron: '@daily'\n"
DAY1, DAY2, DAY3 = (to_ms(f"2024-01-0{d}") for d in range(1, 4))
EVENTS = {"id": "int", "ds": "date", "value": "double"}
ORDER = ["s.up", "s.inc", "s.raw_inc", "s.v"]


@pytest.fixture
def ctx(tmp_path):
    engine = FakeEngine(EVENTS)
    engine.tables["raw.events"] = dict(EVENTS)
    context = Context(Path(write_project(tmp_path / "p", FILES, CONFIG)), engine=engine)
    yield context
    context.close()


def evaluation(ctx) -> SnapshotEvaluator:
    """A new evaluation (a new `mesh run`, or a plan apply) keeping what it learns in the store."""
    snapshots = ctx.plans.plan(execution_time="2024-01-03").snapshots
    return SnapshotEvaluator(ctx.project, ctx.engine, snapshots, shapes=ctx.state.shapes)


def first_apply(ctx) -> None:
    """What a first apply does: every physical object, then each model's interval, upstream first."""
    ev = evaluation(ctx)
    for name in ORDER:
        ev.create(ev.snapshots[name])
    for name in ORDER:
        ev.evaluate(ev.snapshots[name], DAY1, DAY2, DAY2)


def daily_run(ctx) -> list:
    """The next day of every model; the engine calls it made."""
    engine: FakeEngine = ctx.engine
    before = len(engine.calls)
    ev = evaluation(ctx)
    for name in ORDER:
        ev.evaluate(ev.snapshots[name], DAY2, DAY3, DAY3)
    return engine.calls[before:]


def analyses(calls: list) -> list:
    return [c for c in calls if c.method == "query_columns"]


def test_a_daily_run_where_nothing_changed_analyses_no_query(ctx) -> None:
    first_apply(ctx)
    calls = daily_run(ctx)
    assert analyses(calls) == []
    assert not [c for c in calls if c.method in ("add_columns", "retype_table")]
    # The migration checks still look at each kept table (it may have been changed by hand) ...
    snapshots = evaluation(ctx).snapshots
    looked = {c.name for c in calls if c.method == "columns"}
    assert {snapshots["s.inc"].table_name, snapshots["s.raw_inc"].table_name} <= looked
    # ... and the full rewrite is handed the remembered columns rather than analysing its query.
    write = next(c for c in calls if c.method == "replace_table")
    assert write.args["produced"] == EVENTS
    assert daily_run(ctx) and analyses(daily_run(ctx)) == []  # and so on, day after day


def test_an_external_table_that_changed_brings_the_checks_back_and_they_migrate(ctx) -> None:
    first_apply(ctx)
    engine: FakeEngine = ctx.engine
    engine.tables["raw.events"]["extra"] = "int"  # someone added a column to the external table
    engine.output = {**EVENTS, "extra": "int"}  # what Spark's analysis of the queries now answers
    calls = daily_run(ctx)
    snapshots = evaluation(ctx).snapshots
    up, inc, raw_inc = (snapshots[n].table_name for n in ("s.up", "s.inc", "s.raw_inc"))
    # s.up and s.raw_inc read the external table; s.inc reads s.up, whose columns changed with it.
    assert len(analyses(calls)) == 3
    assert engine.tables[up] == engine.output
    added = {c.name: c.args["columns"] for c in calls if c.method == "add_columns"}
    assert added == {inc: {"extra": "int"}, raw_inc: {"extra": "int"}}
    assert analyses(daily_run(ctx)) == []  # learned: the day after asks nothing again


def test_a_parent_laid_out_anew_by_an_earlier_run_brings_its_childs_check_back(ctx) -> None:
    """The parent changed in a run that did not write the child: what that run learned, the store
    tells the next one, whose check of the child analyses its query again and migrates."""
    first_apply(ctx)
    engine: FakeEngine = ctx.engine
    engine.tables["raw.events"]["extra"] = "int"
    engine.output = {**EVENTS, "extra": "int"}
    ev = evaluation(ctx)
    ev.evaluate(ev.snapshots["s.up"], DAY2, DAY3, DAY3)  # a run of s.up alone: laid out anew
    ev = evaluation(ctx)
    before = len(engine.calls)
    ev.evaluate(ev.snapshots["s.inc"], DAY2, DAY3, DAY3)
    calls = engine.calls[before:]
    inc = ev.snapshots["s.inc"].table_name
    assert len(analyses(calls)) == 1
    assert [(c.name, c.args["columns"]) for c in calls if c.method == "add_columns"] == [(inc, {"extra": "int"})]


def test_an_unknown_store_or_a_new_evaluation_without_one_analyses_as_before(ctx) -> None:
    first_apply(ctx)
    ctx.state.shapes.forget([s.table_name for s in evaluation(ctx).snapshots.values()])
    assert len(analyses(daily_run(ctx))) == 3  # s.up, s.inc, s.raw_inc: nothing known, all analysed
    snapshots = ctx.plans.plan(execution_time="2024-01-03").snapshots
    ev = SnapshotEvaluator(ctx.project, ctx.engine, snapshots)  # no store: nothing carried over
    before = len(ctx.engine.calls)
    ev.evaluate(snapshots["s.inc"], DAY2, DAY3, DAY3)
    assert len(analyses(ctx.engine.calls[before:])) == 1


def test_a_migration_forgets_the_tables_columns_before_it_changes_them(ctx) -> None:
    """A migration killed (here: failing) halfway leaves the table's columns unknown, never wrong."""
    first_apply(ctx)
    inc = evaluation(ctx).snapshots["s.inc"].table_name
    assert ctx.state.shapes.table_shapes([inc])[inc].columns is not None

    class Failing(FakeEngine):
        def add_columns(self, table, columns):
            raise EngineError("killed")

    failing = Failing({**EVENTS, "extra": "int"})
    failing.tables, failing.schemas = ctx.engine.tables, ctx.engine.schemas
    failing.tables["raw.events"]["extra"] = "int"
    snapshots = ctx.plans.plan(execution_time="2024-01-03").snapshots
    ev = SnapshotEvaluator(ctx.project, failing, snapshots, shapes=ctx.state.shapes)
    ev.evaluate(snapshots["s.up"], DAY2, DAY3, DAY3)
    with pytest.raises(EngineError, match="killed"):
        ev.evaluate(snapshots["s.inc"], DAY2, DAY3, DAY3)
    assert inc not in ctx.state.shapes.table_shapes([inc])


def test_a_view_is_defined_once_per_evaluation_unless_what_it_reads_changed(ctx) -> None:
    engine: FakeEngine = ctx.engine
    first_apply(ctx)  # the physical layer defines it, the backfill writes it: the same definition
    v = evaluation(ctx).snapshots["s.v"].table_name
    assert [c.name for c in engine.calls if c.method == "create_view"] == [v]

    engine.tables["raw.events"]["extra"] = "int"
    engine.output = {**EVENTS, "extra": "int"}
    ev = evaluation(ctx)
    before = len(engine.calls)
    ev.create(ev.snapshots["s.v"])
    ev.evaluate(ev.snapshots["s.up"], DAY2, DAY3, DAY3)  # its parent laid out anew meanwhile
    ev.evaluate(ev.snapshots["s.v"], DAY2, DAY3, DAY3)
    assert [c.name for c in engine.calls[before:] if c.method == "create_view"] == [v, v]


def test_a_full_table_created_and_written_in_one_evaluation_is_analysed_once(ctx) -> None:
    """The physical layer creates the table from its query's columns; the backfill's full rewrite of
    the same query reuses them (the dev loop's edited FULL model)."""
    engine: FakeEngine = ctx.engine
    first_apply(ctx)
    up = evaluation(ctx).snapshots["s.up"].table_name
    created = next(i for i, c in enumerate(engine.calls) if c.method == "create_table" and c.name == up)
    written = next(i for i, c in enumerate(engine.calls) if c.method == "replace_table" and c.name == up)
    reading_events = [c for c in analyses(engine.calls[: written + 1]) if "BETWEEN" not in c.args["sql"]]
    assert len(reading_events) == 1 and engine.calls.index(reading_events[0]) < created
    assert engine.calls[written].args["produced"] == EVENTS
