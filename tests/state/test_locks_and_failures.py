"""Issue 8 on the state store: lock takeovers by token, leases that abort their holder, the
records an unfinalized environment replaced, the janitor's exclusive lock, and the store's
failure modes (one `StateError` line, nothing half-written, no 0-byte store initialised over)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from mesh_dagster.core.errors import StateError
from mesh_dagster.core.models.audit_sample import AuditSample
from mesh_dagster.execution.locking import environment_lock, janitor_lock, snapshots_in_use
from mesh_dagster.state import EXCLUSIVE_LOCK, SCHEMA_VERSION, LockLostError, StateStore
from mesh_dagster.state.verdicts import Verdict
from tests.state.readonly import read_only
from tests.state.test_store import make_env, make_snapshot

# ---------------------------------------------------------------------- locks


def test_dead_holder_is_replaced_by_its_token_only(store: StateStore) -> None:
    """The dead-holder check and the takeover are one step: a second waiter with the same view
    of who is dead finds the new, live holder and waits."""
    dead = {"ghost-token"}
    assert store.locks.try_lock("dev", "ghost", "ghost-token", 3600) is None
    assert store.locks.try_lock("dev", "bob", "bob-token", 3600, lambda h: h.token in dead) is None
    holder = store.locks.try_lock("dev", "carol", "carol-token", 3600, lambda h: h.token in dead)
    assert (holder.owner, holder.token) == ("bob", "bob-token")


def test_holder_whose_lease_ran_out_notices_before_its_next_step(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with alice.locks.lock("dev", "alice", lease_s=0.4) as lease:
        lease.stop()  # paused: no more renewals (a stopped process, a laptop asleep)
        with bob.locks.lock("dev", "bob", timeout_s=30):  # taken over once the lease ran out
            with pytest.raises(LockLostError) as error:
                lease.check()
            assert str(error.value) == ("Lost the lock 'dev' (its lease of 0.4 s ran out or it was broken; "
                                        "bob holds it now)")
        assert lease.lost
    assert alice.locks.lock_holder("dev") is None  # releasing did not touch bob's (already released) lock


def test_environment_record_is_only_written_under_the_lock(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with alice.locks.lock("environment:dev", "alice") as lease:
        alice.environments.promote_environment(make_env("dev", "p1", None), lease=lease)
        assert bob.locks.break_lock("environment:dev", lease.token)
        with pytest.raises(LockLostError):
            alice.environments.finalize_environment("dev", "p1", lease=lease)
        with pytest.raises(LockLostError):
            alice.environments.promote_environment(make_env("dev", "p2", "p1"), lease=lease)
    env = bob.environments.get_environment("dev")
    assert (env.plan_id, env.finalized_ts) == ("p1", None)


def test_exclusive_lock_excludes_every_lock_and_is_excluded_by_any(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with alice.locks.lock("environment:dev", "alice"):
        with pytest.raises(StateError, match="held by alice"):
            with bob.locks.lock(EXCLUSIVE_LOCK, "janitor", timeout_s=0.2):
                pass
        with bob.locks.lock("environment:prod", "bob", timeout_s=0.2):  # environments among themselves: free
            pass
    with bob.locks.lock(EXCLUSIVE_LOCK, "janitor", timeout_s=1):
        with pytest.raises(StateError, match="held by janitor"):
            with alice.locks.lock("environment:dev", "alice", timeout_s=0.2):
                pass


def test_runs_writing_snapshots_exclude_only_the_janitor(open_store: Callable[..., StateStore]) -> None:
    alice, bob = open_store(), open_store()
    with snapshots_in_use(alice, "run 1"), snapshots_in_use(bob, "run 2", timeout_s=0.2):
        with environment_lock(bob, "dev", "apply", timeout_s=0.2):
            pass
        with pytest.raises(StateError, match=r"The janitor waited for a run writing snapshots \(run [12], since"):
            with janitor_lock(bob, "janitor", timeout_s=0.2):
                pass
    with janitor_lock(alice, "janitor"):
        with pytest.raises(StateError, match=r"The janitor is running \(janitor, since .*\); waiting for it timed out"):
            with snapshots_in_use(bob, "run 3", timeout_s=0.2):
                pass
        with pytest.raises(StateError, match=r"Environment 'dev' cannot be changed while the janitor runs"):
            with environment_lock(bob, "dev", "apply", timeout_s=0.2):
                pass


def test_lock_waits_say_who_holds_them(store: StateStore) -> None:
    with store.locks.lock("environment:dev", "alice"):
        with pytest.raises(StateError) as error:
            with store.locks.lock("environment:dev", "bob", timeout_s=0.1,
                            busy=lambda h: f"busy: {h.owner} since {h.acquired_ts > 0}"):
                pass
    assert str(error.value) == "busy: alice since True"


# ---------------------------------------------------------------------- replaced records


def test_unfinalized_environment_keeps_what_it_replaced(store: StateStore) -> None:
    a, b, c = make_snapshot("s.a"), make_snapshot("s.b"), make_snapshot("s.c")
    store.environments.promote_environment(make_env("dev", "p1", None, [a, b]))
    assert store.environments.replaced_environment("dev") is None  # nothing was shown before
    store.environments.finalize_environment("dev", "p1")

    store.environments.promote_environment(make_env("dev", "p2", "p1", [a]))
    replaced = store.environments.replaced_environment("dev")
    assert (replaced.plan_id, replaced.promoted) == ("p1", ["s.a", "s.b"])

    store.environments.promote_environment(make_env("dev", "p2", "p1", [a]))  # a retried apply replaces nothing new
    assert store.environments.replaced_environment("dev").plan_id == "p1"

    store.environments.promote_environment(make_env("dev", "p3", "p2", [c]))  # p2 never finished: both may show
    replaced = store.environments.replaced_environment("dev")
    assert replaced.promoted == ["s.a", "s.b"]
    assert {s.name for s in replaced.snapshots} == {"s.a", "s.b"}

    store.environments.finalize_environment("dev", "p3")
    assert store.environments.replaced_environment("dev") is None


def test_forget_snapshots_with_their_intervals(store: StateStore) -> None:
    kept, gone = make_snapshot("s.kept"), make_snapshot("s.gone")
    store.snapshots.push_snapshots([kept, gone])
    store.intervals.add_intervals([(*kept.interval_key, 0, 10), (*gone.interval_key, 0, 10)])
    store.snapshots.forget_snapshots([gone.snapshot_id], [gone.interval_key])
    assert store.snapshots.all_snapshot_ids() == {kept.snapshot_id}
    assert store.intervals.get_intervals([kept.interval_key, gone.interval_key]) == {
        kept.interval_key: [(0, 10)], gone.interval_key: []}


def test_v1_store_is_migrated_to_the_current_schema(store: StateStore, state_url: str, raw_engine: Engine) -> None:
    store.environments.promote_environment(make_env("dev", "p1", None))
    with raw_engine.begin() as conn:  # what a v1 store looked like
        conn.execute(text("ALTER TABLE mesh_environments DROP COLUMN replaced_payload"))
        conn.execute(text("ALTER TABLE mesh_plans DROP COLUMN git_commit"))
        conn.execute(text("ALTER TABLE mesh_plans DROP COLUMN git_branch"))
        conn.execute(text("DROP TABLE mesh_plan_events"))
        conn.execute(text("DROP TABLE mesh_blobs"))
        conn.execute(text("DROP TABLE mesh_pending_writes"))
        conn.execute(text("DROP TABLE mesh_audit_verdicts"))
        conn.execute(text("DROP TABLE mesh_statement_runs"))
        conn.execute(text("DROP TABLE mesh_table_shapes"))
        conn.execute(text("UPDATE mesh_versions SET schema_version = 1"))
    with pytest.raises(StateError, match=rf"uses schema v1 but this mesh_dagster needs v{SCHEMA_VERSION}; run `mesh "
                                         "migrate`"):
        StateStore(state_url)
    with StateStore(state_url, check_version=False) as migrating:
        assert migrating.migrate() == [2, 3, 4, 5, 6, 7, 8]
    with StateStore(state_url) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION == 8
        migrated.environments.promote_environment(make_env("dev", "p2", "p1"))
        assert migrated.environments.replaced_environment("dev").plan_id == "p1"
        assert migrated.plans.list_plan_records() == []  # v3: plan records with their commit and events
        assert {"mesh_blobs", "mesh_pending_writes"} <= set(inspect(raw_engine).get_table_names())  # v4
        assert "mesh_audit_verdicts" in inspect(raw_engine).get_table_names()  # v5
        assert "mesh_statement_runs" in inspect(raw_engine).get_table_names()  # v6
        assert migrated.shapes.table_shapes(["s.a"]) == {}  # v7: tables' columns, their queries' analyses


def test_a_v7_store_keeps_its_verdicts_and_gains_their_failing_rows(store: StateStore, state_url: str,
                                                                    raw_engine: Engine) -> None:
    """Schema 8: a verdict keeps some failing rows; the verdicts recorded before show the count only."""
    old = Verdict("s.m", "v1", "i1", "not_null", "d", True, 0, 10, 3, "apply")
    store.verdicts.record([old], 1)
    with raw_engine.begin() as conn:  # what a v7 store looked like
        conn.execute(text("ALTER TABLE mesh_audit_verdicts DROP COLUMN sample"))
        conn.execute(text("UPDATE mesh_versions SET schema_version = 7"))
    with StateStore(state_url, check_version=False) as migrating:
        assert migrating.migrate() == [8]
    sample = AuditSample.of(["id", "v"], [(1, None), (2, "x")])
    with StateStore(state_url) as migrated:
        migrated.verdicts.record([replace(old, start=10, end=20, sample=sample)], 2)
        kept, new = migrated.verdicts.history([("s.m", "v1")])
    assert (kept.failing_rows, kept.sample) == (3, None)
    assert new.sample == sample and new.sample.rows == (("1", None), ("2", "x"))


# ---------------------------------------------------------------------- failure modes


def test_database_failures_are_one_line_state_errors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    StateStore(url).close()
    with read_only(path):
        with StateStore(url) as store:
            assert store.environments.get_environments() == []  # reading a read-only store works
            with pytest.raises(StateError) as error:
                store.environments.promote_environment(make_env("dev", "p1", None))
    assert str(error.value) == f"Cannot write to the state store at {url}: attempt to write a readonly database"
    with StateStore(url) as store:
        assert store.environments.get_environments() == []


def test_zero_byte_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / ".mesh" / "state.db"
    path.parent.mkdir()
    path.touch()
    with pytest.raises(StateError) as error:
        StateStore(f"sqlite:///{path}")
    assert str(error.value).startswith(
        f"The state store at sqlite:///{path} is an empty (0-byte) file: it was truncated")
    assert "Restore it from a backup, or delete it" in str(error.value)
    assert path.stat().st_size == 0 and sorted(p.name for p in path.parent.iterdir()) == ["state.db"]


def test_new_store_appears_complete_even_when_created_by_many_at_once(tmp_path: Path) -> None:
    """Built aside and linked into place: never a 0-byte or half-made `state.db`, no leftovers."""
    path = tmp_path / ".mesh" / "state.db"
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            with StateStore(f"sqlite:///{path}") as store:
                store.intervals.add_interval("s.a", "v", 0, 1)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("state.db-")) == ["state.db"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT schema_version FROM mesh_versions").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT COUNT(*) FROM mesh_intervals").fetchone() == (6,)


def test_renewal_keeps_going_while_the_holder_works(open_store: Callable[..., StateStore]) -> None:
    alice = open_store()
    with alice.locks.lock("dev", "alice", lease_s=0.3) as lease:
        deadline = time.monotonic() + 30
        first = alice.locks.lock_holder("dev").expires_ts
        while alice.locks.lock_holder("dev").expires_ts == first and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # longer than the lease: only the renewals keep it
        lease.check()
        assert not lease.lost
