"""Plans with several changes at once: a breaking change reaches every model below it.

Each test applies a base project to a real SQLite state store (no Spark), edits several files,
plans, and checks categories AND versions: a new version is a new table that gets backfilled, a
reused version keeps the rows built from the parents' old data.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

WHEN = "2020-01-05"
FILES = {
    "models/seed.sql": """
        MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, item_id INT, event_date DATE));
        """,
    "models/inc.sql": """
        MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column event_date), start '2020-01-01');

        SELECT id, item_id, event_date FROM s.seed WHERE event_date BETWEEN @start_date AND @end_date
        """,
    "models/full.sql": """
        MODEL (name s.full, kind FULL);

        SELECT item_id, COUNT(DISTINCT id) AS num_orders FROM s.inc GROUP BY item_id
        """,
    "models/top.sql": """
        MODEL (name s.top, kind FULL);

        SELECT item_id, num_orders FROM s.full
        """,
    "models/other.sql": """
        MODEL (name s.other, kind FULL);

        SELECT id, item_id FROM s.inc
        """,
    "models/joined.sql": """
        MODEL (name s.joined, kind FULL);

        SELECT o.id, f.num_orders FROM s.other AS o JOIN s.full AS f ON o.item_id = f.item_id
        """,
    "models/lonely.sql": """
        MODEL (name s.lonely, kind FULL);

        SELECT 1 AS x
        """,
    "seeds/seed.csv": "id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-02\n",
}
# The edits of issue 8's reproduction, and a few more.
NEW_SEED_ROW = ("seeds/seed.csv", "2,1,2020-01-02\n", "2,1,2020-01-02\n1,3,2020-01-01\n")  # seed: BREAKING
ADD_COLUMN = ("models/inc.sql", "SELECT id, item_id,", "SELECT id, item_id, 'z' AS new_column,")  # NON_BREAKING
FILTER_INC = ("models/inc.sql", "WHERE event_date", "WHERE item_id > 0 AND event_date")  # BREAKING
RECOUNT_FULL = ("models/full.sql", "COUNT(DISTINCT id)", "COUNT(id)")  # BREAKING
REFORMAT_FULL = ("models/full.sql", "COUNT(DISTINCT id) AS num_orders", "count(DISTINCT id)  AS num_orders /* same */")
ADD_COLUMN_OTHER = ("models/other.sql", "SELECT id, item_id", "SELECT id, item_id, 1 AS one")  # NON_BREAKING


@pytest.fixture
def root(tmp_path, state) -> Path:
    """The base project, applied to prod."""
    root = write_project(tmp_path / "p", FILES)
    record_plan(build_plan(load_project(root), state, execution_time=WHEN), state)
    return root


def edit(root: Path, *edits: tuple[str, str, str]) -> None:
    for rel, old, new in edits:
        path = root / rel
        assert old in path.read_text(), (rel, old)
        path.write_text(path.read_text().replace(old, new, 1))


def plan(root: Path, state, env: str = "dev", **options) -> Plan:
    return build_plan(load_project(root), state, env, execution_time=WHEN, **options)


def rebuilt(p: Plan, name: str) -> bool:
    """A new physical table (its own version), backfilled by this plan."""
    return p.snapshots[name].version != p.previous[name].version and name in p.backfills


def reused(p: Plan, name: str) -> bool:
    """The base environment's table is kept, with its rows: nothing is computed."""
    return p.snapshots[name].version == p.previous[name].version and name not in p.backfills


def test_breaking_seed_reaches_grandchildren_through_a_non_breaking_child(root, state):
    """Issue 8's quickstart: full_model kept its old rows although its input changed."""
    edit(root, NEW_SEED_ROW, ADD_COLUMN)
    p = plan(root, state)
    assert p.directly_modified == ["s.seed", "s.inc"]
    assert [p.category(n) for n in ("s.seed", "s.inc")] == [C.BREAKING, C.NON_BREAKING]
    for name in ("s.full", "s.top", "s.other", "s.joined"):
        assert p.category(name) == C.INDIRECT_BREAKING, name
        assert p.snapshots[name].change_category == C.INDIRECT_BREAKING  # what the state store keeps
    for name in ("s.seed", "s.inc", "s.full", "s.top", "s.other", "s.joined"):
        assert rebuilt(p, name), name
    assert p.backfills["s.inc"].intervals == [(1577836800000, 1578182400000)]  # from scratch
    # Both direct changes list the models below them (the plan output shows each tree).
    below = {"s.full", "s.other", "s.top", "s.joined"}
    assert set(p.indirectly_modified["s.seed"]) == set(p.indirectly_modified["s.inc"]) == below
    assert "s.lonely" not in p.changed


def test_breaking_parent_and_metadata_only_child(root, state):
    edit(root, FILTER_INC, REFORMAT_FULL)
    p = plan(root, state)
    assert p.directly_modified == ["s.inc"] and p.metadata_updated == []
    assert p.category("s.full") == C.INDIRECT_BREAKING and rebuilt(p, "s.full")
    assert p.category("s.top") == C.INDIRECT_BREAKING and rebuilt(p, "s.top")


def test_metadata_only_change_alone_still_reuses(root, state):
    edit(root, REFORMAT_FULL)
    p = plan(root, state)
    assert p.metadata_updated == ["s.full"] and p.category("s.full") == C.METADATA and reused(p, "s.full")
    assert p.category("s.top") == C.METADATA and reused(p, "s.top")


