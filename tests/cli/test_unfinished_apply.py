"""`mesh plan` after an apply that recorded its environment but died before moving every view:
the plan says so and applying completes the views, even though nothing changed."""

from __future__ import annotations

from bad_input.harness import mesh as mesh_in_process
from project_builder import applied_example


def test_plan_offers_to_finish_an_interrupted_apply(tmp_path):
    root = applied_example(tmp_path / "p", finalize=False)
    out = mesh_in_process(root, "plan", "--no-prompts", "--skip-tests", "--execution-time", "2025-06-20")
    assert out.exit_code == 0, out.stderr
    assert "No changes to plan" in out.stdout
    assert "stopped before all its views moved: applying completes them" in out.stdout
    assert "Plan not applied" in out.stdout  # it asked to apply, instead of ending as "up to date"


def test_finished_apply_with_no_changes_asks_nothing(tmp_path):
    root = applied_example(tmp_path / "p")
    out = mesh_in_process(root, "plan", "--no-prompts", "--skip-tests", "--execution-time", "2025-06-20")
    assert out.exit_code == 0, out.stderr
    assert "No changes to plan" in out.stdout and "Plan not applied" not in out.stdout
