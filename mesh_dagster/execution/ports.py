"""execution/'s ports: the state store as `execution/` sees it — the operations an apply, a run, a
materialization and the janitor call, and nothing about SQLAlchemy.

`state/store.StateStore` implements `State` (mypy checks that where Context hands it over). One
Protocol per part, as the store has one part per concern (state/): `State` is the store's parts,
reached as `state.environments`, `state.intervals`... — never through the store itself. Plan
building reads through the narrower `core.plan.StateReader`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from mesh_dagster.core.plan.review import PlanEvent, PlanRecord
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId
from mesh_dagster.state.journal import PendingWrite
from mesh_dagster.state.locks import Lease, LockInfo
from mesh_dagster.state.verdicts import Verdict

IntervalKey = tuple[str, str]  # (model name, version)
Interval = tuple[int, int]


class SnapshotState(Protocol):
    def update_snapshots(self, snapshots: Iterable[Snapshot]) -> None: ...

    def push_snapshots(self, snapshots: Iterable[Snapshot], recaptured: Iterable[Snapshot] = ()) -> None: ...

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]: ...

    def snapshots_exist(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]: ...

    def all_snapshot_ids(self) -> set[SnapshotId]: ...

    def forget_snapshots(self, ids: Iterable[SnapshotId], interval_keys: Iterable[IntervalKey]) -> None: ...


class IntervalState(Protocol):
    def get_intervals(self, keys: Iterable[IntervalKey]) -> dict[IntervalKey, list[Interval]]: ...

    def add_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None: ...

    def remove_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None: ...


class EnvironmentState(Protocol):
    def get_environment(self, name: str) -> Environment | None: ...

    def get_environments(self) -> list[Environment]: ...

    def replaced_environment(self, name: str) -> Environment | None: ...

    def served_environment(self, name: str) -> Environment | None: ...

    def revert_environment(self, name: str, plan_id: str, *, views_restored: bool = False,
                           lease: Lease | None = None) -> bool: ...

    def promote_environment(self, env: Environment, lease: Lease | None = None) -> None: ...

    def finalize_environment(self, name: str, plan_id: str, now_ms: int | None = None,
                             lease: Lease | None = None) -> None: ...

    def expired_environments(self, now_ms: int | None = None) -> list[Environment]: ...

    def invalidate_environment(self, name: str, now_ms: int | None = None) -> None: ...

    def delete_environment(self, name: str) -> None: ...


class PlanState(Protocol):
    """Plan records (execution/plans/records.py)."""

    def save_plan_record(self, record: PlanRecord) -> None: ...

    def get_plan_record(self, plan_id: str) -> PlanRecord | None: ...

    def plan_ids_starting(self, prefix: str, limit: int = 5) -> list[str]: ...

    def list_plan_records(self, environment: str | None = None, statuses: Iterable[str] | None = None,
                          limit: int = 50) -> list[PlanRecord]: ...

    def transition_plan(self, plan_id: str, allowed: Iterable[str], event: PlanEvent,
                        lease: Lease | None = None) -> PlanRecord | None: ...

    def records_mentioning(self, texts: Collection[str], recent: int = ...) -> list[PlanRecord]: ...


class LockState(Protocol):
    def lock(self, name: str, owner: str, timeout_s: float = 600, lease_s: float = 3600, *,
             holder_is_dead: Callable[[LockInfo], bool] | None = None,
             busy: Callable[[LockInfo], str] | None = None) -> AbstractContextManager[Lease]: ...

    def lock_holder(self, name: str) -> LockInfo | None: ...


class JournalState(Protocol):
    """The journal of writes under way (state/journal.py)."""

    def journal_write(self, write: PendingWrite, lease: Lease | None = None,
                      forget: Iterable[tuple[str, str, int, int]] = ()) -> None: ...

    def pending_write(self, table: str) -> PendingWrite | None: ...

    def pending_writes(self) -> list[PendingWrite]: ...

    def finish_write(self, table: str, interval: tuple[str, str, int, int] | None, retire: Iterable[str] = (),
                     lease: Lease | None = None) -> None: ...

    def retired_locations(self, table: str | None = None) -> list[tuple[str, str]]: ...

    def forget_retired(self, items: Iterable[tuple[str, str]]) -> None: ...


class VerdictState(Protocol):
    """What each audit said about the data it judged (state/verdicts.py)."""

    def record(self, verdicts: Iterable[Verdict], now_ms: int) -> None: ...

    def history(self, keys: Iterable[tuple[str, str]]) -> list[Verdict]: ...


class RunMarkState(Protocol):
    """The marks of runs' `before_all` / `after_all` (state/statement_runs.py)."""

    def marks(self, run_key: str) -> dict[str, str | None]: ...

    def mark(self, run_key: str, mark: str, failed: str | None = None) -> None: ...

    def forget_old(self, now: int | None = None) -> None: ...


class State(Protocol):
    """Everything execution/ asks of the state store, as the store's parts."""

    @property
    def snapshots(self) -> SnapshotState: ...

    @property
    def environments(self) -> EnvironmentState: ...

    @property
    def intervals(self) -> IntervalState: ...

    @property
    def locks(self) -> LockState: ...

    @property
    def plans(self) -> PlanState: ...

    @property
    def journal(self) -> JournalState: ...

    @property
    def verdicts(self) -> VerdictState: ...

    @property
    def statement_runs(self) -> RunMarkState: ...
