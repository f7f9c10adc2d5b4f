"""`mesh plan` after an apply that recorded its environment but died before moving every view:
the plan says so and applying completes the views, even though nothing changed."""

from __future__ import annotations

from bad_input.harness import copy_example
from bad_input.harness import mesh as mesh_in_process
from mesh_dagster.context import Context
from project_builder import record_plan


def test_plan_offers_to_finish_an_interrupted_apply(tmp_path):
    root = copy_example(tmp_path / "p")
    ctx = Context(root)
    try:
        record_plan(ctx.plan(execution_time="2025-06-20"), ctx.state, finalize=False)
    finally:
        ctx.close()
    out = mesh_in_process(root, "plan", "--no-prompts", "--skip-tests", "--execution-time", "2025-06-20")
    assert out.exit_code == 0, out.stderr
    assert "No changes to plan" in out.stdout
    assert "stopped before all its views moved: applying completes them" in out.stdout
    assert "Plan not applied" in out.stdout  # it asked to apply, instead of ending as "up to date"


def test_finished_apply_with_no_changes_asks_nothing(tmp_path):
    root = copy_example(tmp_path / "p")
    ctx = Context(root)
    try:
        record_plan(ctx.plan(execution_time="2025-06-20"), ctx.state)
    finally:
        ctx.close()
    out = mesh_in_process(root, "plan", "--no-prompts", "--skip-tests", "--execution-time", "2025-06-20")
    assert out.exit_code == 0, out.stderr
    assert "No changes to plan" in out.stdout and "Plan not applied" not in out.stdout
