"""Named locks across processes, held as leases in the state store (`mesh_locks`).

A lock is a row; taking it is one write transaction that first removes holders whose lease ran
out (or that the caller knows are dead) by their token, so two waiters behind a dead holder never
both get it. The holder's `Lease` is renewed in the background, and writes that may only happen
under the lock call `hold` inside their own transaction, so a holder that lost its lock writes
nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, delete, insert, select, update

from mesh_dagster.core.errors import StateError
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, now_ms

logger = logging.getLogger("mesh_dagster.state.store")  # the name its warnings always had

# The lock that excludes every other lock, and that any other lock excludes (the janitor's).
EXCLUSIVE_LOCK = "*"


class LockInfo(BaseModel):
    name: str
    owner: str
    token: str  # random per acquisition: breaking a lock names the exact holder it looked at
    acquired_ts: int
    expires_ts: int


class LockLostError(StateError):
    """A lock this process held was taken over (its lease ran out, or it was broken)."""


class Locks:
    """The locks of one state store (`StateStore.locks`)."""

    def __init__(self, db: Database):
        self._db = db

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
        while (holder := self.try_lock(name, owner, token, lease_s, holder_is_dead or _never_dead)) is not None:
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
        with self._db.read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        return _lock_info(row) if row else None

    def lock_holders(self) -> list[LockInfo]:
        table = schema.locks
        with self._db.read() as conn:
            return [_lock_info(r) for r in conn.execute(select(table).order_by(table.c.name))]

    def break_lock(self, name: str, token: str) -> bool:
        """Free the lock held under `token` (an operator's action on a holder known to be dead);
        False if that holder no longer has it — a newer holder is never broken by mistake."""
        table = schema.locks
        with self._db.write() as conn:
            return conn.execute(delete(table).where(table.c.name == name, table.c.token == token)).rowcount == 1

    def try_lock(self, name: str, owner: str, token: str, lease_s: float,
                 holder_is_dead: Callable[[LockInfo], bool] | None = None) -> LockInfo | None:
        """Take the lock unless a live holder of it (or of a lock excluding it) remains; that
        holder is returned. Expired and dead holders are removed by their token first."""
        table = schema.locks
        now = now_ms()
        with self._db.write() as conn:
            self._db.serialize(conn, "locks")  # every acquisition: the exclusive lock spans all names
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

    def renew(self, name: str, token: str, lease_s: float) -> bool:
        """Extend the lease held under `token`; False if that holder no longer has the lock."""
        with self._db.write() as conn:
            return _extend(conn, name, token, lease_s)

    def _unlock(self, name: str, token: str) -> None:
        table = schema.locks
        try:
            with self._db.write() as conn:
                conn.execute(delete(table).where(table.c.name == name, table.c.token == token))
        except Exception as e:  # noqa: BLE001 - never mask the block's own outcome; the lease will run out
            logger.warning("Could not release the lock on '%s' (it frees itself when its lease ends): %s", name, e)


def hold(conn: Connection, lease: Lease) -> None:
    """Inside a write: extend `lease`, or raise if its lock is no longer ours (so the write that
    needs the lock commits only while it is held)."""
    if not _extend(conn, lease.name, lease.token, lease.lease_s):
        lease.mark_lost()
        lease.check()


def _extend(conn: Connection, name: str, token: str, lease_s: float) -> bool:
    table = schema.locks
    result = conn.execute(
        update(table)
        .where(table.c.name == name, table.c.token == token)
        .values(expires_ts=now_ms() + int(lease_s * 1000))
    )
    return result.rowcount == 1


def _never_dead(_holder: LockInfo) -> bool:
    """Without a way to tell, a holder is alive until its lease runs out."""
    return False


def _lease_clock() -> float:
    """Seconds on a clock that keeps running while the machine sleeps (unlike `monotonic` on
    Linux): a laptop that wakes up must not believe its lease is still fresh."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


def _lock_info(row: Any) -> LockInfo:
    return LockInfo(name=row.name, owner=row.owner, token=row.token, acquired_ts=row.acquired_ts,
                    expires_ts=row.expires_ts)


def _format_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Lease:
    """Proof that this process holds a lock, renewed in the background until released.

    Other processes take the lock over once the lease has run out (e.g. this process was paused
    or cut off from the database), so the holder must `check()` before each step that may only
    run under the lock: the check is free while the last renewal is recent (well inside the
    lease) and otherwise renews synchronously, raising `LockLostError` if someone took over.
    """

    def __init__(self, locks: Locks, name: str, owner: str, token: str, lease_s: float):
        self.name = name
        self.owner = owner
        self.token = token
        self.lease_s = lease_s
        self._locks = locks
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
            holder = self._locks.lock_holder(self.name)
            now = f"{holder.owner} holds it now" if holder is not None else "nobody holds it now"
            raise LockLostError(
                f"Lost the lock '{self.name}' (its lease of {self.lease_s:g} s ran out or it was broken; {now})"
            )

    def verify(self) -> None:
        """Renew now (one round trip); raise `LockLostError` if the lock is no longer ours."""
        if not self._lost:
            if self._locks.renew(self.name, self.token, self.lease_s):
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
                if not self._locks.renew(self.name, self.token, self.lease_s):
                    logger.warning("Lost the lock on '%s': another process took it over", self.name)
                    self._lost = True
                    return
                self._confirmed = _lease_clock()
            except Exception as e:  # noqa: BLE001 - keep trying: the database may be back before the lease ends
                logger.warning("Could not renew the lock on '%s': %s", self.name, e)
