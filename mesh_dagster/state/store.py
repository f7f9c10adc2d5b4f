"""`StateStore`: snapshots, environments, intervals, plans and locks in one SQL database.

SQLite (one file under the project's `.mesh/`) for a single machine, Postgres for teams. Several
processes share it at once — the CLI beside Dagster's webserver, daemon and runs — so:

- every write is one transaction; on SQLite writers start with `BEGIN IMMEDIATE` (the write lock
  is taken up front, so a reader never has to upgrade and fail) and wait on a busy timeout,
  and the file is in WAL mode so readers never block writers;
- on Postgres, writes that decide on what they read (promote, finalize, lock) first take a
  transaction-scoped advisory lock keyed by the record, so even a record that does not exist
  yet cannot be created twice.

Environments use optimistic concurrency: a plan remembers the `plan_id` it was computed
against (`previous_plan_id`) and may only replace an environment still at that plan.

Every database failure reaches the caller as one `StateError` line naming the store and what
failed (connect, read, write); a SQLite file is created atomically, so a 0-byte `state.db` is never
ours and is refused instead of being initialised over.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import (
    Connection,
    Engine,
    Table,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from mesh_dagster.core.errors import ConflictingPlanError, StateError
from mesh_dagster.core.plan.review import PlanEvent, PlanRecord, PlanSummary
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId
from mesh_dagster.core.time.intervals import Interval, merge_intervals, subtract_intervals
from mesh_dagster.state import journal, schema
from mesh_dagster.state.blobs import blob_rows, captured_content, read_blob
from mesh_dagster.state.journal import PendingWrite
from mesh_dagster.state.migrations import (
    MIGRATIONS,
    Migration,
    apply_migrations,
    check_compatible,
    stamp,
    stored_schema_version,
)

logger = logging.getLogger(__name__)

# Ids per `IN (...)` query: one round trip per batch, far below every driver's parameter limit.
BATCH_SIZE = 500
SQLITE_BUSY_TIMEOUT_S = 30
POSTGRES_CONNECT_TIMEOUT_S = 10
# The lock that excludes every other lock, and that any other lock excludes (the janitor's).
EXCLUSIVE_LOCK = "*"

IntervalKey = tuple[str, str]
T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _or_now(ms: int | None) -> int:
    return _now_ms() if ms is None else ms


class LockInfo(BaseModel):
    name: str
    owner: str
    token: str  # random per acquisition: breaking a lock names the exact holder it looked at
    acquired_ts: int
    expires_ts: int


class LockLostError(StateError):
    """A lock this process held was taken over (its lease ran out, or it was broken)."""


class StateStore:
    """The only object that reads or writes persisted state. Safe to share between threads."""

    def __init__(self, url: str, *, check_version: bool = True):
        """Connect, create the tables of an empty database, and check the schema version.

        `check_version=False` is for `mesh migrate`, which must open an out-of-date store.
        """
        self._url = _parse_url(url)
        self.url = self._url.render_as_string(hide_password=True)
        if self._url.get_backend_name() == "sqlite" and not _is_memory_sqlite(self._url):
            _prepare_sqlite_file(Path(self._url.database or ""), self.url)
        self._engine = _create_engine(self._url)
        self._is_postgres = self._engine.dialect.name == "postgresql"
        try:
            self._check_reachable()
            self.schema_version = self._initialize()
            if check_version:
                check_compatible(self.schema_version)
        except BaseException:
            self._engine.dispose()
            raise

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._engine.dispose()

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
        with self._write() as conn:
            self._serialize(conn, "schema")
            stored = stored_schema_version(conn)
            applied = apply_migrations(conn, target if stored is None else stored, target, migrations)
        self.schema_version = target
        return applied

    def _check_reachable(self) -> None:
        try:
            with self._engine.connect():
                pass
        except DBAPIError as e:
            raise StateError(f"Cannot connect to the state store at {self.url}: {_reason(e)}{self._hint()}") from None

    def _hint(self) -> str:
        if self._url.get_backend_name() != "sqlite" or _is_memory_sqlite(self._url):
            return ""
        return _read_only_hint(Path(self._url.database or "").parent)

    def _initialize(self) -> int:
        """The stored schema version; an empty database (a new Postgres one) gets the tables."""
        with self._read() as conn:
            stored = stored_schema_version(conn)
        if stored is not None:
            return stored
        with self._write("initialise") as conn:
            self._serialize(conn, "schema")
            stored = stored_schema_version(conn)
            if stored is None:
                _create_tables(conn)
                stored = schema.SCHEMA_VERSION
        return stored

    # ------------------------------------------------------------------ snapshots

    def push_snapshots(self, snapshots: Iterable[Snapshot], recaptured: Iterable[Snapshot] = ()) -> None:
        """Record new snapshots; ones already stored are left untouched (they are immutable
        by identity — use `update_snapshots` for the few fields that may change). `recaptured`
        are stored snapshots made before captures existed, given the capture a plan just made
        for the same fingerprint (core/snapshots/capture.py): only that is added to them."""
        ts = _now_ms()
        snapshots, recaptured = list(snapshots), list(recaptured)
        rows = {s.snapshot_id: _snapshot_row(s, ts) for s in snapshots}
        if not rows and not recaptured:
            return
        table = schema.snapshots
        content = blob_rows(captured_content([*snapshots, *recaptured]), ts)  # in the same transaction
        with self._write() as conn:
            if content:
                conn.execute(self._insert(schema.blobs).on_conflict_do_nothing(), content)
            for chunk in _chunks(list(rows.values()), BATCH_SIZE):
                conn.execute(self._insert(table).on_conflict_do_nothing(), chunk)
            for snap in recaptured:
                conn.execute(update(table).where(table.c.name == snap.name, table.c.identifier == snap.identifier)
                             .values(payload=snap.model_dump_json(), updated_ts=ts))

    def update_snapshots(self, snapshots: Iterable[Snapshot]) -> None:
        """Rewrite stored snapshots (e.g. after categorisation). All must exist already."""
        ts = _now_ms()
        by_id = {s.snapshot_id: s for s in snapshots}
        if not by_id:
            return
        table = schema.snapshots
        stmt = (
            update(table)
            .where(table.c.name == bindparam("b_name"), table.c.identifier == bindparam("b_identifier"))
            .values(version=bindparam("b_version"), payload=bindparam("b_payload"), updated_ts=ts)
        )
        with self._write() as conn:
            missing = set(by_id) - self._existing_snapshot_ids(conn, list(by_id))
            if missing:
                listed = ", ".join(f"{i.name}@{i.identifier}" for i in sorted(missing))
                raise StateError(f"Cannot update snapshots that are not in the state store: {listed}")
            params = [
                {
                    "b_name": i.name,
                    "b_identifier": i.identifier,
                    "b_version": s.version,
                    "b_payload": s.model_dump_json(),
                }
                for i, s in by_id.items()
            ]
            conn.execute(stmt, params)

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        """Snapshots by id; ids that are not stored are simply absent from the result."""
        wanted = _unique_ids(ids)
        table = schema.snapshots
        key = tuple_(table.c.name, table.c.identifier)
        found: dict[SnapshotId, Snapshot] = {}
        with self._read() as conn:
            for chunk in _chunks(wanted, BATCH_SIZE):
                query = select(table.c.name, table.c.identifier, table.c.payload).where(key.in_(chunk))
                for name, identifier, payload in conn.execute(query):
                    found[SnapshotId(name, identifier)] = self._attached(Snapshot.model_validate_json(payload))
        return found

    def _attached(self, snapshot: Snapshot) -> Snapshot:
        """A stored snapshot that fetches the content it captured from this store, when asked."""
        seed = snapshot.capture.seed if snapshot.capture is not None else None
        if seed is not None:
            seed.attach(functools.partial(self.get_blob, seed.digest))
        return snapshot

    def get_blob(self, digest: str) -> bytes | None:
        """Content a snapshot captured (state/blobs.py), by digest; None when none is stored."""
        with self._read() as conn:
            return read_blob(conn, digest)

    def snapshots_exist(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        with self._read() as conn:
            return self._existing_snapshot_ids(conn, _unique_ids(ids))

    def all_snapshot_ids(self) -> set[SnapshotId]:
        table = schema.snapshots
        with self._read() as conn:
            return {SnapshotId(n, i) for n, i in conn.execute(select(table.c.name, table.c.identifier))}

    def forget_snapshots(self, ids: Iterable[SnapshotId], interval_keys: Iterable[IntervalKey]) -> None:
        """Delete snapshots and the interval history of versions whose tables are about to be
        dropped, in one transaction: state never names a table that is gone, nor keeps half of a
        deletion (a crash afterwards leaves an unreferenced table behind, never a dangling record)."""
        snapshots, intervals = schema.snapshots, schema.intervals
        snapshot_key = tuple_(snapshots.c.name, snapshots.c.identifier)
        interval_key = tuple_(intervals.c.name, intervals.c.version)
        with self._write() as conn:
            for chunk in _chunks(list(dict.fromkeys((n, v) for n, v in interval_keys)), BATCH_SIZE):
                conn.execute(delete(intervals).where(interval_key.in_(chunk)))
            for chunk in _chunks(_unique_ids(ids), BATCH_SIZE):
                conn.execute(delete(snapshots).where(snapshot_key.in_(chunk)))

    def _existing_snapshot_ids(self, conn: Connection, ids: Sequence[SnapshotId]) -> set[SnapshotId]:
        table = schema.snapshots
        key = tuple_(table.c.name, table.c.identifier)
        found: set[SnapshotId] = set()
        for chunk in _chunks(ids, BATCH_SIZE):
            query = select(table.c.name, table.c.identifier).where(key.in_(chunk))
            found.update(SnapshotId(n, i) for n, i in conn.execute(query))
        return found

    # ------------------------------------------------------------------ environments

    def get_environment(self, name: str) -> Environment | None:
        table = schema.environments
        with self._read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        return _to_environment(row) if row else None

    def get_environments(self) -> list[Environment]:
        table = schema.environments
        with self._read() as conn:
            return [_to_environment(r) for r in conn.execute(select(table).order_by(table.c.name))]

    def promote_environment(self, env: Environment, lease: Lease | None = None) -> None:
        """Record `env` (unfinalized) as the environment, unless another plan got there first.

        Re-promoting the plan that is already current is allowed, so a retried apply is a no-op.
        With `lease`, the record is only written if that lock is still held, in the same
        transaction. The records whose views may still be live until `env` is finalized are kept
        (`replaced_environment`): a crash before the views moved is repaired from them, and the
        janitor keeps their tables.
        """
        table = schema.environments
        with self._write() as conn:
            self._serialize(conn, f"environment:{env.name}")
            if lease is not None:
                self._hold(conn, lease)
            current = conn.execute(select(table).where(table.c.name == env.name).with_for_update()).first()
            if current is None and env.previous_plan_id is not None:
                raise ConflictingPlanError(
                    f"Environment '{env.name}' was removed while this plan ({env.plan_id}) was in "
                    f"progress. Re-run `mesh plan {env.name}`."
                )
            if current is not None and current.plan_id not in (env.previous_plan_id, env.plan_id):
                raise _conflict(env.name, current.plan_id, env.plan_id)
            row = {**_environment_row(env), "replaced_payload": _replaced_payload(current, env.plan_id)}
            self._upsert(conn, table, row, ["name"])

    def finalize_environment(self, name: str, plan_id: str, now_ms: int | None = None,
                             lease: Lease | None = None) -> None:
        """Mark the environment complete (views swapped) — only if `plan_id` is still current
        (and, with `lease`, the lock still held)."""
        table = schema.environments
        with self._write() as conn:
            self._serialize(conn, f"environment:{name}")
            if lease is not None:
                self._hold(conn, lease)
            current = conn.execute(select(table.c.plan_id).where(table.c.name == name).with_for_update()).scalar()
            if current is None:
                raise ConflictingPlanError(
                    f"Environment '{name}' was removed while this plan ({plan_id}) was in progress. "
                    f"Re-run `mesh plan {name}`."
                )
            if current != plan_id:
                raise _conflict(name, current, plan_id)
            conn.execute(
                update(table).where(table.c.name == name).values(finalized_ts=_or_now(now_ms), replaced_payload=None)
            )

    def replaced_environment(self, name: str) -> Environment | None:
        """While `name` is unfinalized: what its views may still show besides its record (the
        records it replaced since it was last finalized, merged). None once finalized."""
        table = schema.environments
        with self._read() as conn:
            row = conn.execute(
                select(table.c.replaced_payload, table.c.finalized_ts).where(table.c.name == name)
            ).first()
        if row is None or row.finalized_ts is not None:
            return None
        return _replaced(row)

    def served_environment(self, name: str) -> Environment | None:
        """What the environment serves: its record once finalized; while an apply is unfinished,
        the last finalized record (None when it never had one). `mesh run` evaluates these
        snapshots, never those of a plan whose apply did not finish."""
        table = schema.environments
        with self._read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        if row is None:
            return None
        return _to_environment(row) if row.finalized_ts is not None else _last_finalized(_replaced(row))

    def revert_environment(self, name: str, plan_id: str, *, views_restored: bool = False,
                           lease: Lease | None = None) -> bool:
        """Take back the unfinished apply of `plan_id`: the record becomes the last finalized one
        again. With `views_restored` (the caller put every view back) it is finalized, and a new
        environment's record goes away; otherwise it stays unfinalized, keeping what the views may
        still show, so the next apply re-creates them (a new environment keeps an empty record).
        False, changing nothing, unless `plan_id` is the current unfinalized record."""
        table = schema.environments
        with self._write() as conn:
            self._serialize(conn, f"environment:{name}")
            if lease is not None:
                self._hold(conn, lease)
            current = conn.execute(select(table).where(table.c.name == name).with_for_update()).first()
            if current is None or current.plan_id != plan_id or current.finalized_ts is not None:
                return False
            replaced = _replaced(current)
            served = _last_finalized(replaced)
            if views_restored and served is None:
                conn.execute(delete(table).where(table.c.name == name))
                return True
            if views_restored and served is not None:
                record = served.model_copy(update={"finalized_ts": served.finalized_ts or _now_ms()})
                self._upsert(conn, table, {**_environment_row(record), "replaced_payload": None}, ["name"])
                return True
            undone = _to_environment(current)
            shown = _merge_environments(replaced, undone) if replaced is not None else undone
            shown = shown.model_copy(update={"last_finalized": served})
            record = (served or Environment(name=name, plan_id=plan_id)).model_copy(update={"finalized_ts": None})
            self._upsert(conn, table, {**_environment_row(record), "replaced_payload": shown.model_dump_json()},
                         ["name"])
            return True

    def invalidate_environment(self, name: str, now_ms: int | None = None) -> None:
        """Let the janitor remove the environment from `now_ms` on."""
        table = schema.environments
        with self._write() as conn:
            result = conn.execute(update(table).where(table.c.name == name).values(expiration_ts=_or_now(now_ms)))
            if result.rowcount == 0:
                raise StateError(f"Environment '{name}' does not exist.")

    def delete_environment(self, name: str) -> None:
        table = schema.environments
        with self._write() as conn:
            conn.execute(delete(table).where(table.c.name == name))

    def expired_environments(self, now_ms: int | None = None) -> list[Environment]:
        table = schema.environments
        query = (
            select(table)
            .where(table.c.expiration_ts.is_not(None), table.c.expiration_ts <= _or_now(now_ms))
            .order_by(table.c.name)
        )
        with self._read() as conn:
            return [_to_environment(r) for r in conn.execute(query)]

    # ------------------------------------------------------------------ intervals

    def add_interval(self, name: str, version: str, start_ts: int, end_ts: int) -> None:
        self.add_intervals([(name, version, start_ts, end_ts)])

    def add_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Record processed intervals `[start_ts, end_ts)` (epoch ms), all or none."""
        self._append_intervals(items, removed=False)

    def remove_intervals(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Forget processed intervals (restatement), all or none."""
        self._append_intervals(items, removed=True)

    def get_intervals(self, keys: Iterable[IntervalKey]) -> dict[IntervalKey, list[Interval]]:
        """Processed intervals per `(name, version)`, merged and sorted; every key is present."""
        logs: dict[IntervalKey, list[tuple[int, int, bool]]] = {(n, v): [] for n, v in keys}
        table = schema.intervals
        key = tuple_(table.c.name, table.c.version)
        columns = (table.c.name, table.c.version, table.c.start_ts, table.c.end_ts, table.c.is_removed)
        with self._read() as conn:
            for chunk in _chunks(list(logs), BATCH_SIZE):
                query = select(*columns).where(key.in_(chunk)).order_by(table.c.id)
                for name, version, start, end, removed in conn.execute(query):
                    logs[(name, version)].append((start, end, bool(removed)))
        return {k: _replay(log) for k, log in logs.items()}

    def _append_intervals(self, items: Iterable[tuple[str, str, int, int]], removed: bool) -> None:
        rows = _interval_rows(items, removed, _now_ms())
        if not rows:
            return
        with self._write() as conn:
            for chunk in _chunks(rows, 1000):
                conn.execute(insert(schema.intervals), chunk)

    def _insert_intervals(self, conn: Connection, items: Iterable[tuple[str, str, int, int]], removed: bool) -> None:
        """`_append_intervals` inside a transaction the caller holds."""
        for chunk in _chunks(_interval_rows(items, removed, _now_ms()), 1000):
            conn.execute(insert(schema.intervals), chunk)

    # ------------------------------------------------------------------ plans

    def save_plan_record(self, record: PlanRecord) -> None:
        """Store a new plan record with its events so far (a plan id is never reused)."""
        row = {"plan_id": record.plan_id, "environment": record.environment, "status": record.status.value,
               "payload": record.summary.model_dump_json(), "author": record.author, "git_commit": record.git_commit,
               "git_branch": record.git_branch, "created_ts": record.created_ts, "updated_ts": record.updated_ts}
        with self._write() as conn:
            conn.execute(insert(schema.plans).values(**row))
            if record.events:
                conn.execute(insert(schema.plan_events), [_event_row(record.plan_id, e) for e in record.events])

    def get_plan_record(self, plan_id: str) -> PlanRecord | None:
        with self._read() as conn:
            found = self._plan_records(conn, schema.plans.c.plan_id == plan_id)
        return found[0] if found else None

    def plan_ids_starting(self, prefix: str, limit: int = 5) -> list[str]:
        """Ids of the plans starting with `prefix` (how people type a plan id)."""
        table = schema.plans
        with self._read() as conn:
            rows = conn.execute(select(table.c.plan_id).where(table.c.plan_id.startswith(prefix, autoescape=True))
                                .order_by(table.c.plan_id).limit(limit)).all()
        return [r.plan_id for r in rows]

    def list_plan_records(self, environment: str | None = None, statuses: Iterable[str] | None = None,
                          limit: int = 50) -> list[PlanRecord]:
        """The latest plans, newest first."""
        table = schema.plans
        where = [table.c.environment == environment] if environment else []
        if statuses is not None:
            where.append(table.c.status.in_(list(statuses)))
        with self._read() as conn:
            return self._plan_records(conn, *where, limit=limit)

    def transition_plan(self, plan_id: str, allowed: Iterable[str], event: PlanEvent,
                        lease: Lease | None = None) -> PlanRecord | None:
        """Move a plan to `event.status` if it is in one of the `allowed` statuses, recording the
        event in the same transaction; the updated record, or None when its status was not allowed
        (someone else decided first: two approvers, an approval racing a cancel). With `lease`,
        only while that lock is held (an apply that lost its environment's lock to a resumed one
        does not decide the record's outcome any more)."""
        table = schema.plans
        with self._write() as conn:
            if lease is not None:
                self._hold(conn, lease)
            result = conn.execute(update(table).where(table.c.plan_id == plan_id, table.c.status.in_(list(allowed)))
                                  .values(status=event.status.value, updated_ts=event.ts))
            if result.rowcount != 1:
                return None
            conn.execute(insert(schema.plan_events).values(**_event_row(plan_id, event)))
            return self._plan_records(conn, table.c.plan_id == plan_id)[0]

    def _plan_records(self, conn: Connection, *where: Any, limit: int | None = None) -> list[PlanRecord]:
        table, events = schema.plans, schema.plan_events
        query = select(table).where(*where).order_by(table.c.created_ts.desc(), table.c.plan_id)
        rows = conn.execute(query.limit(limit) if limit else query).all()
        if not rows:
            return []
        by_plan: dict[str, list[PlanEvent]] = {r.plan_id: [] for r in rows}
        for e in conn.execute(select(events).where(events.c.plan_id.in_(list(by_plan))).order_by(events.c.id)):
            by_plan[e.plan_id].append(PlanEvent(action=e.action, actor=e.actor, ts=e.ts, status=e.status, note=e.note))
        return [PlanRecord(plan_id=r.plan_id, environment=r.environment, author=r.author or "unknown",
                           status=r.status, git_commit=r.git_commit, git_branch=r.git_branch,
                           created_ts=r.created_ts, updated_ts=r.updated_ts,
                           summary=PlanSummary.model_validate_json(r.payload), events=by_plan[r.plan_id])
                for r in rows]

    # ------------------------------------------------------------------ locks

    @contextmanager
    def lock(
        self,
        name: str,
        owner: str,
        timeout_s: float = 600,
        lease_s: float = 3600,
        *,
        holder_is_dead: Callable[[LockInfo], bool] | None = None,
        busy: Callable[[LockInfo], str] | None = None,
    ) -> Iterator[Lease]:
        """Hold the named lock across processes for the duration of the block; yields its `Lease`.

        `EXCLUSIVE_LOCK` excludes every other lock and is excluded by any. A holder whose lease
        ran out, or that `holder_is_dead` says is gone, is replaced inside the transaction that
        finds it, by its token — so two waiters behind a dead holder never both get the lock.
        The lease is renewed in the background; the holder calls `Lease.check()` before each step
        that must not run once someone else may hold the lock. `busy(holder)` words the timeout.
        """
        token = uuid.uuid4().hex
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        waited = False
        while (holder := self._try_lock(name, owner, token, lease_s, holder_is_dead or _never_dead)) is not None:
            if not waited:
                logger.info("Waiting for the lock '%s': held by %s", name, holder.owner)
                waited = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StateError(busy(holder) if busy else (
                    f"Lock '{name}' is held by {holder.owner} since {_format_ms(holder.acquired_ts)}; "
                    "waiting timed out"
                ))
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 1.0)
        lease = Lease(self, name, owner, token, lease_s)
        try:
            yield lease
        finally:
            lease.stop()
            self._unlock(name, token)

    def lock_holder(self, name: str) -> LockInfo | None:
        table = schema.locks
        with self._read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        return _lock_info(row) if row else None

    def lock_holders(self) -> list[LockInfo]:
        table = schema.locks
        with self._read() as conn:
            return [_lock_info(r) for r in conn.execute(select(table).order_by(table.c.name))]

    def break_lock(self, name: str, token: str) -> bool:
        """Free the lock held under `token` (an operator's action on a holder known to be dead);
        False if that holder no longer has it — a newer holder is never broken by mistake."""
        table = schema.locks
        with self._write() as conn:
            return conn.execute(delete(table).where(table.c.name == name, table.c.token == token)).rowcount == 1

    def _try_lock(self, name: str, owner: str, token: str, lease_s: float,
                  holder_is_dead: Callable[[LockInfo], bool] | None = None) -> LockInfo | None:
        """Take the lock unless a live holder of it (or of a lock excluding it) remains; that
        holder is returned. Expired and dead holders are removed by their token first."""
        table = schema.locks
        now = _now_ms()
        with self._write() as conn:
            self._serialize(conn, "locks")  # every acquisition: the exclusive lock spans all names
            query = select(table).order_by(table.c.name).with_for_update()
            if name != EXCLUSIVE_LOCK:
                query = query.where(table.c.name.in_([name, EXCLUSIVE_LOCK]))
            for holder in [_lock_info(row) for row in conn.execute(query)]:
                if holder.expires_ts > now and not (holder_is_dead or _never_dead)(holder):
                    return holder
                reason = "its lease expired" if holder.expires_ts <= now else "its process is gone"
                logger.warning("Taking over the lock '%s' from %s: %s", holder.name, holder.owner, reason)
                conn.execute(delete(table).where(table.c.name == holder.name, table.c.token == holder.token))
            conn.execute(insert(table).values(name=name, owner=owner, token=token, acquired_ts=now,
                                              expires_ts=now + int(lease_s * 1000)))
        return None

    def _unlock(self, name: str, token: str) -> None:
        table = schema.locks
        try:
            with self._write() as conn:
                conn.execute(delete(table).where(table.c.name == name, table.c.token == token))
        except Exception as e:  # noqa: BLE001 - never mask the block's own outcome; the lease will run out
            logger.warning("Could not release the lock on '%s' (it frees itself when its lease ends): %s", name, e)

    def _renew_lock(self, name: str, token: str, lease_s: float) -> bool:
        with self._write() as conn:
            return self._extend(conn, name, token, lease_s)

    def _hold(self, conn: Connection, lease: Lease) -> None:
        """Inside a write: extend `lease`, or raise if its lock is no longer ours."""
        if not self._extend(conn, lease.name, lease.token, lease.lease_s):
            lease.mark_lost()
            lease.check()

    def _extend(self, conn: Connection, name: str, token: str, lease_s: float) -> bool:
        table = schema.locks
        result = conn.execute(
            update(table)
            .where(table.c.name == name, table.c.token == token)
            .values(expires_ts=_now_ms() + int(lease_s * 1000))
        )
        return result.rowcount == 1

    # ------------------------------------------------------------------ plumbing

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as e:
            raise StateError(f"Cannot read the state store at {self.url}: {_reason(e)}") from e

    @contextmanager
    def _write(self, what: str = "write to") -> Iterator[Connection]:
        """One transaction; a database failure becomes one line (nothing of it was written)."""
        try:
            with self._engine.connect() as conn:
                conn.execution_options(mesh_write=True)
                with conn.begin():
                    yield conn
        except DBAPIError as e:
            raise StateError(f"Cannot {what} the state store at {self.url}: {_reason(e)}") from e

    def _serialize(self, conn: Connection, key: str) -> None:
        """Postgres: hold a transaction-scoped advisory lock on `key` (SQLite writers are
        already serialised by `BEGIN IMMEDIATE`)."""
        if self._is_postgres:
            conn.execute(select(func.pg_advisory_xact_lock(_advisory_key(key))))

    def _insert(self, table: Table) -> Any:
        return postgresql.insert(table) if self._is_postgres else sqlite.insert(table)

    def _upsert(
        self, conn: Connection, table: Table, row: dict[str, Any], keys: list[str], keep: Sequence[str] = ()
    ) -> None:
        stmt = self._insert(table).values(**row)
        changes = {c: stmt.excluded[c] for c in row if c not in keys and c not in keep}
        conn.execute(stmt.on_conflict_do_update(index_elements=[table.c[k] for k in keys], set_=changes))

    # ------------------------------------------------------------------ journal of writes (state/journal.py)

    def journal_write(self, write: PendingWrite, lease: Lease | None = None,
                      forget: Iterable[tuple[str, str, int, int]] = ()) -> None:
        """Make `write` its table's pending write, before its destructive step; with `lease`, only
        while that lock (the table's) is still held. `forget`: intervals the write will no longer
        hold (a history about to be rebuilt), forgotten in the same transaction."""
        forget = list(forget)
        with self._write() as conn:
            if lease is not None:
                self._hold(conn, lease)
            journal.put(conn, write, _now_ms())
            if forget:
                self._insert_intervals(conn, forget, removed=True)

    def pending_write(self, table: str) -> PendingWrite | None:
        with self._read() as conn:
            found = journal.pending(conn, table)
        return found[0] if found else None

    def pending_writes(self) -> list[PendingWrite]:
        with self._read() as conn:
            return journal.pending(conn)

    def finish_write(self, table: str, interval: tuple[str, str, int, int] | None, retire: Iterable[str] = (),
                     lease: Lease | None = None) -> None:
        """In one transaction: record `interval` (if any), end `table`'s pending write and retire the
        locations `retire` (a generation the write switched away from)."""
        if interval is not None and not interval[2] < interval[3]:
            raise ValueError(f"Invalid interval for {interval[0]}: start {interval[2]} is not before end {interval[3]}")
        with self._write() as conn:
            if lease is not None:
                self._hold(conn, lease)
            journal.finish(conn, table, interval, retire, _now_ms(), lease.owner if lease is not None else "mesh")

    def retired_locations(self, table: str | None = None) -> list[tuple[str, str]]:
        """(table, location) of the generations rewrites switched away from, oldest first."""
        with self._read() as conn:
            return journal.retired(conn, table)

    def forget_retired(self, items: Iterable[tuple[str, str]]) -> None:
        with self._write() as conn:
            journal.forget_retired(conn, items)


def _never_dead(_holder: LockInfo) -> bool:
    """Without a way to tell, a holder is alive until its lease runs out."""
    return False


def _lease_clock() -> float:
    """Seconds on a clock that keeps running while the machine sleeps (unlike `monotonic` on
    Linux): a laptop that wakes up must not believe its lease is still fresh."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


class Lease:
    """Proof that this process holds a lock, renewed in the background until released.

    Other processes take the lock over once the lease has run out (e.g. this process was paused
    or cut off from the database), so the holder must `check()` before each step that may only
    run under the lock: the check is free while the last renewal is recent (well inside the
    lease) and otherwise renews synchronously, raising `LockLostError` if someone took over.
    """

    def __init__(self, store: StateStore, name: str, owner: str, token: str, lease_s: float):
        self.name = name
        self.owner = owner
        self.token = token
        self.lease_s = lease_s
        self._store = store
        self._confirmed = _lease_clock()
        self._lost = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, name=f"mesh-lock-{name}", daemon=True)
        self._thread.start()

    @property
    def lost(self) -> bool:
        return self._lost

    def mark_lost(self) -> None:
        self._lost = True

    def check(self) -> None:
        """Raise `LockLostError` unless the lock is provably still ours."""
        if not self._lost and _lease_clock() - self._confirmed > self.lease_s / 2:
            self.verify()
        if self._lost:
            holder = self._store.lock_holder(self.name)
            now = f"{holder.owner} holds it now" if holder is not None else "nobody holds it now"
            raise LockLostError(
                f"Lost the lock '{self.name}' (its lease of {self.lease_s:g} s ran out or it was broken; {now})"
            )

    def verify(self) -> None:
        """Renew now (one round trip); raise `LockLostError` if the lock is no longer ours."""
        if not self._lost:
            if self._store._renew_lock(self.name, self.token, self.lease_s):
                self._confirmed = _lease_clock()
            else:
                self._lost = True
        if self._lost:
            self.check()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _renew_until_stopped(self) -> None:
        while not self._stopped.wait(max(self.lease_s / 3, 0.01)):
            try:
                if not self._store._renew_lock(self.name, self.token, self.lease_s):
                    logger.warning("Lost the lock on '%s': another process took it over", self.name)
                    self._lost = True
                    return
                self._confirmed = _lease_clock()
            except Exception as e:  # noqa: BLE001 - keep trying: the database may be back before the lease ends
                logger.warning("Could not renew the lock on '%s': %s", self.name, e)


# ---------------------------------------------------------------------- engine


def _parse_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        masked = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
        raise StateError(f"Invalid state store URL '{masked}'") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise StateError(
            f"Unsupported state store URL '{parsed.render_as_string(hide_password=True)}': "
            "use sqlite:///path or postgresql+psycopg://…"
        )
    return parsed


def _is_memory_sqlite(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url)


def _create_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _create_sqlite_engine(url)
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = POSTGRES_CONNECT_TIMEOUT_S
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except NoSuchModuleError as e:
        raise StateError(f"Cannot use the state store at {url.render_as_string(hide_password=True)}: {e}") from None


def _prepare_sqlite_file(path: Path, shown: str) -> None:
    """Create a missing store atomically; refuse a 0-byte one.

    A new store is built in a temporary file and linked into place complete, so a `state.db`
    that mesh wrote is never empty — not even after a crash during the very first run. A 0-byte
    `state.db` therefore comes from outside (truncated by a full disk, a failed copy, `touch`,
    `> state.db`): initialising it would silently forget every environment and interval while
    the warehouse still holds their tables, so it is refused. An absent file is the first run.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StateError(f"Cannot connect to the state store at {shown}: cannot create {path.parent}: "
                         f"{e.strerror or e}") from None
    if path.is_file() and path.stat().st_size == 0:
        raise StateError(
            f"The state store at {shown} is an empty (0-byte) file: it was truncated or replaced (mesh never "
            "leaves one), and starting over would forget every environment the warehouse still holds. "
            "Restore it from a backup, or delete it if this project was never applied."
        )
    if not path.exists():
        _create_sqlite_file(path, shown)


def _create_sqlite_file(path: Path, shown: str) -> None:
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        engine = create_engine(f"sqlite:///{temp}")
        try:
            with engine.begin() as conn:
                _create_tables(conn)
        finally:
            engine.dispose()
        try:
            os.link(temp, path)  # fails if another process created it first: theirs is as good
        except FileExistsError:
            pass
        except OSError:  # no hard links on this filesystem
            if not path.exists():
                os.replace(temp, path)
    except (OSError, DBAPIError) as e:
        reason = _reason(e) if isinstance(e, DBAPIError) else (e.strerror or str(e))
        raise StateError(f"Cannot create the state store at {shown}: {reason}{_read_only_hint(path.parent)}") from None
    finally:
        temp.unlink(missing_ok=True)


def _read_only_hint(folder: Path) -> str:
    """SQLite creates files beside the store (the store itself, `-wal`, `-shm`): say when it cannot."""
    return "" if os.access(folder, os.W_OK) else f" (the folder {folder} is read-only)"


def _create_tables(conn: Connection) -> None:
    schema.metadata.create_all(conn)
    stamp(conn, schema.SCHEMA_VERSION)


def _create_sqlite_engine(url: URL) -> Engine:
    memory = _is_memory_sqlite(url)
    if memory:
        # One shared connection, or every checkout would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # We emit BEGIN ourselves (below): the driver's own handling skips it for SELECT and
        # DDL, which would break read consistency and transactional migrations.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        if not memory:
            try:
                cursor.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as e:  # a read-only store can still be read
                if "readonly" not in str(e):
                    raise
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("mesh_write") else "BEGIN")

    return engine


