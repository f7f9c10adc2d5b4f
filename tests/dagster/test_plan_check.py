"""The plan check's verdict (dagster/mapping/plan_check.py), without Spark: it warns with `mesh
plan`'s line and counts while a change is pending, and passes once the environment serves the
current code; the re-stamp sensor reports it only when that verdict moved."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
from project_copies import TODAY, edit, recent_example

from mesh_dagster.context import Context
from mesh_dagster.dagster.mapping.graph import ProjectGraph, build_graph
from mesh_dagster.dagster.mapping.plan_check import PLAN_CHECK, PLAN_LINE, plan_evaluation, plan_verdict
from mesh_dagster.dagster.restamp.restamps import plan_evaluations


def _graph(project, env: str = "prod") -> ProjectGraph:
    context = Context(project)
    try:
        return build_graph(context.project, context.plans.plan(env, allow_empty=True))
    finally:
        context.close()


def test_a_pending_change_warns_with_the_plans_line_and_counts(tmp_path):
    project = recent_example(tmp_path / "project", 7)
    edit(project, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
    graph = _graph(project)
    inc = plan_verdict(graph.assets["sqlmesh_example.incremental_model"])
    assert not inc.passed and inc.line.startswith("New in prod: 7 partition(s) to recompute, 0 reused.")
    assert (inc.metadata["mesh/change"], inc.metadata["mesh/recompute"], inc.metadata["mesh/reuse"]) == ("Added", 7, 0)
    evaluation = plan_evaluation(graph.assets["sqlmesh_example.full_model"])
    assert (evaluation.check_name, evaluation.passed, evaluation.severity) == (PLAN_CHECK, False,
                                                                              dg.AssetCheckSeverity.WARN)
    assert not evaluation.blocking


def test_the_sensor_reports_a_verdict_once_and_again_when_it_moves(tmp_path):
    project = recent_example(tmp_path / "project", 7)
    graph = _graph(project)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        first = plan_evaluations(graph, instance)
        assert {e.asset_key.path[-1] for e in first} == {"seed_model", "incremental_model", "full_model"}
        for event in first:
            instance.report_runless_asset_event(event)
        assert plan_evaluations(graph, instance) == []  # nothing moved: nothing reported
        start = str(TODAY - timedelta(days=7))
        edit(project, "incremental_model", f"start '{start}'", f"start '{TODAY - timedelta(days=5)}'")
        moved = plan_evaluations(_graph(project), instance)  # two partitions fewer to compute
        assert [e.asset_key.path[-1] for e in moved] == ["incremental_model"]
        assert moved[0].metadata[PLAN_LINE].value.startswith("New in prod: 5 partition(s) to recompute")
