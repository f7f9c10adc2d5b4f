"""Fixture SQL and result comparison of YAML unit tests (pure Python, no Spark)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pandas as pd
import pytest

from mesh_dagster.testing.comparison import Table, canonical, coerce, compare
from mesh_dagster.testing.fixtures import cell, fixture_columns, fixture_select, infer_type, literal

# -- fixtures ------------------------------------------------------------------------------------


def test_fixture_columns_order_and_types() -> None:
    rows = [{"b": 1, "extra": "x"}, {"b": 2.5, "when": date(2020, 1, 1)}]
    columns = fixture_columns(rows, declared={"c": "DECIMAL(10,2)"}, known={"a": "INT", "b": None, "c": "STRING"})
    # model columns first in model order, then declared, then the rows' other columns
    assert columns == {"a": "INT", "b": "DOUBLE", "c": "DECIMAL(10,2)", "extra": "STRING", "when": "DATE"}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1, 2, None], "BIGINT"),
        ([1, 2.5], "DOUBLE"),
        ([True, False], "BOOLEAN"),
        ([date(2020, 1, 1), datetime(2020, 1, 2, 3)], "TIMESTAMP"),
        ([None, None], "STRING"),
        ([1, "a"], "STRING"),
        ([[1, 2]], "ARRAY<BIGINT>"),
        ([{"k": "v"}], "STRUCT<`k`: STRING>"),
    ],
)
def test_infer_type(values, expected) -> None:
    assert infer_type(values) == expected


def test_literals() -> None:
    assert literal(None) == "NULL"
    assert literal(True) == "TRUE"
    assert literal(12) == "12"
    assert literal(1.5) == "CAST('1.5' AS DOUBLE)"
    assert literal(float("nan")) == "CAST('nan' AS DOUBLE)"
    assert literal("it's a \\ test") == "'it\\'s a \\\\ test'"
    assert literal(date(2020, 1, 2)) == "DATE '2020-01-02'"
    assert literal(datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)) == "TIMESTAMP '2020-01-02 03:04:05'"
    assert literal([1, 2], "ARRAY<INT>") == "ARRAY(CAST(1 AS INT), CAST(2 AS INT))"
    assert literal({"a": 1}, "MAP<STRING, INT>") == "MAP(CAST('a' AS STRING), CAST(1 AS INT))"
    assert literal({"a": 1, "b": "x"}, "STRUCT<a: INT, b: STRING>") == \
        "NAMED_STRUCT('a', CAST(1 AS INT), 'b', CAST('x' AS STRING))"
    assert cell("2020-01-01", "DATE") == "CAST('2020-01-01' AS DATE)"


def test_fixture_select() -> None:
    sql = fixture_select([{"id": 1}, {"id": 2, "name": "b"}], {"id": "INT", "name": "STRING"})
    assert sql == ("SELECT * FROM VALUES (CAST(1 AS INT), CAST(NULL AS STRING)), "
                   "(CAST(2 AS INT), CAST('b' AS STRING)) AS fixture(`id`, `name`)")
    assert fixture_select([], {"id": "INT"}) == "SELECT CAST(NULL AS INT) AS `id` WHERE FALSE"
    with pytest.raises(ValueError, match="at least one column"):
        fixture_select([], {})


# -- canonical values and coercion ------------------------------------------------------------------


def test_canonical_values() -> None:
    assert canonical(float("nan")) is None
    assert canonical(pd.NaT) is None
    assert canonical(pd.NA) is None
    assert canonical(pd.Timestamp("2020-01-01 10:00")) == datetime(2020, 1, 1, 10)
    assert canonical(Decimal("2.50")) == 2.5
    assert canonical(0.1 + 0.2) == 0.3
    assert canonical([1, {"b": 2, "a": None}]) == (1, (("a", None), ("b", 2)))


@pytest.mark.parametrize(
    ("expected", "sample", "result"),
    [
        ("2020-01-01", date(2020, 1, 5), date(2020, 1, 1)),
        (datetime(2020, 1, 1), date(2020, 1, 5), date(2020, 1, 1)),
        ("2020-01-01 00:00:00", date(2020, 1, 5), date(2020, 1, 1)),
        ("2020-01-01 10:00:00", datetime(2020, 1, 5), datetime(2020, 1, 1, 10)),
        (date(2020, 1, 1), datetime(2020, 1, 5), datetime(2020, 1, 1)),
        ("12", 5, 12),
        ("1.5", 5.0, 1.5),
        ("true", False, True),
        (date(2020, 1, 1), "x", "2020-01-01"),
        (3, "x", "3"),
        (True, "x", "true"),
        ("abc", 5, "abc"),
        (None, 5, None),
    ],
)
def test_coerce_expected_towards_actual(expected, sample, result) -> None:
    assert coerce(expected, sample) == result


# -- compare --------------------------------------------------------------------------------------


def frame(**columns) -> Table:
    return Table.from_frame(pd.DataFrame(columns))


def test_equal_ignoring_order_and_representation() -> None:
    actual = frame(item_id=[2, 1], num=[1.0, float("nan")], day=[date(2020, 1, 2), date(2020, 1, 1)])
    expected = Table.from_records([{"item_id": 1, "num": None, "day": "2020-01-01"},
                                   {"ITEM_ID": 2, "num": 1, "day": date(2020, 1, 2)}])
    assert compare(expected, actual).ok


def test_missing_columns_in_expected_rows_are_null() -> None:
    actual = frame(a=[1, 2], b=[None, "x"])
    assert compare(Table.from_records([{"a": 1}, {"a": 2, "b": "x"}]), actual).ok
    result = compare(Table.from_records([{"a": 1}, {"a": 2, "b": None}]), actual)
    assert not result.ok
    assert "b: expected NULL, actual 'x'" in result.message
    assert "column b is in no expected row" not in result.message


def test_column_absent_from_all_expected_rows_suggests_partial() -> None:
    actual = frame(a=[1], b=["x"])
    result = compare(Table.from_records([{"a": 1}]), actual)
    assert not result.ok
    assert "column b is in no expected row, so expected NULL; use `partial: true`" in result.message
    assert compare(Table.from_records([{"a": 1}]), actual, partial=True).ok


def test_partial_compares_only_listed_columns() -> None:
    actual = frame(a=[1, 2], b=["x", "y"], c=[1.5, 2.5])
    assert compare(Table.from_records([{"c": 2.5, "a": 2}, {"a": 1, "c": 1.5}]), actual, partial=True).ok
    result = compare(Table.from_records([{"a": 1, "c": 9}, {"a": 2, "c": 2.5}]), actual, partial=True)
    assert not result.ok
    assert "row (a=1): c: expected 9, actual 1.5" in result.message


def test_unknown_expected_column() -> None:
    result = compare(Table.from_records([{"a": 1, "zzz": 2}]), frame(a=[1]), partial=True)
    assert result.message == "Expected column zzz not in the output (output columns: a)"


def test_diff_lists_changed_missing_and_unexpected_rows() -> None:
    actual = frame(item_id=[1, 2, 7], num_orders=[2, 1, 1])
    expected = Table.from_records([{"item_id": 1, "num_orders": 3}, {"item_id": 2, "num_orders": 1},
                                   {"item_id": 9, "num_orders": 4}])
    result = compare(expected, actual)
    assert not result.ok
    lines = result.message.splitlines()
    assert lines[0] == "Data mismatch (3 expected rows, 3 actual rows):"
    assert "  row (item_id=1): num_orders: expected 3, actual 2" in lines
    assert "  expected but not in the output:" in lines
    assert "    {item_id: 9, num_orders: 4}" in lines
    assert "  in the output but not expected:" in lines
    assert "    {item_id: 7, num_orders: 1}" in lines
    expected_table = lines.index("Expected:")
    assert lines[expected_table + 1].split() == ["item_id", "num_orders"]
    assert lines[lines.index("Actual:") + 1:] == ["  item_id  num_orders", "  1        2", "  2        1",
                                                   "  7        1"]


def test_duplicates_count() -> None:
    actual = frame(a=[1, 1])
    assert not compare(Table.from_records([{"a": 1}]), actual).ok
    assert compare(Table.from_records([{"a": 1}, {"a": 1}]), actual).ok


def test_ordered_comparison_reports_positions() -> None:
    actual = frame(a=[2, 1])
    assert compare(Table.from_records([{"a": 1}, {"a": 2}]), actual).ok
    result = compare(Table.from_records([{"a": 1}, {"a": 2}]), actual, ordered=True)
    assert not result.ok
    assert "  row 1: a: expected 1, actual 2" in result.message.splitlines()
    assert "  row 2: a: expected 2, actual 1" in result.message.splitlines()


def test_empty_expected_vs_rows() -> None:
    result = compare(Table.from_records([]), frame(a=[1]))
    assert not result.ok
    assert "Data mismatch (0 expected rows, 1 actual rows):" in result.message
    assert "(no rows)" in result.message
    assert compare(Table.from_records([]), frame(a=[])).ok
