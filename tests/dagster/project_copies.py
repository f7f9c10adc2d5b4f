"""Copies of the example project for Dagster tests, with its dates moved next to today.

The example's history starts in 2020 (thousands of daily partitions, one Dagster event each);
moved to the last `days` days it keeps its shape — the incremental model starts first, the seed
and the full model start later (their earlier partitions are empty) — at a fraction of the cost.
"""

from __future__ import annotations

import re
import shutil
from datetime import date, timedelta
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
SEED_FIRST_DAY = date(2020, 1, 1)
# The tests' today, read once per test process: the copies and the dates tests expect are computed
# from the same day, also when the suite runs across midnight.
TODAY = date.today()


def recent_example(dest: Path, days: int = 7, schema: str = "sqlmesh_example") -> Path:
    """The example project in `dest`, its seed rows and starts shifted so they end yesterday."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".mesh", "__pycache__", "definitions.py"))
    first = TODAY - timedelta(days=days)
    shift = first - SEED_FIRST_DAY

    seed = dest / "seeds" / "seed_data.csv"
    lines = seed.read_text().splitlines()
    moved = [lines[0]] + [re.sub(r"\d{4}-\d{2}-\d{2}$", lambda m: str(date.fromisoformat(m.group(0)) + shift), line)
                          for line in lines[1:]]
    seed.write_text("\n".join(moved) + "\n")

    config = dest / "config.yaml"
    config.write_text(re.sub(r"start: \d{4}-\d{2}-\d{2}", f"start: {first + timedelta(days=2)}", config.read_text()))
    inc = dest / "models" / "incremental_model.sql"
    inc.write_text(inc.read_text().replace("start '2020-01-01'", f"start '{first}'"))
    if schema != "sqlmesh_example":
        for path in [*dest.glob("models/*.sql"), *dest.glob("tests/*.yaml")]:
            path.write_text(path.read_text().replace("sqlmesh_example.", f"{schema}."))
    return dest


def edit(project: Path, model: str, old: str, new: str) -> None:
    path = project / "models" / f"{model}.sql"
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
