"""How the re-stamp sensor cuts outstanding stamps into runs (no Spark, no Dagster run): one run per
interval unit, set of models and contiguous range of partitions, and one for the models without
partitions; the run's tags make it a re-stamp run of the model assets of one environment. No
`dagster/backfill` tag: no backfill exists for it to link to (dagster/restamp/restamps.py)."""

from __future__ import annotations

from pathlib import Path

from project_copies import recent_example

from mesh_dagster.context import Context
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.dagster.mapping.graph import build_graph
from mesh_dagster.dagster.mapping.translator import MeshTranslator
from mesh_dagster.dagster.restamp.restamps import RESTAMP_TAG, is_restamp, restamp_runs
from mesh_dagster.dagster.restamp.stamps import Stamper


def _stamper(tmp_path: Path) -> Stamper:
    project = recent_example(tmp_path / "project", 10)
    context = Context(project)
    try:
        graph = build_graph(context.project, context.plans.plan("prod", allow_empty=True))
    finally:
        context.close()
    translator = MeshTranslator()
    partitions = {unit: translator.get_partitions_def(unit, graph.partitions_start(unit)) for unit in graph.by_unit()}
    return Stamper(graph, partitions, context, instance=None)  # type: ignore[arg-type]  # runs() reads neither


def test_contiguous_partitions_of_the_same_models_are_one_run_and_gaps_split_runs(tmp_path):
    stamper = _stamper(tmp_path)
    keys = stamper.partitions[IntervalUnit.DAY].get_partition_keys()
    assert len(keys) == 10
    pending = {"sqlmesh_example.incremental_model": [*((k, True) for k in keys[2:6]), (keys[8], True)]}  # a gap
    whole = ["sqlmesh_example.seed_model", "sqlmesh_example.full_model"]  # no partitions: once each
    runs = restamp_runs(stamper, pending, whole)
    assert [(r.unit, r.selected, r.first, r.last) for r in runs] == [
        # with the first ranged run (Dagster runs the seed's step before the incremental model's)
        (IntervalUnit.DAY, ("sqlmesh_example.seed_model", "sqlmesh_example.full_model",
                            "sqlmesh_example.incremental_model"), keys[2], keys[5]),
        (IntervalUnit.DAY, ("sqlmesh_example.incremental_model",), keys[8], keys[8]),
    ]
    assert runs[0].tags("prod") == {RESTAMP_TAG: "true", "mesh/environment": "prod",
                                    "dagster/asset_partition_range_start": keys[2],
                                    "dagster/asset_partition_range_end": keys[5]}
    (alone,) = restamp_runs(stamper, {}, whole)  # nothing partitioned to stamp: a run without a range
    assert (alone.unit, alone.selected) == (None, tuple(whole))
    assert alone.tags("dev") == {RESTAMP_TAG: "true", "mesh/environment": "dev"}
    assert is_restamp(runs[1].tags("prod")) and not is_restamp({"dagster/asset_partition_range_start": keys[2]})
    assert restamp_runs(stamper, {}, []) == []


def test_a_tick_stamps_a_bounded_share_and_leaves_the_rest_for_the_next(monkeypatch):
    """Runless stamps are stored one at a time: a tick takes at most RUNLESS_PER_TICK partitions,
    in the order found, and names the models left for later ticks."""
    from mesh_dagster.dagster.restamp import restamps

    monkeypatch.setattr(restamps, "RUNLESS_PER_TICK", 5)
    found: dict[str, list[str | None]] = {"a": [None], "b": [f"k{i}" for i in range(3)], "c": ["x", "y", "z"]}
    share, later = restamps.tick_share(found)
    assert share == {"a": [None], "b": ["k0", "k1", "k2"], "c": ["x"]} and later == {"c"}
    assert restamps.tick_share({"a": [None]}) == ({"a": [None]}, set())
