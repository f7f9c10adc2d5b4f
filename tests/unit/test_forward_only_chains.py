"""A breaking change above a forward-only model, planned as SQLMesh plans it (issue 22).

SQLMesh shows a forward-only model (an SCD type 2 kind by default, or `forward_only true`) below a
breaking change as INDIRECT_BREAKING, and keeps its table like a direct forward-only change: prod
keeps its history (no rebuild; the new parent data reaches it from its next intervals on), a
development environment reads a preview. Its other children are rebuilt, reading the kept table.

Each test applies the base project to a real SQLite state store (no Spark).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

WHEN = "2020-01-05"
FILES = {
    "models/seed.sql": """
        MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, region TEXT, day DATE));
        """,
    "models/history.sql": """
        MODEL (name s.history, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [region]));

        SELECT id, region FROM s.seed
        """,
    "models/daily.sql": """
        MODEL (name s.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column day, forward_only true),
               start '2020-01-01');

        SELECT id, region, day FROM s.seed WHERE day BETWEEN @start_date AND @end_date
        """,
    "models/regions.sql": """
        MODEL (name s.regions, kind FULL);

        SELECT region, COUNT(*) AS n FROM s.history WHERE valid_to IS NULL GROUP BY region
        """,
    "seeds/seed.csv": "id,region,day\n1,north,2020-01-01\n2,south,2020-01-02\n",
}
SEED_EDIT = ("seeds/seed.csv", "2,south", "2,east")  # BREAKING: a seed's new rows
FORWARD_ONLY = ("s.history", "s.daily")


@pytest.fixture
def root(tmp_path, state) -> Path:
    """The base project, applied to prod; then the seed edit."""
    root = write_project(tmp_path / "p", FILES)
    record_plan(build_plan(load_project(root), state, execution_time=WHEN), state)
    rel, old, new = SEED_EDIT
    (root / rel).write_text((root / rel).read_text().replace(old, new, 1))
    return root


def plan(root: Path, state, env: str = "dev", **options) -> Plan:
    return build_plan(load_project(root), state, env, execution_time=WHEN, **options)


def test_dev_previews_forward_only_models_below_a_breaking_change(root, state):
    p = plan(root, state)
    assert p.category("s.seed") == C.BREAKING
    for name in (*FORWARD_ONLY, "s.regions"):
        assert p.category(name) == C.INDIRECT_BREAKING, name  # what SQLMesh reports
    for name in FORWARD_ONLY:
        snap = p.snapshots[name]
        assert snap.change_category == C.FORWARD_ONLY and snap.is_preview, name  # prod's table is not written
        assert name in p.backfills, name
    assert p.previews == ["s.history", "s.regions", "s.daily"]  # DAG order
    assert p.snapshots["s.regions"].is_preview  # built on the previewed history, not on prod's rows
    day = 24 * 3600 * 1000
    assert [(e - s) // day for s, e in p.backfills["s.daily"].intervals] == [1]  # the preview range
    assert p.snapshots["s.seed"].version != p.previous["s.seed"].version  # the seed itself is rebuilt


def test_prod_keeps_the_forward_only_tables_and_rebuilds_the_rest(root, state):
    p = plan(root, state, "prod")
    for name in FORWARD_ONLY:
        assert p.category(name) == C.INDIRECT_BREAKING, name
        assert p.snapshots[name].version == p.previous[name].version, name  # history kept
        assert name not in p.backfills, name
        assert any(w.startswith(f"{name} is forward-only: it keeps its table") for w in p.warnings), p.warnings
    assert p.previews == []
    regions = p.snapshots["s.regions"]
    assert regions.version != p.previous["s.regions"].version and "s.regions" in p.backfills


def test_deploying_the_dev_plan_keeps_the_categories(root, state):
    record_plan(plan(root, state), state)
    p = plan(root, state, "prod")
    for name in FORWARD_ONLY:
        assert p.category(name) == C.INDIRECT_BREAKING, name
        assert p.snapshots[name].version == p.previous[name].version and name not in p.backfills, name
    assert p.category("s.regions") == C.INDIRECT_BREAKING and "s.regions" in p.backfills


def test_a_direct_change_of_a_forward_only_model_stays_forward_only(root, state):
    path = root / "models/daily.sql"
    path.write_text(path.read_text().replace("SELECT id, region, day", "SELECT id, UPPER(region) AS region, day"))
    p = plan(root, state)
    assert p.category("s.daily") == C.FORWARD_ONLY and p.snapshots["s.daily"].is_preview
    assert p.category("s.history") == C.INDIRECT_BREAKING


def test_a_forward_only_model_still_cannot_be_categorized_breaking(root, state):
    path = root / "models/daily.sql"
    path.write_text(path.read_text().replace("SELECT id, region, day", "SELECT id, UPPER(region) AS region, day"))
    with pytest.raises(PlanError, match="s.daily is a forward-only model: it cannot be categorized"):
        plan(root, state, choices={"s.daily": C.BREAKING})
