"""Python's cyclic garbage collector, kept from walking the same objects over and over while a
project loads.

Loading a project allocates millions of short-lived objects (sqlglot trees, whose nodes point at
their parents: cycles only the collector frees), so collections run thousands of times, and every
full one walks every object the process holds, the modules imported (sqlglot, pydantic,
SQLAlchemy, Dagster) included. On a 1,000-model project that was a quarter of `mesh plan
--explain` and of building the Dagster definitions. Inside `fewer_collections`:
  - what existed when it began is left out of collections (`gc.freeze`): imported modules and
    what a long-lived process built before live on anyway;
  - the youngest generation is collected after 10,000 allocations rather than 700.
Both are undone when it ends (`gc.unfreeze`: the objects rejoin the oldest generation), so what
became garbage meanwhile is still freed; nothing is disabled, so cycles made inside are freed
too. Nested uses (and other threads) leave the setting to the outermost one. A process that ends
with its one command (the CLI) keeps the setting instead (`for_this_process`): undoing it would
only let the collection at exit walk everything once more.
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
    """What `fewer_collections` does, for the rest of the process: what is alive now is never
    walked again (the modules imported so far, before the CLI runs its command)."""
    gc.freeze()
    previous = gc.get_threshold()
    gc.set_threshold(max(previous[0], _YOUNGEST_THRESHOLD), *previous[1:])


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collections that skip the objects already alive, and fewer of them, for the block's time."""
    global _depth
    previous = gc.get_threshold()
    with _lock:
        _depth += 1
        outermost = _depth == 1
        if outermost:
            gc.freeze()
            gc.set_threshold(max(previous[0], _YOUNGEST_THRESHOLD), *previous[1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if outermost:
                gc.set_threshold(*previous)
                gc.unfreeze()
