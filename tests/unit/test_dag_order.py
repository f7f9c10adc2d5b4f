"""The model order and the cycle an error names are pinned: `DAG.sorted` runs on graphlib, but
plans, applies, Dagster and the cycle error show exactly what they showed before it did."""

from __future__ import annotations

import pytest

from mesh_dagster.core.project.dag import DAG, CycleError


def test_last_ready_model_goes_first_and_ties_start_by_name():
    dag = DAG({"s.d": ["s.b", "s.c"], "s.b": ["s.a"], "s.c": ["s.a"], "s.e": [], "s.f": ["s.e"], "s.a": []})
    assert dag.sorted() == ["s.e", "s.f", "s.a", "s.c", "s.b", "s.d"]


def test_parents_named_only_as_parents_are_ordered_too():
    assert DAG({"s.b": ["ext.raw"], "s.a": []}).sorted() == ["s.a", "ext.raw", "s.b"]


@pytest.mark.parametrize(("parents", "cycle"), [
    # graphlib's own search would name s.c -> s.a -> s.b -> s.c (it starts at the first model added)
    ({"s.c": ["s.b"], "s.b": ["s.a"], "s.a": ["s.c"]}, ["s.a", "s.b", "s.c", "s.a"]),
    # a model below the cycle is where the walk up starts: the cycle is entered at s.d, not at s.b
    ({"s.b": ["s.c"], "s.c": ["s.d"], "s.d": ["s.b"], "s.a": ["s.d"]}, ["s.d", "s.c", "s.b", "s.d"]),
    ({"s.z": ["s.y"], "s.y": ["s.z"], "s.a": ["s.y"]}, ["s.y", "s.z", "s.y"]),
])
def test_cycle_named_parents_first_from_the_smallest_unordered_model(parents, cycle):
    with pytest.raises(CycleError) as e:
        DAG(parents).sorted()
    assert e.value.cycle == cycle
    assert str(e.value) == " -> ".join(cycle)