def _reason(error: DBAPIError) -> str:
    """The driver's message, first line only (psycopg appends hints on further lines)."""
    message = str(error.orig if error.orig is not None else error).strip()
    return message.splitlines()[0] if message else type(error.orig or error).__name__


def _advisory_key(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"mesh_dagster:{key}".encode(), digest_size=8).digest(), "big", signed=True)


# ---------------------------------------------------------------------- rows


def _event_row(plan_id: str, event: PlanEvent) -> dict[str, Any]:
    return {"plan_id": plan_id, "action": event.action, "actor": event.actor, "status": event.status.value,
            "note": event.note, "ts": event.ts}


def _interval_rows(items: Iterable[tuple[str, str, int, int]], removed: bool, ts: int) -> list[dict[str, Any]]:
    rows = []
    for name, version, start, end in items:
        if not start < end:
            raise ValueError(f"Invalid interval for {name} (version {version}): start {start} is not before end {end}")
        rows.append({"name": name, "version": version, "start_ts": start, "end_ts": end, "is_removed": removed,
                     "created_ts": ts})
    return rows


def _snapshot_row(snapshot: Snapshot, ts: int) -> dict[str, Any]:
    return {
        "name": snapshot.name,
        "identifier": snapshot.identifier,
        "version": snapshot.version,
        "payload": snapshot.model_dump_json(),
        "created_ts": ts,
        "updated_ts": ts,
    }


