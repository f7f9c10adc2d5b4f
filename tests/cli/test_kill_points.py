"""Kill at every step of a batch, for every kind that rewrites, then resume (issue 19, point 3).

A property of the write path: whatever step of a batch a `mesh run` is killed at (kill -9, through
the test hook `MESH_TEST_KILL_AT`, mesh_dagster/engine/kill_points.py), the runs after it end with
every table equal, row for row, to that of a run never interrupted.

The kinds, one model each: FULL, INCREMENTAL_BY_TIME_RANGE,
INCREMENTAL_BY_UNIQUE_KEY, SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN (partitioned: its rewrite is
staged durably), INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED (appends) and INCREMENTAL_UNMANAGED
with insert_overwrite. The steps (kill_points.STEPS): before the write, with its new content staged,
journaled, a partition overwrite landed, committed (before the interval record), recorded.

To stay fast, one project holds a copy per step (schema `k_<step>`) of the models whose write goes
through that step, and a reference copy of every model (`ref`), all planned for day 1; a shared Spark Connect server spares every `mesh` process a
JVM. One test per step: a `mesh run` of day 2 (one batch a kind, over the rows of day 1) is killed
at that step in the first kind, the next run (which finishes that write first) is killed at the
same step in the next kind, and so on; a last run completes, and every table is compared with the
reference, which ran the same day without interruption.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.dag import DAG
from mesh_dagster.engine.connect_server import start_server, stop_server
from mesh_dagster.engine.kill_points import KILL_AT_ENV, STEPS
from tests import jvm_startup

pytestmark = pytest.mark.slow

SERVER_CONFIG = """\
gateways:
  local:
    connection:
      master: local[2]
      config:
        spark.sql.shuffle.partitions: 2
"""
DAY = "DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01')"  # 0 for 2020-01-01
MODELS = {  # name -> MODEL text, with {s} for the schema
    "m1_full": """
        MODEL (name {s}.m1_full, kind FULL);
        SELECT EXPLODE(SEQUENCE(DATE '2020-01-01', CAST(@end_ds AS DATE), INTERVAL 1 DAY)) AS day
    """,
    "m2_range": f"""
        MODEL (name {{s}}.m2_range, kind INCREMENTAL_BY_TIME_RANGE (time_column day, batch_size 1));
        SELECT id, CAST(@start_ds AS DATE) AS day, id * {DAY} AS v FROM (SELECT EXPLODE(SEQUENCE(1, 4)) AS id) AS t
    """,
    "m3_key": f"""
        MODEL (name {{s}}.m3_key, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1));
        SELECT id, CAST(@start_ds AS DATE) AS seen
        FROM (SELECT EXPLODE(SEQUENCE(5 * {DAY}, 5 * {DAY} + 19)) AS id) AS t
    """,
    "m4_scd_time": f"""
        MODEL (name {{s}}.m4_scd_time, kind SCD_TYPE_2_BY_TIME (unique_key id, batch_size 1));
        SELECT id, CAST(FLOOR({DAY} / id) AS INT) AS v,
               CAST(DATE_ADD(DATE '2020-01-01', CAST(id * FLOOR({DAY} / id) AS INT)) AS TIMESTAMP) AS updated_at
        FROM (SELECT EXPLODE(SEQUENCE(1, 6)) AS id) AS t
    """,
    "m5_scd_column": f"""
        MODEL (name {{s}}.m5_scd_column, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [v], batch_size 1,
               invalidate_hard_deletes true), partitioned_by grp);
        SELECT id, id % 2 AS grp, CAST(FLOOR({DAY} / id) AS INT) AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 6)) AS id) AS t
        WHERE id <> 5 OR {DAY} < 1
    """,
    "m6_partition": f"""
        MODEL (name {{s}}.m6_partition, kind INCREMENTAL_BY_PARTITION, partitioned_by region);
        SELECT id, CONCAT('r', CAST({DAY} % 3 AS STRING)) AS region, {DAY} * 10 + id AS v
        FROM (SELECT EXPLODE(SEQUENCE(1, 3)) AS id) AS t
    """,
    "m7_append": """
        MODEL (name {s}.m7_append, kind INCREMENTAL_UNMANAGED);
        SELECT id, CAST(@start_ds AS DATE) AS first_day, CAST(@end_ds AS DATE) AS last_day
        FROM (SELECT EXPLODE(SEQUENCE(1, 3)) AS id) AS t
    """,
    "m8_overwrite": """
        MODEL (name {s}.m8_overwrite, kind INCREMENTAL_UNMANAGED (insert_overwrite true));
        SELECT id, CAST(@end_ds AS DATE) AS last_day FROM (SELECT EXPLODE(SEQUENCE(1, 3)) AS id) AS t
    """,
}
# The steps each kind's write goes through (kill_points.STEPS): unpartitioned rewrites switch to a
# new generation; partition overwrites not reading their table need no journal; a partitioned
# history is staged durably; appends stage their rows.
SWITCH = ("write", "staged", "journaled", "committed", "recorded")
DIRECT = ("write", "overwritten", "committed", "recorded")
PASSES = {"m1_full": SWITCH, "m2_range": DIRECT, "m3_key": SWITCH, "m4_scd_time": SWITCH, "m5_scd_column": STEPS,
          "m6_partition": DIRECT, "m7_append": SWITCH, "m8_overwrite": SWITCH}
SETUP_TIME, RUN_TIME = "2020-01-02", "2020-01-03"  # day 1 when planned, day 2 in the run: one batch a kind

COMPARE = """
import json, sys
from mesh_dagster.context import Context
spec = json.loads(sys.argv[1])
ctx = Context(spec["project"])
out = {}
for model in spec["models"]:
    a, b = f"{spec['schema']}.{model}", f"ref.{model}"
    out[model] = [int(v) for v in ctx.engine.session.fetchall(
        f"SELECT (SELECT COUNT(*) FROM {a}), (SELECT COUNT(*) FROM {b}), "
        f"(SELECT COUNT(*) FROM ((SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) "
        f"UNION ALL (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a})) AS d)")[0]]
