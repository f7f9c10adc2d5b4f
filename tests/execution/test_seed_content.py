"""A seed's content is read once, by the loader, stored once, by digest, beside the snapshots that
captured it, and read back by that digest: never the file as it is when the apply runs (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.snapshots.capture import captured_content
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.evaluate.verdicts import RecordingEvaluator
from mesh_dagster.state import schema
from tests.project_builder import write_project

FILES = {
    "models/seed.sql": "MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, label STRING));",
    "seeds/seed.csv": "id,label\n1,one\n2,two\n",
}
EDITED = "id,label\n1,one\n2,two\n3,three\n"


def _blob_count(ctx: Context) -> int:
    with ctx.state.db.read() as conn:
        return conn.execute(select(func.count()).select_from(schema.blobs)).scalar_one()


@pytest.fixture
def planned(tmp_path: Path):
    root = write_project(tmp_path / "p", FILES)
    ctx = Context(root)
    try:
        yield ctx, ctx.plans.plan(execution_time="2024-01-03")
    finally:
        ctx.close()


def test_an_evaluation_reads_the_planned_content_from_the_store_once_the_file_changed(planned) -> None:
    ctx, plan = planned
    snap = plan.snapshots["s.seed"]
    content = captured_content(ctx.project, plan.new_snapshots)
    assert content == {snap.capture.seed.digest: FILES["seeds/seed.csv"].encode()}
    ctx.state.snapshots.push_snapshots(plan.new_snapshots, content=content)
    ctx.state.snapshots.push_snapshots(plan.new_snapshots, content=content)  # pushed twice: stored once
    assert _blob_count(ctx) == 1

    (ctx.project.path / "seeds" / "seed.csv").write_text(EDITED)
    edited = Context(ctx.project.path)
    try:
        stored = ctx.state.snapshots.get_snapshots([snap.snapshot_id])[snap.snapshot_id]
        assert captured_content(edited.project, [stored]) == {}  # not the content this load read
        ev = RecordingEvaluator(edited.project, None, {stored.name: stored}, state=edited.state, source="test")
        assert ev.seed(stored)["label"].tolist() == ["one", "two"]
        assert ev.seed_types(stored) == {"id": "INT", "label": "STRING"}
    finally:
        edited.close()


def test_content_neither_loaded_nor_stored_is_refused_naming_the_seed(planned) -> None:
    ctx, plan = planned
    ctx.state.snapshots.push_snapshots(plan.new_snapshots)  # no content: as a store that lost its blob
    assert _blob_count(ctx) == 0
    (ctx.project.path / "seeds" / "seed.csv").write_text(EDITED)
    edited = Context(ctx.project.path)
    try:
        snap = plan.snapshots["s.seed"]
        stored = ctx.state.snapshots.get_snapshots([snap.snapshot_id])[snap.snapshot_id]
        ev = RecordingEvaluator(edited.project, None, {stored.name: stored}, state=edited.state, source="test")
        with pytest.raises(ModelError, match=r"The content of seed s\.seed planned as .* is not in the state store, "
                                             r"and its file now holds other rows: re-run `mesh plan`"):
            ev.seed(stored)
    finally:
        edited.close()
    assert _blob_count(ctx) == 0


def test_an_evaluator_without_a_store_reads_what_the_load_read(planned) -> None:
    ctx, plan = planned
    snap = plan.snapshots["s.seed"]
    (ctx.project.path / "seeds" / "seed.csv").write_text(EDITED)  # after the load: not read again
    ev = SnapshotEvaluator(ctx.project, None, plan.snapshots)
    assert ev.seed(snap)["id"].tolist() == ["1", "2"]
