"""A `mesh run` of prod and a `mesh plan dev --auto-apply` at once (issue 34, point 5).

The run is writing the day that just became due into a parent's table (prod's, which dev reads
as it is: dev changed only its children) when the dev plan builds a new child over it. Before,
the child was computed over the missing day and recorded complete through it; now the plan reads
what the parent has recorded before it writes anything, leaves that day waiting ("waiting for
upstream"), and dev's next run computes it once prod's run recorded it.

Real processes (`actors.py`) on SQLite and Postgres, with the call-recording engine: what is
tested is the order of writes and records between processes.
"""

from __future__ import annotations

import time
from pathlib import Path

from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.state import StateStore
from tests.project_builder import write_project
from tests.races.conftest import ACTOR_TIMEOUT_S, Actor, Race
from tests.races.fake_engine import calls

PROD = {
    "models/a.sql": """
        MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": """
        MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
        SELECT id, ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
        """,
}
DEV = {**PROD, "models/n.sql": """
        MODEL (name s.n, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
        SELECT id, ds FROM s.a WHERE ds BETWEEN @start_ds AND @end_ds
        """}


def _intervals(url: str, environment: str) -> dict[str, list[tuple[int, int]]]:
    store = StateStore(url)
    try:
        env = store.environments.get_environment(environment)
        assert env is not None
        found = store.intervals.get_intervals([(s.name, s.version) for s in env.snapshots])
        return {s.name: found.get((s.name, s.version), []) for s in env.snapshots}
    finally:
        store.close()


def test_a_dev_plan_never_records_a_child_over_the_day_a_prod_run_is_writing(race: Race) -> None:
    prod_project = write_project(race.path("prod_project"), PROD)
    dev_project = write_project(race.path("dev_project"), DEV)
    first = race.start("apply", "prod_plan", project=str(prod_project), environment="prod",
                       execution_time="2020-01-03")
    assert first.outcome()["ok"], first.outcome()

    # prod's run of 2020-01-03 stops inside its write of s.a (its table lock held, nothing recorded)
    writing, go_on = race.path("writing"), race.path("go_on")
    runner = race.start("run", "prod_run", project=str(prod_project), environment="prod",
                        execution_time="2020-01-04",
                        hooks={"insert_overwrite_interval": {"pause": str(writing), "resume": str(go_on)}})
    _wait_inside(writing, runner)
    planner = race.start("apply", "dev_plan", project=str(dev_project), environment="dev",
                         execution_time="2020-01-04")
    assert planner.outcome() == {"ok": True, "plan_id": planner.outcome()["plan_id"]}
    dev = _intervals(race.url, "dev")
    assert dev["s.n"] == [(to_ms("2020-01-01"), to_ms("2020-01-03"))]  # the day s.a owes is left waiting

    go_on.write_text("")
    assert runner.outcome() == {"ok": True, "batches": 2}
    prod = _intervals(race.url, "prod")
    assert prod == {"s.a": [(to_ms("2020-01-01"), to_ms("2020-01-04"))],
                    "s.b": [(to_ms("2020-01-01"), to_ms("2020-01-04"))]}
    dev_run = race.start("run", "dev_run", project=str(dev_project), environment="dev", execution_time="2020-01-04")
    assert dev_run.outcome() == {"ok": True, "batches": 1}
    assert _intervals(race.url, "dev")["s.n"] == [(to_ms("2020-01-01"), to_ms("2020-01-04"))]
    # and s.n's day was written only after prod's run had written s.a's
    writes = [(c["actor"], c["name"]) for c in calls(race.calls) if c["call"] == "insert_overwrite_interval"]
    assert writes.index(("prod_run", _table(writes, "s__a"))) < writes.index(("dev_run", _table(writes, "s__n")))


def _wait_inside(marker: Path, actor: Actor) -> None:
    """Wait until `actor` says it paused where its hook stops it (or ended: then say how)."""
    deadline = time.monotonic() + ACTOR_TIMEOUT_S
    while not marker.exists():
        assert actor.proc.poll() is None, actor.outcome()
        assert time.monotonic() < deadline, f"{actor.name} never reached its pause"
        time.sleep(0.05)


def _table(writes: list[tuple[str, str]], stem: str) -> str:
    return next(name for _, name in writes if f".{stem}__" in name)
