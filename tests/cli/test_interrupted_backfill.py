"""Killing `mesh plan` in the middle of a backfill, then running it again.

The second run must finish the work with no duplicate or missing rows, and the environment's
views must never point at a half-built table (prod keeps serving the old version meanwhile).
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import date, timedelta

import pytest
from project_builder import write_project

pytestmark = pytest.mark.slow

DAYS = 12
ROWS_PER_DAY = 3

EVENTS = """
MODEL (
  name s.events,
  kind SEED (path '../seeds/events.csv'),
  columns (id INT, amount INT, event_date DATE),
  grain (id)
);
"""
DAILY = """
MODEL (
  name s.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_date, batch_size 1),
  start '2020-01-01',
  end '2020-01-12',
  grain (id)
);

SELECT id, amount, event_date
FROM s.events
WHERE event_date BETWEEN @start_date AND @end_date
"""
TOTAL = """
MODEL (name s.total, kind FULL);

SELECT COUNT(*) AS n, SUM(amount) AS amount FROM s.daily
"""


def _csv() -> str:
    lines = ["id,amount,event_date"]
    for d in range(DAYS):
        day = date(2020, 1, 1) + timedelta(days=d)
        for r in range(ROWS_PER_DAY):
            lines.append(f"{d * ROWS_PER_DAY + r},{r + 1},{day}")
    return "\n".join(lines) + "\n"


def _recorded(project, name: str) -> int:
    db = project / ".mesh" / "state.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM mesh_intervals WHERE name = ?", (name,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _plan_and_kill(project, min_recorded: int) -> None:
    before = _recorded(project, "s.daily")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "plan", "--auto-apply", "--skip-tests"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while _recorded(project, "s.daily") < before + min_recorded:
            assert proc.poll() is None, "the plan finished before it could be interrupted"
            assert time.monotonic() < deadline, "the backfill never started"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the Python process and its JVM
        proc.wait()


def _last_row(text: str) -> list[str]:
    """Values of the last row printed by `mesh fetchdf` (without the index)."""
    return text.strip().splitlines()[-1].split()[1:]


def _counts(mesh, project) -> list[str]:
    """One `mesh fetchdf` (one JVM) for everything: rows, days, distinct ids and amounts of the
    incremental model, and the FULL model built on it."""
    sql = ("SELECT (SELECT COUNT(*) FROM s.daily) AS n, (SELECT COUNT(DISTINCT event_date) FROM s.daily) AS days, "
           "(SELECT COUNT(DISTINCT id) FROM s.daily) AS ids, (SELECT SUM(amount) FROM s.daily) AS amount, "
           "(SELECT n FROM s.total) AS total_n, (SELECT amount FROM s.total) AS total_amount")
    return _last_row(mesh(project, "fetchdf", sql).stdout)


def test_killed_backfill_resumes_without_duplicates(tmp_path, mesh):
    project = write_project(tmp_path / "p", {"models/events.sql": EVENTS, "models/daily.sql": DAILY,
                                             "models/total.sql": TOTAL, "seeds/events.csv": _csv()})
    n = DAYS * ROWS_PER_DAY
    amount = DAYS * sum(range(1, ROWS_PER_DAY + 1))

    # A first plan killed mid-backfill: the environment (and so its views) was never created.
    _plan_and_kill(project, 3)
    assert 3 <= _recorded(project, "s.daily") < DAYS
    with sqlite3.connect(project / ".mesh" / "state.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM mesh_environments").fetchone()[0] == 0

    out = mesh(project, "plan", "--auto-apply", "--skip-tests").stdout
    # Only what is missing is computed again.
    assert "s.daily: [2020-01-01 -" not in out
    batches = [line for line in out.splitlines() if line.startswith("[") and " s.daily " in line]
    assert 0 < len(batches) <= DAYS - 3
    expected = [str(n), str(DAYS), str(n), str(amount), str(n), str(amount)]
    assert _counts(mesh, project) == expected

    # A breaking change killed mid-backfill: prod keeps serving the old version meanwhile.
    model = project / "models" / "daily.sql"
    model.write_text(model.read_text().replace("SELECT id, amount,", "SELECT id, amount * 2 AS amount,"))
    _plan_and_kill(project, 3)
    assert _counts(mesh, project) == expected

    mesh(project, "plan", "--auto-apply", "--skip-tests")
    assert _counts(mesh, project) == [str(n), str(DAYS), str(n), str(2 * amount), str(n), str(2 * amount)]
