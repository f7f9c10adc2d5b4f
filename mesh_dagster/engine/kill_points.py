"""A test hook: named points of the write path where the process can be made to die (`kill -9`).

A write is kill-safe when a process killed at *any* point of it leaves a table that a later run
finishes exactly. Tests make "any point" deterministic with `MESH_TEST_KILL_AT=<step>[@<table>][:<n>]`:
the process SIGKILLs itself (with its process group when it leads one: the JVM of an embedded
session dies with it) the `n`-th time (default: the first) it reaches `step` writing a table whose
name contains `<table>`. Unset — always, outside tests — every point is a no-op.

The steps of one batch, in order (a write passes only those its kind has):
- `write`: the table's lock is held, nothing is written yet;
- `staged`: the new content is durable (a staging table, or the new generation's files);
- `journaled`: the journal says how to finish the write; its destructive step comes next;
- `overwritten`: a partition overwrite landed; the partitions it no longer produces are not yet dropped;
- `committed`: the write is complete in the table; audits and the interval record come next;
- `recorded`: the interval is recorded (and the journal entry gone); clean-up comes next.

A restatement that rebuilds a history from scratch empties the table first: `journaled` (its
intervals forgotten, the `clear` journaled) and `overwritten` (the table emptied) come before its
first batch (`execution/scheduler.clear_history`).

A table whose layout changes (a schema migration of a kept table; a full rewrite under new columns
or partitioning) is swapped for a new one (swaps.py), in `SWAP_STEPS`: `staged` (the new table is
complete beside it), `journaled`, `dropped` (the table is gone, its rows are staged) and `committed`.

`MESH_TEST_PAUSE_AT`, of the same syntax, stops the process there instead (SIGSTOP): a test sees it
alive mid-write for as long as it needs, however fast the write, then kills it.

This module is the only reader of the variables.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

KILL_AT_ENV = "MESH_TEST_KILL_AT"
PAUSE_AT_ENV = "MESH_TEST_PAUSE_AT"  # the same syntax: the process stops itself there instead
STEPS = ("write", "staged", "journaled", "overwritten", "committed", "recorded")
SWAP_STEPS = ("staged", "journaled", "dropped", "committed")

_reached: Counter[str] = Counter()
_lock = threading.Lock()


def kill_point(step: str, table: str) -> None:
    """Die here if `MESH_TEST_KILL_AT` names this step (and table, and occurrence); stop (SIGSTOP,
    alive with its locks held, for the test to look at it and then kill it) if `MESH_TEST_PAUSE_AT`
    does."""
    if _reached_now(KILL_AT_ENV, step, table):
        sys.stdout.flush()
        sys.stderr.flush()
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if _reached_now(PAUSE_AT_ENV, step, table):
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP)


def _reached_now(variable: str, step: str, table: str) -> bool:
    spec = os.environ.get(variable)
    if not spec:
        return False
    wanted, _, count = spec.partition(":")
    wanted_step, _, wanted_table = wanted.partition("@")
    if wanted_step != step or wanted_table not in table:
        return False
    with _lock:
        _reached[f"{variable}={wanted}"] += 1
        return _reached[f"{variable}={wanted}"] == int(count or 1)
