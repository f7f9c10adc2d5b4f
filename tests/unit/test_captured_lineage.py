"""A snapshot's capture keeps its model's column lineage (core/snapshots/capture.py): worked out from
the project it was captured from only when it is stored (a plan only looked at never pays for it),
round-tripped through the state store, in no fingerprint and no capture equality; a snapshot stored
before lineage was has none."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

import mesh_dagster.core.snapshots.capture as capture_module
from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.snapshots.capture import Capture
from mesh_dagster.core.snapshots.fingerprint import build_snapshots, data_hash, metadata_hash
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.state import StateStore

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
SEED, INC, FULL = (f"sqlmesh_example.{n}" for n in ("seed_model", "incremental_model", "full_model"))
FULL_LINEAGE = {"item_id": [(INC, "item_id")], "num_orders": [(INC, "id")]}


@pytest.fixture
def example(tmp_path) -> Path:
    dest = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    return dest


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """The models whose lineage a capture works out, in order."""
    calls: list[str] = []
    real = capture_module.model_lineage

    def counting(project, name):
        calls.append(name)
        return real(project, name)

    monkeypatch.setattr(capture_module, "model_lineage", counting)
    return calls


def test_stored_snapshots_keep_their_lineage_worked_out_only_when_stored(example, tmp_path, counted):
    ctx = Context(example)
    plan = ctx.plans.plan("prod")
    assert counted == []  # planning (building, categorising, rendering) works out no lineage
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        store.snapshots.push_snapshots(plan.new_snapshots)
        assert sorted(counted) == sorted([SEED, INC, FULL])  # once each, when stored
        found = store.snapshots.get_snapshots([plan.snapshots[n].snapshot_id for n in (SEED, INC, FULL)])
    finally:
        store.close()
    lineage = {sid.name: snap.capture.lineage for sid, snap in found.items()}
    assert lineage == {SEED: {"id": [], "item_id": [], "event_date": []},
                       INC: {c: [(SEED, c)] for c in ("id", "item_id", "event_date")},
                       FULL: FULL_LINEAGE}
    # read back, a capture gives its stored lineage without any project
    assert found[plan.snapshots[FULL].snapshot_id].capture.column_lineage() == FULL_LINEAGE
    assert len(counted) == 3
    ctx.close()


def test_lineage_is_in_no_fingerprint_and_no_capture_equality(example):
    ctx = Context(example)
    snap = build_snapshots(ctx.project)[FULL]
    model, capture = snap.model, snap.capture
    assert capture is not None
    other = capture.model_copy(update={"lineage": {"item_id": [("elsewhere", "x")]}})
    assert other.lineage != capture.column_lineage()
    assert data_hash(model, other) == data_hash(model, capture)
    assert metadata_hash(model, other) == metadata_hash(model, capture)
    assert other == capture
    # and the snapshot's identifier is the one it has without any lineage
    assert build_snapshots(ctx.project)[FULL].identifier == snap.identifier
    ctx.close()


def test_a_capture_stored_before_lineage_existed_loads_without_it(example):
    ctx = Context(example)
    snap = build_snapshots(ctx.project)[FULL]
    payload = snap.model_dump(mode="json")
    assert payload["capture"]["lineage"] == {c: [list(r) for r in refs] for c, refs in FULL_LINEAGE.items()}
    del payload["capture"]["lineage"]  # what a store written before this field holds
    old = Snapshot.model_validate(payload)
    assert old.capture is not None
    assert old.capture.lineage is None and old.capture.column_lineage() is None
    assert old.identifier == snap.identifier
    ctx.close()


def test_a_lineage_that_cannot_be_worked_out_is_stored_as_unknown(example, monkeypatch):
    def failing(project, name):
        raise ModelError(f"cannot render {name}")

    monkeypatch.setattr(capture_module, "model_lineage", failing)
    ctx = Context(example)
    capture = build_snapshots(ctx.project)[FULL].capture
    assert capture is not None
    assert capture.column_lineage() is None
    assert Capture.model_validate_json(capture.model_dump_json()).lineage is None
    ctx.close()


def test_a_capture_does_not_keep_its_project_loaded(example, counted):
    ctx = Context(example)
    capture = build_snapshots(ctx.project)[FULL].capture
    assert capture is not None
    ctx.close()
    del ctx
    gc.collect()
    assert capture.column_lineage() is None  # its project is gone: not known, and nothing was kept alive
    assert counted == []
