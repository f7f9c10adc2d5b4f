"""The store's `shapes` part (schema v7): what a run learned of a table's columns and its query's
analysis is read back by the next, replaced as a whole, and forgotten (issue 36)."""

from __future__ import annotations

from mesh_dagster.state import StateStore
from mesh_dagster.state.shapes import TableShape


def test_a_shape_is_remembered_replaced_and_forgotten(store: StateStore) -> None:
    shapes = store.shapes
    assert shapes.table_shapes(["s.a", "s.b"]) == {}
    first = TableShape("s.a", {"id": "int", "ds": "date"}, "digest1", {"id": "int", "ds": "date"})
    shapes.remember(first)
    shapes.remember(TableShape("s.b", {"x": "string"}))
    assert shapes.table_shapes(["s.a", "s.b", "s.c"]) == {"s.a": first, "s.b": TableShape("s.b", {"x": "string"})}
    assert list(shapes.table_shapes(["s.a"])["s.a"].columns or {}) == ["id", "ds"]  # in table order

    second = TableShape("s.a", {"id": "int", "ds": "date", "v": "double"})
    shapes.remember(second)  # a new write: the old analysis goes with the old row
    assert shapes.table_shapes(["s.a"]) == {"s.a": second}

    shapes.forget(["s.a", "s.missing"])
    assert shapes.table_shapes(["s.a", "s.b"]) == {"s.b": TableShape("s.b", {"x": "string"})}
