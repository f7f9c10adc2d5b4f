"""example_project is the quickstart scaffold: keep the two from drifting apart."""

from datetime import date
from pathlib import Path

from mesh_dagster.core.project.project import load_project
from mesh_dagster.scaffold.init import init_project

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"


def test_example_project_matches_the_scaffold(tmp_path):
    created = init_project(tmp_path / "p", today=date(2025, 6, 22))
    for path in created:
        rel = path.relative_to(tmp_path / "p")
        assert (EXAMPLE / rel).read_text() == path.read_text(), f"{rel} differs from the scaffold"


def test_example_project_loads():
    project = load_project(EXAMPLE, use_cache=False)
    assert sorted(project.models) == [
        "sqlmesh_example.full_model", "sqlmesh_example.incremental_model", "sqlmesh_example.seed_model"]
    assert project.parents("sqlmesh_example.full_model") == ["sqlmesh_example.incremental_model"]
