"""kill -9 of a restatement that rebuilds a history from scratch (a unique-key model: its intervals
build on each other, so restating one day rebuilds all of them from an empty table).

The table is emptied only after its intervals are forgotten, in the same transaction as a `clear`
journal entry: a kill right after that entry, or right after the TRUNCATE, leaves the state saying
"missing" — never "recorded" over an empty table — and the next `mesh run` ends with exactly the
rows of an uninterrupted run."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from project_builder import write_project

from tests.cli.conftest import run_mesh

pytestmark = pytest.mark.slow

MODEL = """
MODEL (name s.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1), start '2020-01-01');

SELECT CAST(id AS INT) AS id, CAST(@start_ds AS DATE) AS seen
FROM (SELECT EXPLODE(SEQUENCE(DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01'),
                              DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01') + 2)) AS id) AS keys
"""
WHEN = "2020-01-05"
# An uninterrupted run over 2020-01-01..04: ids 0..5, each last seen on the day it last appeared.
EXPECTED = [(0, "2020-01-01"), (1, "2020-01-02"), (2, "2020-01-03"), (3, "2020-01-04"), (4, "2020-01-04"),
            (5, "2020-01-04")]


def _rows(root: Path) -> list[tuple[int, str]]:
    out = run_mesh(root, "fetchdf", "SELECT id, CAST(seen AS STRING) AS seen FROM s.latest ORDER BY id").stdout
    rows = []
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[-2].isdigit():
            rows.append((int(parts[-2]), parts[-1]))
    return rows


def _recorded_days(root: Path) -> int:
    with sqlite3.connect(root / ".mesh" / "state.db") as conn:
        rows = conn.execute("SELECT start_ts, end_ts, is_removed FROM mesh_intervals WHERE name = 's.latest' "
                            "ORDER BY id").fetchall()
    days: set[int] = set()
    for start, end, removed in rows:
        span = set(range(start // 86_400_000, end // 86_400_000))
        days = days - span if removed else days | span
    return len(days)


@pytest.mark.parametrize("step", ["journaled", "overwritten"])
def test_a_restatement_killed_around_its_truncate_is_finished_exactly_by_the_next_run(tmp_path, step):
    root = write_project(tmp_path / "p", {"models/latest.sql": MODEL})
    run_mesh(root, "plan", "--auto-apply", "--skip-tests", "--execution-time", WHEN)
    assert _rows(root) == EXPECTED

    env = {**os.environ, "MESH_TEST_KILL_AT": step}  # the first such step of the process: the clear's
    killed = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(root), "plan",
                             "--restate-model", "s.latest", "--start", "2020-01-02", "--end", "2020-01-02",
                             "--auto-apply", "--skip-tests", "--execution-time", WHEN],
                            env=env, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert _recorded_days(root) == 0  # forgotten with the clear: nothing says "done" over an empty table

    run_mesh(root, "run", "--execution-time", WHEN)
    assert _rows(root) == EXPECTED
    assert _recorded_days(root) == 4
