"""How the re-stamp sensor cuts outstanding stamps into ranged runs (no Spark, no Dagster run):
one run per interval unit, set of models and contiguous range of partitions; the run's tags make
it a ranged re-stamp run of the model assets."""

from __future__ import annotations

from pathlib import Path

from project_copies import recent_example

from mesh_dagster.context import Context
from mesh_dagster.core.cron import IntervalUnit
from mesh_dagster.dagster.graph import build_graph
from mesh_dagster.dagster.stamps import RESTAMP_TAG, Stamper, is_restamp
from mesh_dagster.dagster.translator import MeshTranslator


def _stamper(tmp_path: Path) -> Stamper:
    project = recent_example(tmp_path / "project", 10)
    context = Context(project)
    try:
        graph = build_graph(context.project, context.plan("prod", allow_empty=True))
    finally:
        context.close()
    translator = MeshTranslator()
    partitions = {unit: translator.get_partitions_def(unit, graph.partitions_start(unit)) for unit in graph.by_unit()}
    return Stamper(graph, partitions, context, instance=None)  # type: ignore[arg-type]  # runs() reads neither


def test_contiguous_partitions_of_the_same_models_are_one_run_and_gaps_split_runs(tmp_path):
    stamper = _stamper(tmp_path)
    keys = stamper.partitions[IntervalUnit.DAY].get_partition_keys()
    assert len(keys) == 10
    both = [(k, True) for k in keys[2:6]]
    pending = {
        "sqlmesh_example.incremental_model": [*both, (keys[8], True)],  # a gap after keys[5]
        "sqlmesh_example.full_model": [(keys[0], False), (keys[1], False), *both],
    }
    runs = stamper.runs(pending)
    assert [(r.names, r.first, r.last) for r in runs] == [
        (("sqlmesh_example.full_model",), keys[0], keys[1]),  # only full_model: its own run
        (("sqlmesh_example.incremental_model", "sqlmesh_example.full_model"), keys[2], keys[5]),  # parents first
        (("sqlmesh_example.incremental_model",), keys[8], keys[8]),
    ]
    assert runs[1].tags == {RESTAMP_TAG: "true", "dagster/asset_partition_range_start": keys[2],
                            "dagster/asset_partition_range_end": keys[5]}
    assert is_restamp(runs[1].tags) and not is_restamp({"dagster/asset_partition_range_start": keys[2]})
    assert stamper.runs({}) == []
