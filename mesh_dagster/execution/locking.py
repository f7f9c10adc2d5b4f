"""The locks that keep concurrent processes apart: one per environment, and the janitor's.

- Applying or promoting an environment holds `environment:<name>`: applies to one environment
  run one at a time, applies to different ones in parallel.
- The janitor holds the exclusive lock, which excludes every environment lock and is excluded by
  any: it never deletes while an apply runs, and no apply starts while it deletes.
- Work that writes snapshots and tables outside an apply (`mesh run`, Dagster materializations)
  holds a lock of its own name (`snapshots_in_use`): such locks exclude only the janitor, so they
  run side by side.
- Every write of a physical table holds `table:<table>` (`table_lock`), taken inside one of the
  locks above, from before it writes until its interval is recorded: two processes writing the same
  table (two runs, a run beside a Dagster run) take turns, and the second sees what the first
  recorded (execution/intervals/scheduler.py). Batches of one model that write disjoint parts of its table
  (time-range intervals, `batch_concurrency`) hold `table:<table>@<part>` instead, side by side.

Each lock has a short lease, renewed while its holder lives, so a crashed process frees it within
a minute anywhere; on the same machine a dead holder is noticed at once (its pid is gone), so a
`mesh plan` re-run right after a kill does not wait at all. The check that the holder is dead and
the takeover happen in one state-store transaction, by the holder's token. The holder receives a
`Lease` and checks it before every step that must not run once another process may hold the
lock (see `execution/apply/apply.py`).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from mesh_dagster.execution.ports import State
from mesh_dagster.state.store import EXCLUSIVE_LOCK, Lease, LockInfo

LEASE_S = 60.0
_OWNER = re.compile(r"\(pid (\d+) by .*@(.+)\)$")
_ENVIRONMENT = "environment:"
_IN_USE = "in-use:"
_TABLE = "table:"
TABLE_WAIT_S = 3600.0  # a rewrite of a large table may take long: waiting for it is not a failure


def lock_owner(what: str = "mesh") -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user database in some containers
        user = "unknown"
    return f"{what} (pid {os.getpid()} by {user}@{socket.gethostname()})"


def holder_is_dead(holder: LockInfo) -> bool:
    """True only when the holder ran on this machine and its process no longer exists.

    Another machine's holder, an unreadable owner or a pid we may not signal count as alive:
    those locks are freed by their lease running out, never by guessing.
    """
    match = _OWNER.search(holder.owner)
    if not match or match.group(2) != socket.gethostname():
        return False
    pid = int(match.group(1))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def environment_lock_name(environment: str) -> str:
    return f"{_ENVIRONMENT}{environment}"


def describe_lock(name: str) -> str:
    if name == EXCLUSIVE_LOCK:
        return "the janitor"
    if name.startswith(_ENVIRONMENT):
        return f"environment '{name[len(_ENVIRONMENT):]}'"
    if name.startswith(_IN_USE):
        return "a run writing snapshots"
    if name.startswith(_TABLE):
        table, _, part = name[len(_TABLE):].partition("@")
        return f"a write to table {table}" + (f" ({part})" if part else "")
    return f"lock '{name}'"


def _since(holder: LockInfo) -> str:
    return datetime.fromtimestamp(holder.acquired_ts / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@contextmanager
def environment_lock(state: State, environment: str, owner: str | None = None,
                     timeout_s: float = 600) -> Iterator[Lease]:
    """Hold `environment`'s lock; yields the `Lease` the holder checks before each step."""

    def busy(holder: LockInfo) -> str:
        if holder.name == EXCLUSIVE_LOCK:
            return (f"Environment '{environment}' cannot be changed while the janitor runs ({holder.owner}, since "
                    f"{_since(holder)}); waiting timed out. Try again when it has finished.")
        return (f"Environment '{environment}' is being changed by {holder.owner} since {_since(holder)}; "
                "waiting timed out. Try again when it has finished.")

    with state.locks.lock(environment_lock_name(environment), owner or lock_owner(), timeout_s=timeout_s,
                    lease_s=LEASE_S, holder_is_dead=holder_is_dead, busy=busy) as lease:
        yield lease


@contextmanager
def janitor_lock(state: State, owner: str | None = None, timeout_s: float = 600) -> Iterator[Lease]:
    """Hold the exclusive lock: no apply or promotion runs until the block ends."""

    def busy(holder: LockInfo) -> str:
        what = "another janitor run" if holder.name == EXCLUSIVE_LOCK else describe_lock(holder.name)
        return (f"The janitor waited for {what} ({holder.owner}, since {_since(holder)}) to finish and timed "
                "out; nothing was deleted. Run it again later.")

    with state.locks.lock(EXCLUSIVE_LOCK, owner or lock_owner("mesh janitor"), timeout_s=timeout_s, lease_s=LEASE_S,
                    holder_is_dead=holder_is_dead, busy=busy) as lease:
        yield lease


@contextmanager
def snapshots_in_use(state: State, owner: str | None = None, timeout_s: float = 600) -> Iterator[Lease]:
    """Keep the janitor away while this block writes snapshots or tables outside an apply; any
    number of such blocks run at once."""

    def busy(holder: LockInfo) -> str:
        return (f"The janitor is running ({holder.owner}, since {_since(holder)}); waiting for it timed out. "
                "Try again when it has finished.")

    with state.locks.lock(f"{_IN_USE}{uuid.uuid4().hex}", owner or lock_owner(), timeout_s=timeout_s, lease_s=LEASE_S,
                    holder_is_dead=holder_is_dead, busy=busy) as lease:
        yield lease


@contextmanager
def table_lock(state: State, table: str, part: str | None = None, *, owner: str | None = None,
               timeout_s: float = TABLE_WAIT_S) -> Iterator[Lease]:
    """Hold the write lock of one physical table (or of the `part` of it a write replaces, which
    writes of other parts do not wait for), whichever process writes it."""

    def busy(holder: LockInfo) -> str:
        if holder.name == EXCLUSIVE_LOCK:
            return (f"Cannot write {table} while the janitor runs ({holder.owner}, since {_since(holder)}); "
                    "waiting timed out. Try again when it has finished.")
        return (f"Table {table} is being written by {holder.owner} since {_since(holder)}; waiting "
                f"{timeout_s:g} s timed out. Try again when that write has finished.")

    name = f"{_TABLE}{table}" + (f"@{part}" if part else "")
    with state.locks.lock(name, owner or lock_owner(), timeout_s=timeout_s, lease_s=LEASE_S,
                    holder_is_dead=holder_is_dead, busy=busy) as lease:
        yield lease
