"""core/config/memory.py: the garbage collector's setting while a project loads is undone, nested
uses included, and collections still free the cycles made meanwhile."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from mesh_dagster.core.config.memory import fewer_collections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture(autouse=True)
def _nothing_frozen() -> Iterator[None]:
    """Each test starts with no frozen objects (a CLI test earlier in this worker may have frozen
    the process's objects: the CLI keeps them frozen on purpose)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_objects_alive_before_are_frozen_only_inside() -> None:
    with fewer_collections():
        assert gc.get_freeze_count() > 0
        with fewer_collections():  # nested: the outermost use decides
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold()[0] >= 10_000


def test_cycles_made_inside_and_garbage_made_of_frozen_objects_are_freed() -> None:
    before = _Node()
    gone_before = weakref.ref(before)
    with fewer_collections():
        inside = _Node()
        gone_inside = weakref.ref(inside)
        del before, inside
        gc.collect()
        assert gone_inside() is None
    gc.collect()
    assert gone_before() is None


def test_a_failure_inside_still_undoes_the_freeze() -> None:
    try:
        with fewer_collections():
            raise ValueError("load failed")
    except ValueError:
        pass
    assert gc.get_freeze_count() == 0


def _is_frozen(obj: object) -> bool:
    """Frozen objects sit in the permanent generation, which `gc.get_objects` leaves out. (The
    freeze count alone cannot tell: frozen objects freed by their reference count leave it.)"""
    return not any(alive is obj for alive in gc.get_objects())


def test_a_process_that_froze_objects_itself_keeps_them_frozen() -> None:
    mine = _Node()
    gc.freeze()
    try:
        assert _is_frozen(mine)
        with fewer_collections():
            pass
        assert _is_frozen(mine)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert not _is_frozen(mine)
