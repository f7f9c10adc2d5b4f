"""The per-environment apply lock, with recovery from holders that died.

The lease is short and renewed while the holder lives, so a crashed process frees the lock within
a minute anywhere; on the same machine a dead holder is noticed at once (its pid is gone), so a
`mesh plan` re-run right after a kill does not wait at all.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from contextlib import contextmanager
from typing import Iterator

LEASE_S = 60.0
_OWNER = re.compile(r"\(pid (\d+) by .*@(.+)\)$")


def lock_owner(what: str = "mesh") -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user database in some containers
        user = "unknown"
    return f"{what} (pid {os.getpid()} by {user}@{socket.gethostname()})"


def _holder_is_dead(owner: str) -> bool:
    match = _OWNER.search(owner)
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


@contextmanager
def environment_lock(state, environment: str, owner: str | None = None, timeout_s: float = 600) -> Iterator[None]:
    name = f"environment:{environment}"
    holder = state.lock_holder(name)
    if holder is not None and _holder_is_dead(holder.owner):
        state.break_lock(name)
    with state.lock(name, owner or lock_owner(), timeout_s=timeout_s, lease_s=LEASE_S):
        yield
