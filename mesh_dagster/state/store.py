"""`StateStore`: snapshots, environments, intervals, plans and locks in one SQL database.

The store is its parts, one module per concern, all writing through one shared `Database`
(state/connection.py: the engine, the schema, one transaction per write, the Postgres advisory
locks that serialise decisions):

    store.snapshots      Snapshots      state/snapshots.py     immutable snapshots and captured content
    store.environments   Environments   state/environments.py  promote / finalize / revert, optimistic
    store.intervals      Intervals      state/intervals.py     the append-only interval log
    store.plans          PlanRecords    state/plans.py         plans recorded for review, their events
    store.locks          Locks          state/locks.py         named locks held as leases
    store.journal        Journal        state/journal.py       writes under way, retired generations
    store.statement_runs StatementRuns  state/statement_runs.py  before_all / after_all of each Dagster run

`StateStore` itself keeps the surface its callers use (the `execution.state.State` Protocol and the
front doors): methods for snapshots, environments, intervals and locks delegate to their part; plan
records and the journal are reached through their part (the names forwarded in `__init__`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager

from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId
from mesh_dagster.core.time.intervals import Interval
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database
from mesh_dagster.state.environments import Environments
from mesh_dagster.state.intervals import IntervalKey, Intervals
from mesh_dagster.state.journal import Journal
from mesh_dagster.state.locks import EXCLUSIVE_LOCK, Lease, LockInfo, LockLostError, Locks
from mesh_dagster.state.migrations import MIGRATIONS, Migration
from mesh_dagster.state.plans import PlanRecords
from mesh_dagster.state.snapshots import Snapshots
from mesh_dagster.state.statement_runs import StatementRuns

# Imported from here by the rest of the package (execution/, context.py) and by tests.
__all__ = ["EXCLUSIVE_LOCK", "Lease", "LockInfo", "LockLostError", "StateStore"]


class StateStore:
    """The only object that reads or writes persisted state. Safe to share between threads."""

    def __init__(self, url: str, *, check_version: bool = True):
        """Connect, create the tables of an empty database, and check the schema version.

        `check_version=False` is for `mesh migrate`, which must open an out-of-date store.
        """
        self.db = Database(url, check_version=check_version)
        self.url = self.db.url
        self.schema_version = self.db.schema_version
        self.snapshots = Snapshots(self.db)
        self.environments = Environments(self.db)
        self.intervals = Intervals(self.db)
        self.plans = PlanRecords(self.db)
        self.locks = Locks(self.db)
        self.journal = Journal(self.db)
        self.statement_runs = StatementRuns(self.db)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({self.url!r})"

    def migrate(
        self, target: int = schema.SCHEMA_VERSION, migrations: Mapping[int, Migration] = MIGRATIONS
    ) -> list[int]:
        """Upgrade the tables to `target` in one transaction; returns the versions applied."""
        applied = self.db.migrate(target, migrations)
        self.schema_version = self.db.schema_version
        return applied

    # ------------------------------------------------------------------ snapshots (state/snapshots.py)

    def push_snapshots(self, snapshots: Iterable[Snapshot], recaptured: Iterable[Snapshot] = ()) -> None:
        self.snapshots.push_snapshots(snapshots, recaptured)

    def update_snapshots(self, snapshots: Iterable[Snapshot]) -> None:
        self.snapshots.update_snapshots(snapshots)

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        return self.snapshots.get_snapshots(ids)

    def snapshots_exist(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        return self.snapshots.snapshots_exist(ids)

    def all_snapshot_ids(self) -> set[SnapshotId]:
        return self.snapshots.all_snapshot_ids()

    def forget_snapshots(self, ids: Iterable[SnapshotId], interval_keys: Iterable[IntervalKey]) -> None:
        self.snapshots.forget_snapshots(ids, interval_keys)

    # ------------------------------------------------------------------ environments (state/environments.py)

    def get_environment(self, name: str) -> Environment | None:
        return self.environments.get_environment(name)

    def get_environments(self) -> list[Environment]:
        return self.environments.get_environments()

    def promote_environment(self, env: Environment, lease: Lease | None = None) -> None:
        self.environments.promote_environment(env, lease)

    def finalize_environment(self, name: str, plan_id: str, now_ms: int | None = None,
                             lease: Lease | None = None) -> None:
        self.environments.finalize_environment(name, plan_id, now_ms, lease)

    def replaced_environment(self, name: str) -> Environment | None:
        return self.environments.replaced_environment(name)

    def served_environment(self, name: str) -> Environment | None:
        return self.environments.served_environment(name)

    def revert_environment(self, name: str, plan_id: str, *, views_restored: bool = False,
                           lease: Lease | None = None) -> bool:
        return self.environments.revert_environment(name, plan_id, views_restored=views_restored, lease=lease)

    def invalidate_environment(self, name: str, now_ms: int | None = None) -> None:
        self.environments.invalidate_environment(name, now_ms)

    def delete_environment(self, name: str) -> None:
        self.environments.delete_environment(name)

    def expired_environments(self, now_ms: int | None = None) -> list[Environment]:
        return self.environments.expired_environments(now_ms)

    # ------------------------------------------------------------------ intervals (state/intervals.py)

    def add_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        self.intervals.add_intervals(items)

    def remove_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        self.intervals.remove_intervals(items)

    def get_intervals(self, keys: Iterable[IntervalKey]) -> dict[IntervalKey, list[Interval]]:
        return self.intervals.get_intervals(keys)

    # ------------------------------------------------------------------ locks (state/locks.py)

    def lock(self, name: str, owner: str, timeout_s: float = 600, lease_s: float = 3600, *,
             holder_is_dead: Callable[[LockInfo], bool] | None = None,
             busy: Callable[[LockInfo], str] | None = None) -> AbstractContextManager[Lease]:
        return self.locks.lock(name, owner, timeout_s, lease_s, holder_is_dead=holder_is_dead, busy=busy)

    def lock_holder(self, name: str) -> LockInfo | None:
        return self.locks.lock_holder(name)

    def lock_holders(self) -> list[LockInfo]:
        return self.locks.lock_holders()

    def break_lock(self, name: str, token: str) -> bool:
        return self.locks.break_lock(name, token)
