"""kill -9 of `mesh plan --auto-apply` while a unique-key batch rewrites its table (issue 19, point 3).

An upsert rewrites the whole table from itself and the batch's rows. Spark's INSERT OVERWRITE of an
unpartitioned table deletes the table's files before it writes the new ones, so a kill in between
used to leave the table empty with its earlier intervals recorded: the resumed plan recomputed
from the empty table and finished with rows missing, and `mesh janitor` dropped the staging table
that held their last copy. Now the new content is written as a new generation of files and the
table switched to it: killed while that generation is written (its `_temporary` folder exists),
the table keeps its previous rows, the janitor keeps what the journal needs, and the resumed plan
ends exactly as an uninterrupted one.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project_builder import write_project

pytestmark = pytest.mark.slow

DAYS, KEYS, SHIFT = 32, 200, 10
MODEL = f"""
MODEL (
  name s.latest,
  kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1),
  start '2020-01-01',
  end '2020-02-01'
);

SELECT CAST(id AS INT) AS id, CAST(@start_ds AS DATE) AS seen
FROM (
  SELECT EXPLODE(SEQUENCE({SHIFT} * DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01'),
                          {SHIFT} * DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01') + {KEYS - 1})) AS id
) AS keys
"""


def _expected() -> tuple[int, int, int, int]:
    """(rows, distinct ids, sum of ids, sum of the day each id was last seen) of an uninterrupted run."""
    last_seen = {}
    for day in range(DAYS):
        for key in range(SHIFT * day, SHIFT * day + KEYS):
            last_seen[key] = day
    return len(last_seen), len(last_seen), sum(last_seen), sum(last_seen.values())


def _recorded(project: Path) -> int:
    db = project / ".mesh" / "state.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM mesh_intervals WHERE name = 's.latest'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _rewrite_under_way(project: Path) -> bool:
    """A generation of the model's table is being written: Spark's `_temporary` folder is in it."""
    schema = project / ".mesh" / "warehouse" / "mesh__s.db"
    try:
        return any(entry.name.startswith("s__latest") and (Path(entry.path) / "_temporary").exists()
                   for entry in os.scandir(schema))
    except FileNotFoundError:
        return False


def _plan_killed_while_rewriting(project: Path, after: int) -> None:
    """Start `mesh plan --auto-apply`; once `after` intervals are recorded, kill its process group
    (the Python process and its JVM) the moment a batch's rewrite is writing files."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "plan", "--auto-apply", "--skip-tests"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while not (_recorded(project) >= after and _rewrite_under_way(project)):
            assert proc.poll() is None, "the plan finished before a rewrite could be interrupted"
            assert time.monotonic() < deadline, "no rewrite was seen writing"
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _summary(mesh, project: Path) -> tuple[int, ...]:
    sql = ("SELECT COUNT(*), COUNT(DISTINCT id), SUM(id), SUM(DATEDIFF(seen, DATE '2020-01-01')) "
           "FROM s.latest")
    return tuple(int(v) for v in mesh(project, "fetchdf", sql).stdout.strip().splitlines()[-1].split()[1:])


def test_a_rewrite_killed_mid_write_loses_nothing_and_resumes_exactly(tmp_path: Path, mesh) -> None:
    project = write_project(tmp_path / "p", {"models/latest.sql": MODEL})

    _plan_killed_while_rewriting(project, after=4)
    killed_at = _recorded(project)
    assert 4 <= killed_at < DAYS
    journaled = _journaled(project)

    mesh(project, "janitor")  # keeps what the journal needs

    out = mesh(project, "plan", "--auto-apply", "--skip-tests").stdout
    batches = [line for line in out.splitlines() if line.startswith("[") and "s.latest" in line]
    assert len(batches) == DAYS - killed_at  # only what was missing
    assert _recorded(project) == DAYS
    assert _summary(mesh, project) == _expected()  # (510, 510, ...): every key, at its last day
    # The killed batch was journaled: a switch to the generation being written, never committed.
    [(operation, table, payload)] = journaled
    assert operation == "switch" and table.startswith("mesh__s.s__latest__")
    assert json.loads(payload)["location"].split("/")[-1].startswith(table.split(".")[1] + "__mesh_g")
    assert _journaled(project) == []


def _journaled(project: Path) -> list[tuple]:
    with sqlite3.connect(project / ".mesh" / "state.db") as conn:
        return conn.execute("SELECT operation, table_name, payload FROM mesh_pending_writes "
                            "WHERE operation != 'retired'").fetchall()
