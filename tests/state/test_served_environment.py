"""Issue 19, point 5, on the state store (SQLite and Postgres): what an environment serves while an
apply is unfinished, and how an unfinished apply is taken back.

`served_environment` is what `mesh run` evaluates: the record once finalized, else the last
finalized record, even behind several applies that never finished (before, a merge of them kept
no trace of it). `revert_environment` returns the record to it, finalized when the caller put the
views back, else unfinalized with what the views may still show, so the next apply repairs them.
"""

from __future__ import annotations

from mesh_dagster.state import StateStore
from tests.state.test_store import make_env, make_snapshot


def test_the_last_finalized_record_is_served_behind_unfinished_applies(store: StateStore) -> None:
    a, b, c = make_snapshot("s.a"), make_snapshot("s.b"), make_snapshot("s.c")
    store.environments.promote_environment(make_env("dev", "p1", None, [a]))
    assert store.environments.served_environment("dev") is None  # its first apply never finished: nothing served
    store.environments.finalize_environment("dev", "p1")
    assert store.environments.served_environment("dev").plan_id == "p1"

    store.environments.promote_environment(make_env("dev", "p2", "p1", [b]))  # killed while moving views
    assert store.environments.served_environment("dev").plan_id == "p1"
    store.environments.promote_environment(make_env("dev", "p3", "p2", [c]))  # killed too: p1 is still what is served
    served = store.environments.served_environment("dev")
    assert (served.plan_id, served.promoted, served.finalized_ts is not None) == ("p1", ["s.a"], True)
    assert store.environments.replaced_environment("dev").promoted == ["s.a", "s.b"]  # and what the views may show

    store.environments.finalize_environment("dev", "p3")
    assert store.environments.served_environment("dev").plan_id == "p3" and store.environments.replaced_environment("dev") is None
    assert store.environments.served_environment("nowhere") is None


def test_an_unfinished_apply_whose_views_were_put_back_returns_to_the_served_record(store: StateStore) -> None:
    a, b = make_snapshot("s.a"), make_snapshot("s.b")
    store.environments.promote_environment(make_env("dev", "p1", None, [a]))
    store.environments.finalize_environment("dev", "p1", now_ms=1000)
    store.environments.promote_environment(make_env("dev", "p2", "p1", [b]))

    assert store.environments.revert_environment("dev", "p1", views_restored=True) is False  # not the unfinished one
    assert store.environments.revert_environment("dev", "p2", views_restored=True) is True
    env = store.environments.get_environment("dev")
    assert (env.plan_id, env.previous_plan_id, env.promoted, env.finalized_ts) == ("p1", None, ["s.a"], 1000)
    assert store.environments.replaced_environment("dev") is None
    assert store.environments.revert_environment("dev", "p2") is False  # nothing left to take back


def test_an_unfinished_apply_whose_views_could_not_be_put_back_keeps_them_to_repair(store: StateStore) -> None:
    a, b, c = make_snapshot("s.a"), make_snapshot("s.b"), make_snapshot("s.c")
    store.environments.promote_environment(make_env("dev", "p1", None, [a]))
    store.environments.finalize_environment("dev", "p1")
    store.environments.promote_environment(make_env("dev", "p2", "p1", [b]))

    assert store.environments.revert_environment("dev", "p2") is True
    env = store.environments.get_environment("dev")
    assert (env.plan_id, env.promoted, env.finalized_ts) == ("p1", ["s.a"], None)  # the next apply repairs views
    assert store.environments.served_environment("dev").plan_id == "p1"
    assert store.environments.replaced_environment("dev").promoted == ["s.a", "s.b"]

    store.environments.promote_environment(make_env("dev", "p3", "p1", [c]))  # the next plan is based on p1
    assert store.environments.served_environment("dev").plan_id == "p1"
    assert store.environments.replaced_environment("dev").promoted == ["s.a", "s.b"]
    store.environments.finalize_environment("dev", "p3")
    assert store.environments.served_environment("dev").plan_id == "p3"


def test_a_new_environment_taken_back_is_gone_or_kept_empty(store: StateStore) -> None:
    a = make_snapshot("s.a")
    store.environments.promote_environment(make_env("dev", "p1", None, [a]))
    assert store.environments.revert_environment("dev", "p1", views_restored=True) is True
    assert store.environments.get_environment("dev") is None  # its views were dropped: it never existed

    store.environments.promote_environment(make_env("dev", "p1", None, [a]))
    assert store.environments.revert_environment("dev", "p1") is True
    env = store.environments.get_environment("dev")
    assert (env.plan_id, env.snapshots, env.promoted, env.finalized_ts) == ("p1", [], [], None)
    assert store.environments.served_environment("dev") is None  # `mesh run` has nothing to run
    assert store.environments.replaced_environment("dev").promoted == ["s.a"]  # the next apply drops its views
