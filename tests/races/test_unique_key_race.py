"""Two real processes upserting the same interval of a unique-key model at once, on real Spark.

An upsert rewrites the table from itself and the new rows; Spark's non-partitioned INSERT
OVERWRITE deletes the old files before its job and commits after it, so two overlapping rewrites
can both land (duplicates), or one can read files the other deletes. Writes to one table hold
its lock in the state store (`table:<table>`) and take turns.

Both processes are clients of the project's shared Spark Connect server (embedded Derby admits one
process). The first stops inside its upsert until the second has planned the same interval and
reached the table: without the lock both would write; with it, the second waits at the lock, then
finds the interval recorded by the first and skips it (an upsert applied twice could replay old
rows over newer ones; execution/intervals/scheduler.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.engine.connect_server import start_server, stop_server
from mesh_dagster.state import StateStore
from tests.races.conftest import ACTOR_TIMEOUT_S, CODE, Race

pytestmark = pytest.mark.spark

CONFIG = """\
gateways:
  local:
    connection:
      master: local[1]
      config:
        spark.sql.shuffle.partitions: 2
model_defaults:
  dialect: spark
  start: 2020-01-01
"""
HOLD_S = 60  # how long the first writer may be held inside its upsert

# One writer: materializes the model's interval as a Dagster run would, noting when its upsert
# starts and ends; the first one (with `hold`) stops inside it until the test lets it go on.
WRITER = """
import json, sys, time
from pathlib import Path
from mesh_dagster.context import Context
from mesh_dagster.engine.writes import TableWrites

spec = json.loads(sys.argv[1])

def note(what):
    with open(spec["events"], "a") as f:
        f.write(f"{time.time():.3f} {spec['name']} {what}\\n")

real = TableWrites.upsert

def upsert(self, *args, **kwargs):
    note("start")
    if spec.get("hold"):
        Path(spec["arrived"]).write_text("here")
        deadline = time.monotonic() + spec["hold_s"]
        while not Path(spec["release"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    try:
        return real(self, *args, **kwargs)
    finally:
        note("end")

TableWrites.upsert = upsert
ctx = Context(spec["project"], state_url=spec["url"])
try:
    done = list(ctx.runs.materialize([spec["model"]], spec["start"], spec["end"]))
    print(json.dumps({"ok": True, "recorded": [list(i) for d in done for i in d.recorded]}))
except Exception as e:
    print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
finally:
    ctx.close()
"""

# Reads the model's table through the server: (rows, distinct keys).
CHECKER = """
import json, sys
from mesh_dagster.context import Context
spec = json.loads(sys.argv[1])
ctx = Context(spec["project"], state_url=spec["url"])
table = ctx.plans.plan("prod", allow_empty=True).snapshots[spec["model"]].table_name
print(json.dumps([list(r) for r in ctx.engine.session.fetchall(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}")]))
ctx.close()
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A project whose shared Spark Connect server runs for the module's tests."""
    project = tmp_path_factory.mktemp("uk_race") / "project"
    (project / "models").mkdir(parents=True)
    (project / "config.yaml").write_text(CONFIG)
    try:
        start_server(load_config(project).gateway().connection, project / ".mesh", timeout_s=300)
        yield project
    finally:
        stop_server(project / ".mesh")


def _python(code: str, spec: dict) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": CODE, "PYTHONUNBUFFERED": "1"}
    env.pop("MESH_SPARK_SERVER", None)  # the running server is found without it
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), json.dumps(spec)], cwd=CODE, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(proc: subprocess.Popen):
    out, err = proc.communicate(timeout=ACTOR_TIMEOUT_S + HOLD_S)
    lines = out.strip().splitlines()
    assert lines, f"exit {proc.returncode}, no outcome:\n{err[-3000:]}"
    return json.loads(lines[-1])


def test_two_processes_writing_one_interval_of_a_unique_key_model_write_it_once(served: Path, race: Race) -> None:
    model = f"r_{uuid.uuid4().hex[:8]}.latest"
    (served / "models" / "latest.sql").write_text(
        f"MODEL (name {model}, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));\n"
        "SELECT id, CONCAT('v', id) AS v FROM VALUES (1), (2), (3) AS t(id)\n")
    events, arrived, release = race.path("events.log"), race.path("a.arrived"), race.path("release")
    common = {"project": str(served), "url": race.url, "model": model, "start": "2020-01-01", "end": "2020-01-02",
              "events": str(events)}
    writers = [_python(WRITER, {**common, "name": "a", "hold": True, "hold_s": HOLD_S, "arrived": str(arrived),
                                "release": str(release)})]
    try:
        deadline = time.monotonic() + ACTOR_TIMEOUT_S
        while not arrived.exists():  # the first writer is inside its upsert, holding the table's lock
            assert writers[0].poll() is None and time.monotonic() < deadline, writers[0].communicate()
            time.sleep(0.05)
        writers.append(_python(WRITER, {**common, "name": "b"}))
        time.sleep(4)  # it plans the same interval, and waits at the table's lock
        release.write_text("go")
        outcomes = [_outcome(w) for w in writers]
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
    assert all(o["ok"] for o in outcomes), outcomes
    assert all(o["recorded"] == [[to_ms("2020-01-01"), to_ms("2020-01-02")]] for o in outcomes), outcomes
    # Only the first upserted: the second found the interval recorded once it had the lock.
    assert [line.split()[1:] for line in events.read_text().splitlines()] == [["a", "start"], ["a", "end"]]

    assert _outcome(_python(CHECKER, common)) == [[3, 3]]  # no duplicates
    with StateStore(race.url) as store:
        assert store.locks.lock_holders() == []
