"""The store is its parts over one connection: what one part writes, the facade and the other
parts read in the same database, and a lease taken through `store.locks` guards the writes of the
other parts (issue 21: the state store split by concern)."""

from __future__ import annotations

import pytest

from mesh_dagster.execution.ports import State
from mesh_dagster.state import EXCLUSIVE_LOCK as PACKAGE_EXCLUSIVE_LOCK
from mesh_dagster.state import StateStore
from mesh_dagster.state.locks import EXCLUSIVE_LOCK, Lease, LockInfo, LockLostError
from mesh_dagster.state.store import EXCLUSIVE_LOCK as STORE_EXCLUSIVE_LOCK
from mesh_dagster.state.store import Lease as StoreLease
from mesh_dagster.state.store import LockInfo as StoreLockInfo
from mesh_dagster.state.store import LockLostError as StoreLockLostError
from tests.state.test_store import make_env, make_snapshot


def test_lock_names_stay_importable_from_the_store_module() -> None:
    assert STORE_EXCLUSIVE_LOCK == PACKAGE_EXCLUSIVE_LOCK == EXCLUSIVE_LOCK == "*"
    assert (StoreLease, StoreLockInfo, StoreLockLostError) == (Lease, LockInfo, LockLostError)


def test_parts_share_one_database(store: StateStore) -> None:
    snap = make_snapshot("s.a")
    store.snapshots.push_snapshots([snap])
    assert set(store.snapshots.get_snapshots([snap.snapshot_id])) == {snap.snapshot_id}
    store.intervals.add_interval("s.a", "v1", 0, 10)
    assert store.intervals.get_intervals([("s.a", "v1")]) == {("s.a", "v1"): [(0, 10)]}
    store.environments.promote_environment(make_env("dev", "p1", None, [snap]))
    assert store.environments.get_environment("dev").plan_id == "p1"
    assert store.db is store.snapshots._db is store.environments._db is store.journal._db


def test_plan_records_and_the_journal_are_parts_of_the_state(store: StateStore) -> None:
    """execution/ reaches plan records and the write journal through the State protocol's parts."""
    state: State = store
    assert state.plans.list_plan_records() == [] and state.journal.pending_writes() == []
    assert not hasattr(store, "list_plan_records") and not hasattr(store, "pending_writes")


def test_a_lease_from_the_locks_part_guards_the_other_parts(store: StateStore) -> None:
    snap = make_snapshot("s.a")
    store.snapshots.push_snapshots([snap])
    with store.locks.lock("environment:dev", "me", lease_s=60) as lease:
        assert store.locks.lock_holder("environment:dev").owner == "me"
        store.environments.promote_environment(make_env("dev", "p1", None, [snap]), lease=lease)
        assert store.locks.break_lock("environment:dev", lease.token)
        with pytest.raises(LockLostError, match="Lost the lock 'environment:dev'"):
            store.environments.finalize_environment("dev", "p1", lease=lease)
    assert store.environments.get_environment("dev").finalized_ts is None  # the finalize wrote nothing
    assert store.locks.lock_holders() == []