leftovers = [r[1] for r in ctx.engine.session.fetchall(f"SHOW TABLES IN mesh__{spec['schema']}") if r[1].startswith("__mesh_tmp")]
leftovers += [r[0] for r in ctx.engine.session.fetchall("SHOW DATABASES") if r[0].startswith("__mesh_tmp")]
print(json.dumps({"tables": out, "leftovers": leftovers}))
ctx.close()
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The models of every step and the reference, planned for day 1, behind a shared Connect server
    (and the server's warehouse); the reference has run day 2 already."""
    root = tmp_path_factory.mktemp("kill_points")
    host = write_project(root / "server", {}, SERVER_CONFIG)
    with jvm_startup.long_lived():  # it serves the whole module
        info = start_server(load_config(host).gateway().connection, host / ".mesh", timeout_s=300)
    try:
        config = (f"gateways:\n  local:\n    connection:\n      remote: '{info.client_url}'\n"
                  "      concurrent_tasks: 1\n"
                  "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron: '@daily'\n")
        files = {f"models/{schema}/{name}.sql": MODELS[name].format(s=schema)
                 for schema, names in [("ref", list(MODELS)), *((f"k_{step}", _killed(step)) for step in STEPS)]
                 for name in names}
        path = write_project(root / "project", files, config.replace("concurrent_tasks: 1", "concurrent_tasks: 4"))
        _mesh(path, "plan", "--auto-apply", "--skip-tests", "--execution-time", SETUP_TIME, timeout_s=1500)
        _mesh(path, "run", "--execution-time", RUN_TIME, "--select-model", "ref.*")
        (path / "config.yaml").write_text(config)  # the kills: one write at a time, each at its kill point
        yield path, host / ".mesh" / "warehouse"
    finally:
        stop_server(host / ".mesh")


def _mesh(project: Path, *args: str, kill_at: str | None = None, timeout_s: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MESH_SPARK_SERVER", KILL_AT_ENV)}
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    try:
        proc = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args], env=env,
                              capture_output=True, text=True, timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired as e:  # what it had done by then, to tell slow from stuck
        said = f"{e.stdout or ''}\n{e.stderr or ''}"  # text: run() collects the rest after its kill
        raise AssertionError(f"mesh {' '.join(args)} still going after {timeout_s} s:\n{said[-3000:]}") from None
    if kill_at is None and proc.returncode != 0:
        raise AssertionError(f"mesh {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _killed(step: str) -> list[str]:
    """The kinds whose write goes through `step`: the models of that step's schema."""
    return [name for name in MODELS if step in PASSES[name]]


def _compare(project: Path, schema: str, models: list[str]) -> dict:
    return run_script(COMPARE, {"project": str(project), "schema": schema, "models": models})


def run_script(script: str, spec: dict) -> dict:
    """What a Python `script` given `spec` (JSON, its first argument) prints last, as JSON: a process
    of its own, as the `mesh` commands are, that never dies at a kill point."""
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_ENV}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), json.dumps(spec)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("step", STEPS)
def test_killed_at_each_step_of_each_kind_the_next_runs_end_as_an_uninterrupted_one(
        project: tuple[Path, Path], step: str) -> None:
    project, warehouse = project
    schema = f"k_{step}"
    run = ("run", "--execution-time", RUN_TIME, "--select-model", f"{schema}.*")
    order = DAG({f"{schema}.{name}": [] for name in _killed(step)}).sorted()  # the order a run writes them in
    killed = [n.split(".")[1] for n in order]
    for name in killed:  # the run's one batch of each kind: its table holds the rows of day 1
        proc = _mesh(project, *run, kill_at=f"{step}@{schema}__{name}__")
        assert proc.returncode == -signal.SIGKILL, (
            f"{name} was not killed at '{step}' (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    _mesh(project, *run)  # finishes what the last kill left, and whatever is still missing

    with sqlite3.connect(project / ".mesh" / "state.db") as conn:  # no write is left pending
        assert conn.execute("SELECT COUNT(*) FROM mesh_pending_writes WHERE operation != 'retired'").fetchone() == (0,)
    # What a kill left before its journal entry or after its interval record (a staging table, a
    # generation older than the previous one, which the next rewrite would delete) is the janitor's:
    # after it, nothing is left but each table's current files.
    _mesh(project, "janitor")
    compared = _compare(project, schema, killed)
    tables = compared["tables"]
    assert {name: c for name, c in tables.items() if c[0] != c[1] or c[2]} == {}, tables
    assert all(rows > 0 for rows, _, _ in tables.values()), tables
    assert compared["leftovers"] == []  # staging tables, borrowed databases
    assert set(_generations(warehouse / f"mesh__{schema}.db").values()) == {1}


def _generations(schema_dir: Path) -> Counter[str]:
    """How many directories each table (or leftover) of a schema has."""
    return Counter(re.sub(r"__mesh_g[0-9a-f]{12}$", "", p.name) for p in schema_dir.iterdir())
