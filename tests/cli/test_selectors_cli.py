"""Model selectors through the real `mesh` CLI on real Spark: `plan --select-model`, `run
--select-model` with a tag, `table_diff -m` with a wildcard; and their refusals (in process, on a
copy whose plans are recorded in the state store only: they come before any Spark starts, and
write nothing).

One tagged project, built and taken through the whole scenario once for the module (every `mesh`
process starts its own Spark):

    s.events (seed, raw) -> s.revenue (finance) -> s.report (finance, reporting)
                         -> s.other (ops)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import pytest
from bad_input.harness import assert_refused, nothing_written
from bad_input.harness import mesh as mesh_in_process
from cli.conftest import run_mesh
from project_builder import record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.engine.server_record import SERVER_ENV

pytestmark = pytest.mark.slow

FILES = {
    "models/events.sql": """
        MODEL (name s.events, kind SEED (path '../seeds/events.csv'), columns (id INT, amount INT, event_date DATE),
               grain (id), tags (raw));
        """,
    "models/revenue.sql": """
        MODEL (name s.revenue, kind INCREMENTAL_BY_TIME_RANGE (time_column event_date), start '2020-01-01',
               grain (id), tags (finance));

        SELECT id, amount * 2 AS revenue, event_date FROM s.events WHERE event_date BETWEEN @start_date AND @end_date
        """,
    "models/report.sql": """
        MODEL (name s.report, kind FULL, grain (n), tags (finance, reporting));

        SELECT COUNT(*) AS n, SUM(revenue) AS total FROM s.revenue
        """,
    "models/other.sql": """
        MODEL (name s.other, kind INCREMENTAL_BY_TIME_RANGE (time_column event_date), start '2020-01-01',
               grain (id), tags (ops));

        SELECT id, event_date FROM s.events WHERE event_date BETWEEN @start_date AND @end_date
        """,
    "seeds/events.csv": "id,amount,event_date\n" + "".join(
        f"{d},{d + 1},{date(2020, 1, 1) + timedelta(days=d)}\n" for d in range(10)),
}
PLANNED = "2020-01-05"  # prod and dev hold 2020-01-01 .. 2020-01-04
RUN = "2020-01-08"


@dataclass
class Scenario:
    project: Path
    dev_plan: str  # `plan dev --select-model 's.revenue+'`: s.other's change is left out
    diff: str  # `table_diff prod:dev -m 's.*'`
    run: str  # `run --select-model tag:finance`: s.other is not processed


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    project = write_project(tmp_path_factory.mktemp("selectors") / "p", FILES)
    run_mesh(project, "plan", "--auto-apply", "--execution-time", PLANNED)
    edit(project, "revenue", "amount * 2 AS revenue", "amount * 3 AS revenue")
    edit(project, "other", "SELECT id, event_date", "SELECT id, 'x' AS flag, event_date")
    dev_plan = run_mesh(project, "plan", "dev", "--select-model", "s.revenue+", "--auto-apply",
                        "--execution-time", PLANNED).stdout
    diff = run_mesh(project, "table_diff", "prod:dev", "-m", "s.*").stdout
    run = run_mesh(project, "run", "--select-model", "tag:finance", "--execution-time", RUN).stdout
    return Scenario(project, dev_plan, diff, run)


def edit(project: Path, model: str, old: str, new: str) -> None:
    path = project / "models" / f"{model}.sql"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def recorded_end(project: Path, environment: str, name: str) -> int:
    """The end of the last interval the environment's version of `name` holds."""
    ctx = Context(project)
    try:
        ref = ctx.state.environments.get_environment(environment).snapshot_by_name()[name]
        return max(e for _, e in ctx.state.intervals.get_intervals([(name, ref.version)])[(name, ref.version)])
    finally:
        ctx.close()


