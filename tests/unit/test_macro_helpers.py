"""A Python macro's helper module (`from macros.utils import DIGITS`, as SQLMesh projects write it).

Its constants and functions decide the rendered query: an edit of them changes the model's data
hash, and the plan categorizes it from the rendered diff (issue 22: it was METADATA, the table kept
its stale rows, when one process loaded the project again after the edit). What runs afterwards
is the code the plan stored, not the working tree's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.sql.renderer import RenderContext, render_sql

WHEN = "2020-01-05"
UTILS = '''"""Helpers the macros import."""

DIGITS = 1
EXTRA = []


def rounded(sql, digits):
    return f"ROUND({sql}, {digits})"
'''
MONEY = '''from macros.utils import DIGITS, EXTRA, rounded
from sqlmesh import macro


@macro()
def share(evaluator, part, whole):
    return rounded(f"100.0 * {part.sql()} / {whole.sql()}", DIGITS)


@macro()
def extra(evaluator):
    return ", ".join(["1 AS one", *EXTRA])
'''
FILES = {
    "macros/utils.py": UTILS,
    "macros/money.py": MONEY,
    "models/shares.sql": "MODEL (name s.shares, kind FULL);\nSELECT @share(1, 3) AS pct\n",
    "models/wide.sql": "MODEL (name s.wide, kind FULL);\nSELECT 2 AS two, @extra() FROM s.shares\n",
    "models/plain.sql": "MODEL (name s.plain, kind FULL);\nSELECT 1 AS x\n",
}


@pytest.fixture
def root(tmp_path, state) -> Path:
    """The base project, applied to prod (loaded in this process: its modules are imported)."""
    root = write_project(tmp_path / "p", FILES)
    record_plan(build_plan(load_project(root), state, execution_time=WHEN), state)
    return root


def edit_utils(root: Path, old: str, new: str) -> None:
    path = root / "macros/utils.py"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def plan(root: Path, state, env: str = "dev", use_cache: bool = True) -> Plan:
    return build_plan(load_project(root, use_cache=use_cache), state, env, execution_time=WHEN)


def rendered(p: Plan, name: str) -> str:
    """The query as evaluation renders it: from the snapshot's stored macros."""
    snap = p.snapshots[name]
    assert snap.capture is not None
    return render_sql(snap.model, RenderContext(schemas=snap.capture.parent_schemas), snap.capture.macro_registry())


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_helper_constant_that_changes_the_query_is_breaking(root, state, use_cache):
    edit_utils(root, "DIGITS = 1", "DIGITS = 3")
    p = plan(root, state, use_cache=use_cache)
    assert p.directly_modified == ["s.shares"] and p.category("s.shares") == C.BREAKING
    assert p.snapshots["s.shares"].rendered_query == "SELECT ROUND(100.0 * 1 / 3, 3) AS pct"
    assert p.snapshots["s.shares"].version != p.previous["s.shares"].version and "s.shares" in p.backfills
    assert p.category("s.wide") == C.INDIRECT_BREAKING and "s.plain" not in p.changed


def test_a_helper_constant_that_adds_a_column_is_non_breaking(root, state):
    edit_utils(root, "EXTRA = []", "EXTRA = ['3 AS three']")
    p = plan(root, state)
    assert p.directly_modified == ["s.wide"] and p.category("s.wide") == C.NON_BREAKING
    assert "3 AS three" in (p.snapshots["s.wide"].rendered_query or "")
    assert "s.wide" in p.backfills and "s.shares" not in p.changed  # its macro does not read EXTRA


def test_evaluation_uses_the_reviewed_constant_not_the_working_tree(root, state):
    edit_utils(root, "DIGITS = 1", "DIGITS = 3")
    p = plan(root, state)
    record_plan(p, state)
    edit_utils(root, "DIGITS = 3", "DIGITS = 5")  # after the review: not what the plan holds
    load_project(root)  # the project loaded again in this process imports the new file
    assert rendered(p, "s.shares") == "SELECT ROUND(100.0 * 1 / 3, 3) AS pct"
    stored = state.snapshots.get_snapshots([p.snapshots["s.shares"].snapshot_id])[p.snapshots["s.shares"].snapshot_id]
    assert stored.capture is not None and stored.capture.macros["share"].env["DIGITS"].text == "DIGITS = 3"


def test_an_unrelated_load_of_the_same_root_reimports_its_helpers(root, state):
    """The same root loaded twice in one process (a code server, the compat suite's edits): the
    second load sees the file as it is now."""
    edit_utils(root, "DIGITS = 1", "DIGITS = 2")
    project = load_project(root, use_cache=False)
    assert sys.modules["macros.utils"].DIGITS == 2
    assert project.macros.get("share") is not None
