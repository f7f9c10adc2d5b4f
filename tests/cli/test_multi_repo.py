"""A multi-repo project through the real `mesh` CLI on Spark (`mesh -p repo_1 -p repo_2 ...`): one
plan across both repositories, each one's models rendered with its own macros and variables, a
Python model of the second one finding a file beside its helper and a `$root` seed of its own; a
plan of one repository alone is refused before it drops the other's models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from project_builder import CONFIG, write_project

pytestmark = pytest.mark.slow


def _macro(value: str) -> str:
    return f"from sqlmesh import macro\n\n\n@macro()\ndef dup(evaluator):\n    return \"'{value}'\"\n"


HELPER = """\
import json
from pathlib import Path

RATES = json.loads((Path(__file__).parent / "rates.json").read_text())
"""

PY_MODEL = """\
import pandas as pd
from helpers.rates import RATES
from sqlmesh import model


@model("silver.rated", columns={"col_a": "int", "rate": "int"}, kind="FULL", depends_on=["bronze.a"])
def execute(context, start, end, execution_time, **kwargs):
    rows = context.fetchdf(f"SELECT col_a FROM {context.table('bronze.a')}")
    return pd.DataFrame({"col_a": rows["col_a"], "rate": [RATES["standard"]] * len(rows)})
"""


def _repos(tmp_path: Path) -> tuple[Path, Path]:
    first = write_project(tmp_path / "repo_1", {
        "models/a.sql": "MODEL (name bronze.a, kind FULL);\nSELECT 1 AS col_a, @dup() AS who\n",
        "macros/__init__.py": _macro("repo_1"),
    }, CONFIG + "project: repo_1\n")
    second = write_project(tmp_path / "repo_2", {
        "models/c.sql": "MODEL (name silver.c, kind FULL);\nSELECT a.col_a, a.who, @dup() AS mine, s.label "
                        "FROM bronze.a AS a JOIN silver.labels AS s ON a.col_a = s.id\n",
        "models/labels.sql": "MODEL (name silver.labels, kind SEED (path '$root/seeds/labels.csv'));\n",
        "seeds/labels.csv": "id,label\n1,one\n",
        "macros/__init__.py": _macro("repo_2"),
        "helpers/__init__.py": "",
        "helpers/rates.py": HELPER,
        "helpers/rates.json": '{"standard": 7}',
        "models/rated.py": PY_MODEL,
    }, CONFIG + "project: repo_2\n")
    return first, second


def test_two_repositories_plan_and_apply_as_one_project(tmp_path: Path, mesh) -> None:
    first, second = _repos(tmp_path)
    out = mesh(first, "-p", str(second), "plan", "--auto-apply").stdout
    assert "✔ Virtual layer updated" in out
    assert "Estimated backfill" not in out and "Backfill took" not in out  # nothing timed before: nothing to say
    for name in ("bronze.a", "silver.c", "silver.labels", "silver.rated"):
        assert name in out
    rows = mesh(first, "-p", str(second), "fetchdf",
                "SELECT c.who, c.mine, c.label, r.rate * 1000 AS rate FROM silver.c AS c, silver.rated AS r").stdout
    assert "repo_1" in rows and "repo_2" in rows and "one" in rows  # each repository's own @dup
    assert "7000" in rows  # the helper found its data file in repo_2, from the stored snapshot

    alone = mesh(first, "plan", "--auto-apply", check=False)  # (nothing written: tests/unit/test_repos.py)
    assert alone.returncode != 0
    assert "prod holds silver.c (and 2 more) of the repository 'repo_2', which this command did not load" \
        in alone.stderr

    # a change in each repository; a dev plan selecting the second's model takes that change only
    (first / "models" / "a.sql").write_text("MODEL (name bronze.a, kind FULL);\nSELECT 2 AS col_a, @dup() AS who\n")
    (second / "models" / "c.sql").write_text((second / "models" / "c.sql").read_text().replace(
        "@dup() AS mine", "UPPER(@dup()) AS mine"))
    dev = mesh(first, "-p", str(second), "plan", "dev", "--select-model", "silver.c", "--auto-apply").stdout
    assert "Directly Modified: silver__dev.c" in dev and "Directly Modified: bronze" not in dev
    # estimated from the batches the first apply timed, then compared with what it took (issue 38, point 9)
    assert "Estimated backfill: " in dev and "(medium confidence, 1 model(s) from earlier batches)" in dev
    assert re.search(r"silver__dev\.c: \[full refresh\] ~\d+s", dev) and "Backfill took " in dev
    rows = mesh(first, "-p", str(second), "fetchdf", "SELECT mine, label FROM silver__dev.c").stdout
    assert "REPO_2" in rows and "one" in rows  # dev reads prod's bronze.a (col_a 1), not the unselected edit