def _environment_row(env: Environment) -> dict[str, Any]:
    return {
        "name": env.name,
        "payload": env.model_dump_json(),
        "plan_id": env.plan_id,
        "previous_plan_id": env.previous_plan_id,
        "expiration_ts": env.expiration_ts,
        "finalized_ts": env.finalized_ts,
    }


def _to_environment(row: Any) -> Environment:
    """The columns are authoritative: finalize/invalidate update them, not the payload."""
    env = Environment.model_validate_json(row.payload)
    return env.model_copy(
        update={
            "plan_id": row.plan_id,
            "previous_plan_id": row.previous_plan_id,
            "expiration_ts": row.expiration_ts,
            "finalized_ts": row.finalized_ts,
        }
    )


def _replaced_payload(current: Any, plan_id: str) -> str | None:
    """What the views may still show once `plan_id` replaces the `current` row: the current
    record if it was finalized, else everything an unfinished apply may have left live."""
    if current is None:
        return None
    if current.plan_id == plan_id:  # a retry of the same plan replaces nothing new
        return current.replaced_payload
    record = _to_environment(current)
    if current.finalized_ts is not None or current.replaced_payload is None:
        return record.model_dump_json()
    return _merge_environments(Environment.model_validate_json(current.replaced_payload), record).model_dump_json()


