"""Two applies never hold one environment at once, and the one that lost its lock changes nothing.

Real processes (see `actors.py`), on SQLite and on Postgres; Spark is replaced by an engine that
records calls, because what is tested is the order of things between processes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text

from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.execution.apply.apply import apply_plan
from mesh_dagster.execution.apply.janitor import run_janitor
from mesh_dagster.state import StateStore
from tests.project_builder import write_project
from tests.races.conftest import MODELS_V1, Race
from tests.races.fake_engine import RecordingEngine, calls, wait_for, warehouse

WAITERS = 3


def _views(log: Path) -> dict[str, str | None]:
    return {name: sql for name, (kind, sql) in warehouse(log).items() if kind == "view"}


@contextmanager
def writes_held(url: str) -> Iterator[None]:
    """Hold off every writer of the state store (readers go on) until the block ends, so that
    processes started meanwhile all reach their first write and then set off together."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("COMMIT")
            conn.close()
        return
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("LOCK TABLE mesh_locks IN EXCLUSIVE MODE"))
            yield
    finally:
        engine.dispose()


def test_waiters_behind_a_dead_holder_take_turns(race: Race) -> None:
    """Before issue 8 each waiter read the dead holder, then deleted the lock by name: lined up
    like this, every waiter "broke" the lock of the one before and all of them held it at once."""
    holder = race.start("hold", "holder", environment="prod", marker=str(race.path("held")))
    wait_for(race.path("held"))
    holder.kill()  # its lock row stays behind, with a lease far from over
    with StateStore(race.url) as store:
        assert store.locks.lock_holder("environment:prod") is not None

    events = race.path("events")
    with writes_held(race.url):
        waiters = [race.start("waiter", f"w{i}", environment="prod", events=str(events),
                              ready=str(race.path(f"ready{i}"))) for i in range(WAITERS)]
        for i in range(WAITERS):
            wait_for(race.path(f"ready{i}"))
        time.sleep(0.5)  # let each reach its first write (not an assertion: lining them up only)
    assert [w.outcome()["ok"] for w in waiters] == [True] * WAITERS

    words = events.read_text().split()
    turns = [words[i:i + 4] for i in range(0, len(words), 4)]
    assert len(turns) == WAITERS
    for verb_in, who_in, verb_out, who_out in turns:  # enter A, exit A, enter B, exit B, ...
        assert (verb_in, verb_out, who_in) == ("enter", "exit", who_out), words
    with StateStore(race.url) as store:
        assert store.locks.lock_holder("environment:prod") is None


def test_apply_that_lost_its_lock_stops_before_recording_or_moving_views(race: Race) -> None:
    """A holder whose lock was taken over while it computed must not touch views or the record,
    even after the new holder applied its own plan (before issue 8 it overwrote its views)."""
    mine = write_project(race.path("mine"), MODELS_V1)
    theirs = write_project(race.path("theirs"),
                           {**MODELS_V1, "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT x + 1 AS x FROM s.a\n"})
    paused, resume = race.path("paused"), race.path("resume")
    # Paused while creating its tables: holding the environment's lock only (a write would hold its
    # table's lock too, which the thief's apply needs for the same table and would wait for).
    first = race.start("apply", "first", project=str(mine), environment="prod",
                       hooks={"create_table": {"pause": str(paused), "resume": str(resume)}})
    wait_for(paused)  # computing, and holding the lock

    thief = race.start("steal", "thief", project=str(theirs), environment="prod")
    assert thief.outcome()["ok"] is True
    resume.write_text("go")
    outcome = first.outcome()

    moved = [c for c in calls(race.calls) if c["actor"] == "first" and c["call"] in ("create_view", "drop_view")]
    assert moved == []
    assert outcome["ok"] is False and outcome["type"] == "LockLostError", outcome
    assert "stopped before recording 'prod'" in outcome["error"]
    assert "\n" not in outcome["error"]
    with StateStore(race.url) as store:
        env = store.environments.get_environment("prod")
        assert env.plan_id == thief.outcome()["plan_id"] and env.finalized_ts is not None
        tables = {s.name: s.table_name for s in env.snapshots}
    assert _views(race.calls) == {f"s.{m}": f"SELECT `x` FROM {tables[f's.{m}']}" for m in ("a", "b")}


def test_crash_between_recording_and_moving_views_is_repaired_by_the_next_apply(race: Race) -> None:
    """The environment is recorded before its views move; a kill in between leaves it unfinalized
    with some views old. The janitor keeps the tables those views still read, and the next apply
    — even with nothing changed — re-creates every view and drops those of removed models."""
    project = write_project(race.path("project"),
                            {**MODELS_V1, "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT 2 AS y\n"})
    setup = RecordingEngine(race.calls, "setup")
    with StateStore(race.url) as store:
        first = build_plan(load_project(project), store, "prod")
        apply_plan(first, load_project(project), store, setup)
    old_b = first.snapshots["s.b"].table_name

    (project / "models/a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 10 AS x\n")
    (project / "models/c.sql").unlink()
    crashed = race.start("apply", "crashed", project=str(project), environment="prod",
                         hooks={"create_view": {"crash_at": 2}})
    assert crashed.outcome()["ok"] is None  # killed while moving views: it reported nothing
    with StateStore(race.url) as store:
        env = store.environments.get_environment("prod")
        assert env.finalized_ts is None and sorted(env.promoted) == ["s.a", "s.b"]
        assert store.environments.replaced_environment("prod").plan_id == first.plan_id
        new_tables = {s.name: s.table_name for s in env.snapshots}
    views = _views(race.calls)
    assert views["s.b"] == f"SELECT `x` FROM {old_b}" and "s.c" in views  # half moved

    with StateStore(race.url) as store:
        run_janitor(load_project(project).config, store, lambda: setup, ignore_ttl=True)
        assert old_b in warehouse(race.calls)  # view s.b still reads it

        repair = build_plan(load_project(project), store, "prod")
        assert not repair.has_changes and repair.needs_apply
        apply_plan(repair, load_project(project), store, setup)  # the dead holder's lock is taken at once
        env = store.environments.get_environment("prod")
        assert env.finalized_ts is not None and store.environments.replaced_environment("prod") is None
        assert _views(race.calls) == {n: f"SELECT `x` FROM {new_tables[n]}" for n in ("s.a", "s.b")}

        run_janitor(load_project(project).config, store, lambda: setup, ignore_ttl=True)
        assert old_b not in warehouse(race.calls)  # nothing shows it any more