def test_diamond_with_one_breaking_and_one_non_breaking_path(root, state):
    edit(root, RECOUNT_FULL, ADD_COLUMN_OTHER)
    p = plan(root, state)
    assert p.category("s.full") == C.BREAKING and p.category("s.other") == C.NON_BREAKING
    assert p.category("s.joined") == C.INDIRECT_BREAKING and rebuilt(p, "s.joined")
    assert p.category("s.top") == C.INDIRECT_BREAKING and rebuilt(p, "s.top")
    assert {k: set(v) for k, v in p.indirectly_modified.items()} == {"s.full": {"s.top", "s.joined"},
                                                                    "s.other": {"s.joined"}}


def test_non_breaking_parent_and_breaking_child(root, state):
    edit(root, ADD_COLUMN, RECOUNT_FULL)
    p = plan(root, state)
    assert p.category("s.inc") == C.NON_BREAKING and rebuilt(p, "s.inc")
    assert p.category("s.full") == C.BREAKING and rebuilt(p, "s.full")
    assert p.category("s.top") == C.INDIRECT_BREAKING and rebuilt(p, "s.top")
    assert p.category("s.joined") == C.INDIRECT_BREAKING and rebuilt(p, "s.joined")
    # Only the non-breaking change lies above `other`: it keeps prod's table and rows.
    assert p.category("s.other") == C.INDIRECT_NON_BREAKING and reused(p, "s.other")


def test_change_with_include_unmodified(root, state):
    edit(root, NEW_SEED_ROW, ADD_COLUMN)
    p = plan(root, state, include_unmodified=True)
    prod = state.environments.get_environment("prod").snapshot_by_name()
    assert sorted(p.promoted) == sorted(n for n in prod)  # every model gets a view in dev
    assert p.snapshots["s.lonely"].version == prod["s.lonely"].version and "s.lonely" not in p.backfills
    assert p.category("s.full") == C.INDIRECT_BREAKING and rebuilt(p, "s.full")


def test_prod_after_dev_keeps_categories_and_tables(root, state):
    edit(root, NEW_SEED_ROW, ADD_COLUMN)
    dev = plan(root, state)
    record_plan(dev, state)
    prod = plan(root, state, "prod")
    assert prod.new_snapshots == [] and prod.backfills == {}
    for name in ("s.seed", "s.inc", "s.full", "s.top"):
        assert prod.category(name) == dev.category(name), name
        assert prod.snapshots[name].version == dev.snapshots[name].version != prod.previous[name].version


def test_stored_parent_is_judged_against_this_plans_base(root, state):
    """A snapshot reused from the store carries the category of the plan that made it, which
    compared it with another environment. In dev: inc breaking, then inc non-breaking on top of
    that. Planning prod with a new change to `other` must rebuild `joined`: against prod, inc's
    change is breaking, whatever the store says, and `full` (from the store) has new rows."""
    edit(root, FILTER_INC)
    record_plan(plan(root, state), state)
    edit(root, ADD_COLUMN)
    dev = plan(root, state)
    assert dev.category("s.inc") == C.NON_BREAKING and dev.category("s.full") == C.INDIRECT_NON_BREAKING
    record_plan(dev, state)

    edit(root, ADD_COLUMN_OTHER)
    prod = plan(root, state, "prod")
    inc, full = prod.snapshots["s.inc"], prod.snapshots["s.full"]
    assert inc not in prod.new_snapshots and inc.change_category == C.NON_BREAKING  # as stored by dev
    assert full not in prod.new_snapshots and full.change_category == C.INDIRECT_NON_BREAKING
    assert prod.category("s.inc") == C.BREAKING and prod.category("s.full") == C.INDIRECT_BREAKING  # vs prod
    assert full.version != prod.previous["s.full"].version  # dev's table, built after the breaking step
    assert prod.category("s.other") == C.NON_BREAKING
    assert prod.category("s.joined") == C.INDIRECT_BREAKING and rebuilt(prod, "s.joined")


def test_environment_holding_mixed_versions_is_rebuilt(root, state):
    """No parent changes in this plan, but the environment kept `full` on an older `inc`."""
    edit(root, FILTER_INC)
    dev = plan(root, state)
    inc_snapshot = dev.snapshots["s.inc"]
    state.snapshots.push_snapshots([inc_snapshot])  # dev's other snapshots were never stored
    prod = state.environments.get_environment("prod")
    mixed = [es if es.name != "s.inc" else es.model_copy(update={"identifier": inc_snapshot.identifier,
                                                               "version": inc_snapshot.version,
                                                               "table_name": inc_snapshot.table_name})
             for es in prod.snapshots]
    state.environments.promote_environment(Environment(**{**prod.model_dump(), "snapshots": mixed, "plan_id": "mixed",
                                             "previous_plan_id": prod.plan_id}))
    p = plan(root, state, "prod")
    assert p.directly_modified == [] and p.metadata_updated == []
    assert p.category("s.full") == C.INDIRECT_BREAKING and rebuilt(p, "s.full")
    assert p.category("s.top") == C.INDIRECT_BREAKING and rebuilt(p, "s.top")
    assert set(p.indirectly_modified["s.inc"]) == {"s.full", "s.other", "s.top", "s.joined"}
