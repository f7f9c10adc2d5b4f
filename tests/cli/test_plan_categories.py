"""What `mesh plan` shows for multi-change plans, in process and without Spark (prod is put in the
state store directly)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input.harness import mesh as mesh_in_process
from project_builder import applied_example

from mesh_dagster.context import Context

FULL = "sqlmesh_example.full_model"


@pytest.fixture
def project(tmp_path) -> Path:
    return applied_example(tmp_path / "p")


def _edit(path: Path, old: str, new: str) -> None:
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def test_breaking_seed_and_non_breaking_child_show_full_model_as_indirect_breaking(project):
    seed = project / "seeds" / "seed_data.csv"
    seed.write_text(seed.read_text().rstrip("\n") + "\n1,3,2020-01-01\n")
    _edit(project / "models" / "incremental_model.sql", "  item_id,", "  item_id,\n  'z' AS new_column,")
    out = mesh_in_process(project, "plan", "dev", "--explain")
    assert out.exit_code == 0, out.stderr
    assert "Directly Modified: sqlmesh_example__dev.seed_model (Breaking)" in out.stdout
    assert "Directly Modified: sqlmesh_example__dev.incremental_model (Non-breaking)" in out.stdout
    assert out.stdout.count("sqlmesh_example__dev.full_model (Indirect Breaking)") == 2  # under both
    assert "Non-breaking)" not in out.stdout.replace("incremental_model (Non-breaking)", "")
    assert "sqlmesh_example__dev.full_model: [full refresh]" in out.stdout


def test_state_with_an_unreadable_stored_rendering_is_planned_not_crashed(project):
    """State written by another version may hold a rendering this sqlglot cannot parse."""
    ctx = Context(project)
    try:
        full = ctx.state.environments.get_environment("prod").snapshot_by_name()[FULL]
        stored = ctx.state.snapshots.get_snapshots([full.snapshot_id])[full.snapshot_id]
        ctx.state.snapshots.update_snapshots([stored.model_copy(update={"rendered_query": "SELECT item_id FROM ((("})])
    finally:
        ctx.close()
    _edit(project / "models" / "full_model.sql", "  item_id,", "  incremental_model.item_id AS item_id,")
    out = mesh_in_process(project, "plan", "dev", "--explain")
    assert out.exit_code == 0, out.stderr
    assert "Directly Modified: sqlmesh_example__dev.full_model (Breaking)" in out.stdout  # cannot prove less