def _merge_environments(older: Environment, newer: Environment) -> Environment:
    """Everything either record's views may show; it remembers the last finalized record."""
    snapshots = {s.snapshot_id: s for s in [*older.snapshots, *newer.snapshots]}
    return newer.model_copy(update={"snapshots": list(snapshots.values()),
                                    "promoted": sorted({*older.promoted, *newer.promoted}),
                                    "last_finalized": _last_finalized(older)})


def _replaced(row: Any) -> Environment | None:
    return Environment.model_validate_json(row.replaced_payload) if row.replaced_payload is not None else None


def _last_finalized(replaced: Environment | None) -> Environment | None:
    """The last finalized record among what an unfinished apply replaced: the replaced record
    itself if it was finalized, else the one a merge of several remembers (None: a new
    environment, or a merge stored before merges remembered it)."""
    if replaced is None:
        return None
    if replaced.finalized_ts is not None:
        return replaced.model_copy(update={"last_finalized": None})
    return replaced.last_finalized


def _lock_info(row: Any) -> LockInfo:
    return LockInfo(name=row.name, owner=row.owner, token=row.token, acquired_ts=row.acquired_ts,
                    expires_ts=row.expires_ts)


def _conflict(environment: str, current: str, plan_id: str) -> ConflictingPlanError:
    return ConflictingPlanError(
        f"Another plan ({current}) was applied to environment '{environment}' while this plan "
        f"({plan_id}) was in progress. Re-run `mesh plan {environment}`."
    )


def _format_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _unique_ids(ids: Iterable[SnapshotId]) -> list[SnapshotId]:
    return list(dict.fromkeys(SnapshotId(*i) for i in ids))


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# ---------------------------------------------------------------------- interval arithmetic


def _replay(log: list[tuple[int, int, bool]]) -> list[Interval]:
    """Apply an add/remove log in order: a removal only cancels what was added before it."""
    current: list[Interval] = []
    added: list[Interval] = []  # consecutive adds are merged in one go
    for start, end, removed in log:
        if removed:
            current = subtract_intervals([*current, *added], [(start, end)])
            added = []
        else:
            added.append((start, end))
    return merge_intervals([*current, *added])