def test_plan_select_model_takes_only_the_selected_change(scenario):
    out = scenario.dev_plan
    assert "Directly Modified: s__dev.revenue (Breaking)" in out
    assert "s__dev.report (Indirect Breaking)" in out
    assert "s__dev.other" not in out  # edited too, but not selected
    ctx = Context(scenario.project)
    try:
        dev = ctx.state.environments.get_environment("dev")
        prod = ctx.state.environments.get_environment("prod").snapshot_by_name()
    finally:
        ctx.close()
    refs = dev.snapshot_by_name()
    assert refs["s.other"].identifier == prod["s.other"].identifier
    assert refs["s.revenue"].version != prod["s.revenue"].version
    assert set(dev.promoted) == {"s.events", "s.revenue", "s.report"}  # what the selection computed


def test_table_diff_diffs_each_model_a_wildcard_selects(scenario):
    out = scenario.diff
    assert "Table diff s.revenue -> s__dev.revenue on id" in out
    assert "Columns with different values in matched rows:\n  revenue: 4" in out
    assert "Table diff s.report -> s__dev.report on n" in out
    assert "  total: 1" in out
    assert "Not diffed:\n  s.events: both environments read the same table\n  s.other: no view in 'dev'" in out


def test_run_select_model_processes_the_tagged_models_and_their_upstream_only(scenario):
    out = scenario.run
    assert "s.revenue" in out and "s.report" in out
    assert "s.other" not in out
    assert recorded_end(scenario.project, "prod", "s.revenue") == to_ms(RUN)
    assert recorded_end(scenario.project, "prod", "s.other") == to_ms(PLANNED)


# ------------------------------------------------------------------ refusals: one line, nothing written


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The project with prod and dev planned and recorded as applied, without Spark."""
    project = write_project(tmp_path_factory.mktemp("refusals") / "p", FILES)
    ctx = Context(project)
    try:
        record_plan(ctx.plans.plan(execution_time=PLANNED), ctx.state)
        edit(project, "revenue", "amount * 2 AS revenue", "amount * 3 AS revenue")
        record_plan(ctx.reload() and ctx.plans.plan("dev", execution_time=PLANNED), ctx.state)
    finally:
        ctx.close()
    return project


@pytest.mark.parametrize("args, fragments", [
    (["run", "--select-model", "s.revnue"], ["--select-model 's.revnue' matches no model. Did you mean: s.revenue"]),
    (["run", "--select-model", "(tag:finance"], ["--select-model '(tag:finance', position 13 (the end): the '(' "
                                                 "at position 1 is never closed"]),
    (["run", "--no-auto-upstream"], ["--no-auto-upstream only applies with --select-model"]),
    (["plan", "dev", "--select-model", "tag:fnance"], ["--select-model 'tag:fnance' matches no model. "
                                                       "Did you mean: tag:finance?"]),
    (["plan", "--backfill-model", "s.report"], ["--backfill-model can only be used with development environments"]),
    (["plan", "dev", "--select-model", "s.revenue", "--backfill-model", "tag:ops & tag:raw"],
     ["--backfill-model 'tag:ops & tag:raw' matches no model."]),
    (["table_diff", "prod:dev"], ["Name the MODEL to diff, or select models with -m/--select-model"]),
    (["table_diff", "prod:nowhere", "-m", "s.*"], ["Environment 'nowhere' does not exist"]),
    (["table_diff", "prod:dev", "-m", "x.*"], ["--select-model 'x.*' matches no model."]),
])
def test_selector_refusals(recorded, args, fragments, monkeypatch):
    monkeypatch.setenv(SERVER_ENV, "1")  # the product's default: a refused command starts no warm server either
    with nothing_written(recorded):
        assert_refused(mesh_in_process(recorded, *args), *fragments)


def test_every_selector_flag_explains_the_syntax():
    for command, flags in [("plan", ["--select-model", "--backfill-model"]), ("run", ["--select-model"]),
                           ("table_diff", ["-m, --select-model"])]:
        out = " ".join(mesh_in_process(Path("."), command, "--help").stdout.split())  # help is wrapped
        for flag in flags:
            assert f"{flag} SELECTOR" in out, (command, flag)
        assert "tag:NAME" in out and "^ (not)" in out
    assert "--no-auto-upstream" in mesh_in_process(Path("."), "run", "--help").stdout
