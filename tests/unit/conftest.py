"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh_dagster.state.store import StateStore


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    """A state store in a SQLite file of the test's own."""
    with StateStore(f"sqlite:///{tmp_path / 'state.db'}") as store:
        yield store
