"""What one process of a race test does: `python -m tests.races.actors '<json spec>'`.

Each actor is a real process with its own state-store connections, running mesh's real apply,
lock and janitor code against a `RecordingEngine`. It writes its outcome as JSON to
`spec["result"]` (an error is an outcome too: the test asserts on it).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.execution import locking
from mesh_dagster.execution.apply.apply import apply_plan
from mesh_dagster.execution.apply.janitor import run_janitor
from mesh_dagster.state.store import StateStore
from tests.races.fake_engine import RecordingEngine, wait_for


def _store(spec: dict[str, Any]) -> StateStore:
    return StateStore(spec["url"])


def _engine(spec: dict[str, Any]) -> RecordingEngine:
    return RecordingEngine(Path(spec["calls"]), spec["name"], spec.get("hooks"))


def hold(spec: dict[str, Any]) -> dict[str, Any]:
    """Take an environment's lock and keep it until killed."""
    with locking.environment_lock(_store(spec), spec["environment"]):
        Path(spec["marker"]).write_text(str(os.getpid()))
        time.sleep(3600)
    return {}


def waiter(spec: dict[str, Any]) -> dict[str, Any]:
    """Say we are ready, then note when we hold the lock and when we let it go."""
    store = _store(spec)
    store.locks.lock_holder("warm-up")  # connected: only the lock itself is left to do
    Path(spec["ready"]).write_text(str(os.getpid()))
    with locking.environment_lock(store, spec["environment"], timeout_s=60):
        _append(spec["events"], f"enter {spec['name']}")
        time.sleep(spec.get("hold_s", 0.3))
        _append(spec["events"], f"exit {spec['name']}")
    return {}


def apply(spec: dict[str, Any]) -> dict[str, Any]:
    """Plan the project against the environment and apply it."""
    store = _store(spec)
    project = load_project(Path(spec["project"]))
    plan = build_plan(project, store, spec["environment"], execution_time=spec.get("execution_time"))
    if spec.get("planned"):
        Path(spec["planned"]).write_text(plan.plan_id)
    if spec.get("wait_before_apply"):
        wait_for(Path(spec["wait_before_apply"]))
    apply_plan(plan, project, store, _engine(spec))
    return {"plan_id": plan.plan_id}


def steal(spec: dict[str, Any]) -> dict[str, Any]:
    """An operator breaks the current holder's lock (by the token they saw), then applies."""
    store = _store(spec)
    name = locking.environment_lock_name(spec["environment"]) if hasattr(locking, "environment_lock_name") \
        else f"environment:{spec['environment']}"
    holder = store.locks.lock_holder(name)
    try:
        store.locks.break_lock(name, holder.token)
    except (TypeError, AttributeError):  # the code before issue 8: by name only
        store.locks.break_lock(name)
    return apply(spec)


def materialize(spec: dict[str, Any]) -> dict[str, Any]:
    """What a Dagster partition materialization does: the environment's current snapshots of
    `models`, evaluated for a range and recorded, views untouched."""
    from mesh_dagster.execution.intervals.materialize import materialize as run

    store = _store(spec)
    project = load_project(Path(spec["project"]))
    engine = _engine(spec)
    results = list(run(project, store, lambda: engine, spec["environment"], spec["models"], spec["start"], spec["end"]))
    return {"recorded": {r.name: [list(i) for i in r.recorded] for r in results}}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """`mesh run` of an environment: its due intervals, evaluated and recorded."""
    from mesh_dagster.execution.intervals.run import run_environment

    store = _store(spec)
    project = load_project(Path(spec["project"]))
    return {"batches": run_environment(project, store, _engine(spec), spec["environment"],
                                       execution_time=spec.get("execution_time"))}


def janitor(spec: dict[str, Any]) -> dict[str, Any]:
    store = _store(spec)
    project = load_project(Path(spec["project"]))
    engine = _engine(spec)
    return run_janitor(project.config, store, lambda: engine, ignore_ttl=True)


ROLES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "hold": hold, "waiter": waiter, "apply": apply, "steal": steal, "janitor": janitor,
    "materialize": materialize, "run": run,
}


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main(spec: dict[str, Any]) -> None:
    if spec.get("lease_s"):
        locking.LEASE_S = spec["lease_s"]
    if spec.get("log"):
        logging.basicConfig(filename=spec["log"], level=logging.INFO, format="%(name)s %(message)s")
    try:
        outcome = {"ok": True, **ROLES[spec["role"]](spec)}
    except Exception as e:  # noqa: BLE001 - the outcome is what the test asserts on
        outcome = {"ok": False, "type": type(e).__name__, "error": str(e)}
    Path(spec["result"]).write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
