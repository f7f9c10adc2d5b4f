from sqlglot import parse_one

from mesh_dagster.core.categorizer import categorize_indirect, only_projection_additions, text_diff
from mesh_dagster.core.snapshot import ChangeCategory as C


def adds(old: str, new: str) -> bool:
    return only_projection_additions(parse_one(old, read="spark"), parse_one(new, read="spark"))


def test_added_projection_is_non_breaking():
    assert adds("SELECT id, item_id, event_date FROM t WHERE x > 1",
                "SELECT id, item_id, 'z' AS new_column, event_date FROM t WHERE x > 1")


def test_where_change_is_breaking():
    assert not adds("SELECT a FROM t WHERE x > 1", "SELECT a FROM t WHERE x > 2")


def test_removed_or_changed_projection_is_breaking():
    assert not adds("SELECT a, b FROM t", "SELECT a FROM t")
    assert not adds("SELECT a, b FROM t", "SELECT a, b + 1 AS b FROM t")


def test_identical_queries_are_not_additions():
    assert not adds("SELECT a FROM t", "SELECT a FROM t")


def test_cardinality_changing_additions_are_breaking():
    assert not adds("SELECT a FROM t", "SELECT a, COUNT(*) AS n FROM t")  # aggregate collapses rows
    assert not adds("SELECT a FROM t", "SELECT a, EXPLODE(arr) AS e FROM t")  # UDTF multiplies rows
    assert not adds("SELECT DISTINCT a FROM t", "SELECT DISTINCT a, b FROM t")


def test_aggregate_added_to_grouped_select_is_fine():
    assert adds("SELECT a, COUNT(*) AS n FROM t GROUP BY a", "SELECT a, COUNT(*) AS n, MAX(b) AS m FROM t GROUP BY a")


def test_window_function_addition_is_fine():
    assert adds("SELECT a FROM t", "SELECT a, ROW_NUMBER() OVER (ORDER BY a) AS rn FROM t")


def test_insertion_before_ordinal_reference_is_breaking():
    assert not adds("SELECT a, COUNT(*) FROM t GROUP BY 1", "SELECT b, a, COUNT(*) FROM t GROUP BY 1")
    assert adds("SELECT a, COUNT(*) FROM t GROUP BY 1", "SELECT a, COUNT(*), MAX(b) FROM t GROUP BY 1")


def test_addition_in_cte():
    assert adds("WITH x AS (SELECT a FROM t) SELECT a FROM x", "WITH x AS (SELECT a, b FROM t) SELECT a FROM x")


def test_large_query_is_fast_enough():
    cols = ", ".join(f"c{i} + {i} AS x{i}" for i in range(300))
    old = parse_one(f"SELECT {cols} FROM t JOIN u ON t.id = u.id WHERE t.a > 1", read="spark")
    new = parse_one(f"SELECT {cols}, 1 AS extra FROM t JOIN u ON t.id = u.id WHERE t.a > 1", read="spark")
    assert only_projection_additions(old, new)


def test_indirect_categories():
    assert categorize_indirect([C.NON_BREAKING]) == C.INDIRECT_NON_BREAKING
    assert categorize_indirect([C.NON_BREAKING, C.BREAKING]) == C.INDIRECT_BREAKING
    assert categorize_indirect([C.INDIRECT_BREAKING]) == C.INDIRECT_BREAKING
    assert categorize_indirect([C.METADATA, C.METADATA]) == C.METADATA
    assert categorize_indirect([C.METADATA, C.INDIRECT_NON_BREAKING]) == C.INDIRECT_NON_BREAKING
    assert categorize_indirect([]) == C.INDIRECT_BREAKING


def test_text_diff_shows_added_line():
    diff = text_diff("SELECT\n  a,\n  b\nFROM t", "SELECT\n  a,\n  'z' AS c,\n  b\nFROM t", "m")
    assert "+  'z' AS c," in diff and diff.startswith("---")
