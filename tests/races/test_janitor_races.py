"""The janitor never deletes what a running or a recorded plan uses.

Before issue 8, `mesh janitor --ignore-ttl` during a backfill deleted the running plan's new
snapshot records and dropped its tables; the plan then finished with its environment pointing at
snapshots that no longer existed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mesh_dagster.core.errors import ConflictingPlanError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.execution.apply.apply import apply_plan
from mesh_dagster.execution.apply.janitor import run_janitor
from mesh_dagster.state import StateStore
from tests.project_builder import write_project
from tests.races.conftest import MODELS_V1, Race
from tests.races.fake_engine import RecordingEngine, calls, wait_for, warehouse

B_V2 = "MODEL (name s.b, kind FULL);\nSELECT x * 2 AS x FROM s.a\n"


def _apply(project: Path, store: StateStore, engine: RecordingEngine, environment: str = "prod") -> None:
    loaded = load_project(project)
    apply_plan(build_plan(loaded, store, environment), loaded, store, engine)


def test_janitor_waits_for_a_running_apply(race: Race) -> None:
    project = write_project(race.path("project"), MODELS_V1)
    with StateStore(race.url) as store:
        _apply(project, store, RecordingEngine(race.calls, "setup"))
        old_b = {s.name: s.table_name for s in store.environments.get_environment("prod").snapshots}["s.b"]
    (project / "models/b.sql").write_text(B_V2)

    paused, resume, log = race.path("paused"), race.path("resume"), race.path("janitor.log")
    applying = race.start("apply", "apply", project=str(project), environment="prod",
                          hooks={"replace_table": {"pause": str(paused), "resume": str(resume)}})
    wait_for(paused)  # the new s.b table exists and is being filled
    janitor = race.start("janitor", "janitor", project=str(project), log=str(log))
    while janitor.proc.poll() is None and "Waiting for the lock" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)  # until the janitor waits for the apply (or, before issue 8, ran through)
    resume.write_text("go")

    assert applying.outcome()["ok"] is True
    outcome = janitor.outcome()
    assert outcome["ok"] is True, outcome
    with StateStore(race.url) as store:
        env = store.environments.get_environment("prod")
        assert store.snapshots.snapshots_exist(s.snapshot_id for s in env.snapshots) == {s.snapshot_id for s in env.snapshots}
        b = {s.name: s for s in env.snapshots}["s.b"]
        new_b = b.table_name
        assert store.intervals.get_intervals([("s.b", b.version)])[("s.b", b.version)]
    dropped = [c["name"] for c in calls(race.calls) if c["actor"] == "janitor" and c["call"] == "drop_table"]
    assert dropped == [old_b]  # what the finished apply replaced, and nothing it uses
    assert new_b in warehouse(race.calls)


def test_plan_built_before_the_janitor_is_refused_after_it(race: Race) -> None:
    """A plan reusing a stored snapshot the janitor deleted (with its table) in the meantime would
    point the environment at a dropped table without recomputing it: the apply refuses instead."""
    project = write_project(race.path("project"), MODELS_V1)
    engine = RecordingEngine(race.calls, "setup")
    with StateStore(race.url) as store:
        _apply(project, store, engine)
        (project / "models/b.sql").write_text(B_V2)
        _apply(project, store, engine)
        before = store.environments.get_environment("prod")

        (project / "models/b.sql").write_text(MODELS_V1["models/b.sql"])  # back to the first s.b
        loaded = load_project(project)
        plan = build_plan(loaded, store, "prod")
        assert not plan.backfills  # the first s.b's table and intervals are reused
        run_janitor(loaded.config, store, lambda: engine, ignore_ttl=True)  # deletes that snapshot and table
        views_before = [c for c in calls(race.calls) if c["call"] in ("create_view", "drop_view")]

        with pytest.raises(ConflictingPlanError, match=r"deleted from the state store after it was built.*s\.b"):
            apply_plan(plan, loaded, store, engine)
        assert store.environments.get_environment("prod") == before
        assert [c for c in calls(race.calls) if c["call"] in ("create_view", "drop_view")] == views_before

        replan = build_plan(loaded, store, "prod")  # the re-plan recomputes it
        assert list(replan.backfills) == ["s.b"]


def test_janitor_waits_for_a_running_materialization(race: Race) -> None:
    """A Dagster materialization pushes snapshots no environment references yet; the janitor
    (even with --ignore-ttl) must not drop their tables while it writes them."""
    project = write_project(race.path("project"), MODELS_V1)
    with StateStore(race.url) as store:
        _apply(project, store, RecordingEngine(race.calls, "setup"))
    (project / "models/b.sql").write_text(B_V2)

    paused, resume, log = race.path("paused"), race.path("resume"), race.path("janitor.log")
    writing = race.start("materialize", "materialize", project=str(project), environment="prod", models=["s.b"],
                         start="2020-01-01", end="2020-01-02",
                         hooks={"replace_table": {"pause": str(paused), "resume": str(resume)}})
    wait_for(paused)  # the new s.b table exists and is being filled
    janitor = race.start("janitor", "janitor", project=str(project), log=str(log))
    while janitor.proc.poll() is None and "Waiting for the lock" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)  # until the janitor waits (or, without the in-use lock, ran through)
    dropped_meanwhile = [c["name"] for c in calls(race.calls) if c["actor"] == "janitor"]
    resume.write_text("go")

    outcome = writing.outcome()
    assert outcome["ok"] is True and outcome["recorded"]["s.b"], outcome
    assert janitor.outcome()["ok"] is True
    assert dropped_meanwhile == [], "the janitor dropped tables while the materialization wrote them"
