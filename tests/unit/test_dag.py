import pytest

from mesh_dagster.core.project.dag import DAG, CycleError


def test_sorted_parents_first():
    dag = DAG({"c": ["b"], "b": ["a"], "a": [], "d": ["a", "c"]})
    order = dag.sorted()
    assert order.index("a") < order.index("b") < order.index("c") < order.index("d")
    assert dag.downstream("a") == {"b", "c", "d"}
    assert dag.upstream("d") == {"a", "b", "c"}


def test_cycle_is_named():
    with pytest.raises(CycleError) as e:
        DAG({"a": ["c"], "b": ["a"], "c": ["b"], "x": []}).sorted()
    cycle = e.value.cycle
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


def test_upstream_and_downstream_of_several_nodes():
    dag = DAG({"a": [], "b": ["a"], "c": ["b"], "d": ["a"], "e": []})
    assert dag.upstream_of(["c", "d"]) == {"a", "b"}
    assert dag.upstream_of(["c", "b"]) == {"a", "b"}  # a node above another given one is included
    assert dag.downstream_of(["b", "d"]) == {"c"}
    assert dag.downstream_of(["a"]) == {"b", "c", "d"}
    assert dag.upstream_of(["e", "unknown"]) == set() == dag.downstream_of([])
