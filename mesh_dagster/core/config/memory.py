"""Python's cyclic garbage collector, kept from walking the same objects over and over while a
project loads.

Loading a project allocates millions of short-lived objects (sqlglot trees, whose nodes point at
their parents: cycles only the collector frees), so collections run hundreds of times, and every
full one walks every object the process holds, the modules imported (sqlglot, pydantic,
SQLAlchemy, Dagster) included. On a 1,000-model project that was a quarter of `mesh plan
--explain` and of building the Dagster definitions. Hence:
  - what existed when loading began is left out of collections (`gc.freeze`): imported modules,
    and what a long-lived process built before, live on anyway. `fewer_collections` undoes that
    when it ends (`gc.unfreeze`: the objects rejoin the oldest generation, so whatever of them
    became garbage meanwhile is still freed); the CLI, a process that ends with its command,
    keeps it (`for_this_process`): undoing it would only let the collection at exit walk
    everything once more;
  - the youngest generation is collected after 10,000 allocations rather than 700, and stays so:
    what follows a load (Dagster validating the definitions just built) allocates as much again,
    and with Python's 700 it ran full collections over the whole process three times (half a
    second for 1,000 models). Collections are rarer, never off: cycles are still freed.
Nested uses (and other threads) leave the freezing to the outermost one, and a process that froze
objects itself keeps them frozen.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_YOUNGEST_THRESHOLD = 10_000
_lock = threading.Lock()
_depth = 0


def for_this_process() -> None:
    """What is alive now is never walked again (the modules imported so far: the CLI calls it once
    a command has imported Context's, before it loads the project), and young objects are collected
    less often."""
    gc.freeze()
    _raise_youngest_threshold()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collections that skip the objects already alive for the block's time, and fewer of them."""
    global _depth
    with _lock:
        _depth += 1
        # The outermost use freezes, unless the process froze objects itself (the CLI's
        # `for_this_process`, or the application): unfreezing would undo that too.
        freezing = _depth == 1 and gc.get_freeze_count() == 0
        if freezing:
            gc.freeze()
        _raise_youngest_threshold()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if freezing:
                gc.unfreeze()


def _raise_youngest_threshold() -> None:
    youngest, *older = gc.get_threshold()
    gc.set_threshold(max(youngest, _YOUNGEST_THRESHOLD), *older)
