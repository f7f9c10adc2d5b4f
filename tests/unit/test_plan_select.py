"""Plans limited by --select-model and --backfill-model (core/plan/selected_changes.py), without Spark.

Prod is recorded as applied (state only) before each test; then the project changes in four ways
at once: s.a and s.d are edited (breaking), s.n is added, s.e is removed.

    s.a -> s.b -> s.c        s.d -> s.e (removed)        s.n (added)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import PlanError, SelectorError
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

WHEN = "2020-01-05"
FILES = {
    "models/a.sql": "MODEL (name s.a, kind FULL, tags (core));\nSELECT 1 AS x\n",
    "models/b.sql": "MODEL (name s.b, kind FULL, tags (finance));\nSELECT x FROM s.a\n",
    "models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT x FROM s.b\n",
    "models/d.sql": "MODEL (name s.d, kind FULL, tags (finance));\nSELECT 2 AS y\n",
    "models/e.sql": "MODEL (name s.e, kind VIEW);\nSELECT y FROM s.d\n",
}


@pytest.fixture
def root(tmp_path, state) -> Path:
    """The project applied to prod, then changed: s.a and s.d edited, s.n added, s.e removed."""
    root = write_project(tmp_path / "p", FILES)
    record_plan(build_plan(load_project(root, use_cache=False), state, execution_time=WHEN), state)
    edit(root, "a", "SELECT 1 AS x", "SELECT 1 AS x WHERE TRUE")
    edit(root, "d", "SELECT 2 AS y", "SELECT 3 AS y")
    (root / "models" / "n.sql").write_text("MODEL (name s.n, kind FULL);\nSELECT 3 AS z\n")
    (root / "models" / "e.sql").unlink()
    return root


def edit(root: Path, model: str, old: str, new: str) -> None:
    path = root / "models" / f"{model}.sql"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def plan(root: Path, state, env: str = "dev", **options) -> Plan:
    return build_plan(load_project(root, use_cache=False), state, env, execution_time=WHEN, **options)


def prod_snapshot(state, name: str):
    ref = state.environments.get_environment("prod").snapshot_by_name()[name]
    return state.snapshots.get_snapshots([ref.snapshot_id])[ref.snapshot_id]


def same_as_prod(p: Plan, state, name: str) -> bool:
    return p.snapshots[name].snapshot_id == prod_snapshot(state, name).snapshot_id


def test_without_a_selection_every_change_enters(root, state):
    p = plan(root, state)
    assert sorted(p.directly_modified) == ["s.a", "s.d"]
    assert p.added == ["s.n"]
    assert [r.name for r in p.removed] == ["s.e"]


# ------------------------------------------------------------------ --select-model: what enters


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_only_the_selected_change_enters_and_the_rest_stays_as_the_environment_has_it(root, state, env):
    p = plan(root, state, env, select_models=["s.a"])
    assert p.directly_modified == ["s.a"]
    assert p.indirectly_modified == {"s.a": ["s.b", "s.c"]}  # a selected change still reaches its children
    assert p.categories == {"s.a": C.BREAKING, "s.b": C.INDIRECT_BREAKING, "s.c": C.INDIRECT_BREAKING}
    assert same_as_prod(p, state, "s.d")  # unselected edit: left out
    assert "s.n" not in p.snapshots and p.added == []  # unselected new model: stays out
    assert same_as_prod(p, state, "s.e") and p.removed == []  # unselected removal: does not happen
    assert {n for n in p.snapshots} == {"s.a", "s.b", "s.c", "s.d", "s.e"}
    assert {s.name for s in p.new_snapshots} == {"s.a", "s.b", "s.c"}


def test_an_unselected_edit_below_a_selected_change_keeps_the_environments_definition(root, state):
    edit(root, "b", "SELECT x FROM s.a", "SELECT x, 'b2' AS tag FROM s.a")
    p = plan(root, state, select_models=["s.a"])
    b, prod_b = p.snapshots["s.b"], prod_snapshot(state, "s.b")
    assert "s.b" not in p.directly_modified
    assert p.categories["s.b"] == C.INDIRECT_BREAKING
    assert b.model.query == prod_b.model.query  # prod's definition, on top of the new s.a
    assert b.fingerprint.data_hash == prod_b.fingerprint.data_hash
    assert b.fingerprint.parent_data_hash != prod_b.fingerprint.parent_data_hash
    assert [pid.name for pid in b.parents] == ["s.a"] and b.parents[0] == p.snapshots["s.a"].snapshot_id
    assert b.version != prod_b.version  # rebuilt on the new parent
    assert b.rendered_query == prod_b.rendered_query  # the stored rendering of that same definition


def test_a_selected_change_below_an_unselected_one_reads_the_environments_parent(root, state):
    edit(root, "b", "SELECT x FROM s.a", "SELECT x, 'b2' AS tag FROM s.a")
    p = plan(root, state, select_models=["s.b"])
    assert p.directly_modified == ["s.b"]
    assert same_as_prod(p, state, "s.a")
    assert p.snapshots["s.b"].parents == [prod_snapshot(state, "s.a").snapshot_id]
    assert "'b2' AS tag" in p.snapshots["s.b"].model.query
    assert p.indirectly_modified == {"s.b": ["s.c"]}


def test_selectors_select_changes_by_tag_and_with_downstream(root, state):
    p = plan(root, state, select_models=["tag:finance"])  # s.b (unchanged) and s.d
    assert p.directly_modified == ["s.d"] and p.indirectly_modified == {} and p.added == []
    p = plan(root, state, select_models=["s.d+"])  # s.d and the removed s.e below it
    assert p.directly_modified == ["s.d"] and [r.name for r in p.removed] == ["s.e"]


def test_a_selected_removal_and_a_selected_addition_happen(root, state):
    p = plan(root, state, select_models=["s.e", "s.n"])
    assert [r.name for r in p.removed] == ["s.e"]
    assert p.added == ["s.n"]
    assert p.directly_modified == []
    assert same_as_prod(p, state, "s.d")


def test_the_applied_selection_is_what_the_environment_holds(root, state):
    record_plan(plan(root, state, select_models=["s.a"]), state)
    dev = state.environments.get_environment("dev").snapshot_by_name()
    assert set(dev) == {"s.a", "s.b", "s.c", "s.d", "s.e"}
    assert dev["s.d"].identifier == prod_snapshot(state, "s.d").identifier
    # the changes left out are still there to plan
    p = plan(root, state)
    assert p.directly_modified == ["s.d"] and p.added == ["s.n"] and [r.name for r in p.removed] == ["s.e"]
    assert p.indirectly_modified == {}  # s.a's change is in dev already


def test_a_selection_matching_no_change_plans_no_change(root, state):
    p = plan(root, state, "prod", select_models=["s.c"])
    assert not p.has_changes


def test_a_selected_model_cannot_read_an_unselected_new_one(root, state):
    edit(root, "d", "SELECT 3 AS y", "SELECT z AS y FROM s.n")
    with pytest.raises(PlanError) as e:
        plan(root, state, select_models=["s.d"])
    assert str(e.value) == ("--select-model: s.d reads s.n, which is new and not selected: select it too "
                            "(e.g. --select-model '+s.d')")
    p = plan(root, state, select_models=["+s.d"])
    assert p.added == ["s.n"] and p.directly_modified == ["s.d"]


def test_a_selected_removal_cannot_leave_an_unselected_reader_behind(root, state):
    (root / "models" / "d.sql").unlink()
    with pytest.raises(PlanError) as e:
        plan(root, state, select_models=["s.d"])
    assert str(e.value) == ("--select-model: s.d is removed by the selection, but s.e, not selected, still reads "
                            "it as the environment has it: select s.e too")
    p = plan(root, state, select_models=["s.d+"])
    assert sorted(r.name for r in p.removed) == ["s.d", "s.e"]


def test_a_selector_selecting_nothing_names_the_flag_and_close_names(root, state):
    with pytest.raises(SelectorError) as e:
        plan(root, state, select_models=["s.b", "s.bb"])
    assert str(e.value) == "--select-model 's.bb' matches no model. Did you mean: s.b?"


def test_an_environment_snapshot_lost_from_the_store_cannot_stay_unselected(root, state):
    lost = prod_snapshot(state, "s.d")
    state.snapshots.forget_snapshots([lost.snapshot_id], [])
    with pytest.raises(PlanError, match=r"^--select-model: s.d cannot stay as the environment has it: the state "
                                        r"store lost its snapshot; select it too$"):
        plan(root, state, select_models=["s.a"])
    assert {"s.a", "s.d"} <= set(plan(root, state, select_models=["s.a | s.d"]).changed)


# ------------------------------------------------------------------ what is backfilled and shown


def test_prod_backfills_everything_the_selection_changes(root, state):
    p = plan(root, state, "prod", select_models=["s.a"])
    assert set(p.backfills) == {"s.a", "s.b", "s.c"}
    assert set(p.promoted) == {"s.a", "s.b", "s.c", "s.d", "s.e"}


def test_a_development_selection_backfills_and_shows_only_the_selection(root, state):
    p = plan(root, state, select_models=["s.a"])
    assert set(p.backfills) == {"s.a"}  # its indirectly modified children are not computed...
    assert p.promoted == ["s.a"]  # ...so they get no view


def test_backfill_model_computes_the_selection_and_its_upstream_only(root, state):
    p = plan(root, state, backfill_models=["s.b"])
    assert sorted(p.directly_modified) == ["s.a", "s.d"] and p.added == ["s.n"]  # every change enters
    assert set(p.backfills) == {"s.a", "s.b"}
    assert set(p.promoted) == {"s.a", "s.b"}  # not s.c, s.d, s.n: changed but not computed


def test_backfill_model_wins_over_the_selection(root, state):
    p = plan(root, state, select_models=["s.a"], backfill_models=["s.c"])
    assert set(p.backfills) == {"s.a", "s.b", "s.c"}
    assert set(p.promoted) == {"s.a", "s.b", "s.c"}


def test_a_later_plan_can_backfill_what_an_earlier_one_left_out(root, state):
    record_plan(plan(root, state, backfill_models=["s.b"]), state)
    p = plan(root, state, backfill_models=["s.c"])
    assert not p.has_changes
    assert set(p.backfills) == {"s.c"}  # s.a and s.b were computed by the first plan
    assert "s.c" in p.promoted and {"s.a", "s.b"} <= set(p.promoted)


def test_a_changed_model_shown_before_loses_its_view_when_left_out_of_the_backfill(root, state):
    record_plan(plan(root, state, select_models=["s.d"]), state)  # dev shows s.d (prod's s.e below it)
    edit(root, "d", "SELECT 3 AS y", "SELECT 4 AS y")
    p = plan(root, state, backfill_models=["s.a"])
    assert "s.d" in p.directly_modified and "s.d" not in p.backfills
    assert "s.d" not in p.promoted  # its view would otherwise point at a table nothing computed


def test_include_unmodified_still_hides_changed_models_left_out_of_the_backfill(root, state):
    p = plan(root, state, backfill_models=["s.b"], include_unmodified=True)
    assert set(p.promoted) == {"s.a", "s.b"}  # s.c, s.d and s.n changed and are not computed


def test_backfill_model_is_refused_in_prod(root, state):
    with pytest.raises(PlanError) as e:
        plan(root, state, "prod", backfill_models=["s.a"])
    assert str(e.value) == ("--backfill-model can only be used with development environments, not prod: a prod "
                            "plan computes everything it changes")


def test_backfill_model_selects_among_the_plans_models(root, state):
    with pytest.raises(SelectorError) as e:
        plan(root, state, select_models=["s.a"], backfill_models=["s.n"])  # s.n stays out of this plan
    assert str(e.value).startswith("--backfill-model 's.n' matches no model. Did you mean: ")
