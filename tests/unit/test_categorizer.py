import pytest
from sqlglot import parse_one

from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.plan.categorizer import (
    categorize_direct,
    categorize_indirect,
    downstream_category,
    only_projection_additions,
    text_diff,
)
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotFingerprint, hash_values


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


# -- direct categories of whole snapshots, in canonical form ------------------------------------

SCHEMAS = {"s.src": {"id": "INT", "item_id": "INT", "col": "STRING"}, "s.other": {"item_id": "INT", "name": None}}


def direct(old_sql: str, new_sql: str, schemas=None, old_model: dict | None = None, new_model: dict | None = None):
    """categorize_direct on two FULL snapshots whose rendered queries are given."""

    def snapshot(sql: str, settings: dict | None) -> Snapshot:
        settings = {"kind": ModelKind(name=KindName.FULL), **(settings or {})}
        model = Model(name="s.m", query=sql, **settings)
        fingerprint = SnapshotFingerprint(data_hash=hash_values([sql, repr(sorted(settings.items()))]),
                                          metadata_hash="0")
        return Snapshot(name="s.m", fingerprint=fingerprint, model=model, rendered_query=sql)

    return categorize_direct(snapshot(new_sql, new_model), snapshot(old_sql, old_model),
                             SCHEMAS if schemas is None else schemas)


@pytest.mark.parametrize("old, new", [
    ("SELECT id FROM s.src", "SELECT id AS id FROM s.src"),
    ("SELECT col FROM s.src", "SELECT src.col FROM s.src"),
    ("SELECT col FROM s.src", "SELECT x.col AS col FROM s.src AS x"),
    ("SELECT item_id, COUNT(*) AS n FROM s.src GROUP BY 1 ORDER BY 2", "SELECT item_id, COUNT(*) AS n FROM s.src "
                                                                      "GROUP BY item_id ORDER BY n"),
    ("SELECT s.src.id, name FROM s.src JOIN s.other ON src.item_id = other.item_id",
     "SELECT src.id AS id, other.name FROM s.src JOIN s.other USING (item_id)"),
])
def test_rewritten_but_equivalent_queries_are_metadata_only(old, new):
    assert direct(old, new) is None


def test_constant_inserted_first_while_the_ordinal_moves_is_non_breaking():
    old = "SELECT item_id, COUNT(*) AS n FROM s.src GROUP BY 1"
    new = "SELECT 1 AS one, item_id, COUNT(*) AS n FROM s.src GROUP BY 2"
    assert direct(old, new) == C.NON_BREAKING
    # Without resolving ordinals, the raw trees cannot tell (issue 8 §5): the safe answer.
    assert not adds(old, new)


@pytest.mark.parametrize("old, new", [
    ("SELECT COUNT(*) FROM s.src", "SELECT COUNT(*) AS _col_0 FROM s.src"),  # Spark named it count(1)
    ("SELECT id FROM s.src", "SELECT id AS ID FROM s.src"),  # output names keep their case
    ("SELECT id FROM s.src", "SELECT id AS key FROM s.src"),
    ("SELECT id FROM s.src", "SELECT item_id AS id FROM s.src"),
    ("SELECT item_id, COUNT(*) AS n FROM s.src GROUP BY 1", "SELECT id, item_id, COUNT(*) AS n FROM s.src GROUP BY 1"),
    ("SELECT 'k' AS k, COUNT(*) AS n FROM s.src GROUP BY 1", "SELECT 2 AS two, 'k' AS k, COUNT(*) AS n FROM s.src "
                                                            "GROUP BY 2"),  # a constant ordinal stays ordinal
    ("SELECT item_id FROM s.src JOIN s.other ON src.id = other.item_id",  # `item_id` is in both: ambiguous
     "SELECT src.item_id FROM s.src JOIN s.other ON src.id = other.item_id"),
    ("SELECT x FROM raw.unknown", "SELECT unknown.x FROM raw.unknown"),  # no schema: cannot prove it
    ("SELECT id FROM s.src", "SELECT id FROM s.src WHERE id > 0"),
])
def test_changes_that_cannot_be_proven_equivalent_are_breaking(old, new):
    assert direct(old, new) == C.BREAKING


def test_unparsable_stored_rendering_is_breaking_not_a_crash():
    assert direct("SELECT id FROM s.src WHERE (", "SELECT id AS id FROM s.src") == C.BREAKING


@pytest.mark.parametrize("old_model, new_model, category", [
    ({"partitioned_by": []}, {"partitioned_by": ["id"]}, C.NON_BREAKING),  # a new table, same rows
    ({}, {"stamp": "v2"}, C.NON_BREAKING),
    ({"columns": {"id": "INT"}}, {"columns": {"id": "BIGINT"}}, C.BREAKING),  # casts change the data
    ({"columns": {"id": "INT"}}, {"columns": {"id": "INT", "item_id": "INT"}}, C.NON_BREAKING),
    ({"post_statements": ["ANALYZE TABLE t COMPUTE STATISTICS"]}, {"post_statements": []}, C.BREAKING),
    ({"pre_statements": ["SET spark.sql.ansi.enabled = true"]},
     {"pre_statements": ["SET spark.sql.ansi.enabled = false"]}, C.BREAKING),
    ({"pre_statements": ["SET a = 1"]}, {"pre_statements": ["SET   a = 1 /* why */"]}, None),
    ({"kind": ModelKind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="id")},
     {"kind": ModelKind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="item_id")}, C.BREAKING),
])
def test_settings_outside_the_query(old_model, new_model, category):
    sql = "SELECT id, item_id FROM s.src"
    assert direct(sql, sql, old_model=old_model, new_model=new_model) == category


def test_settings_change_with_an_added_column_takes_the_worse_category():
    old, new = "SELECT id FROM s.src", "SELECT id, item_id FROM s.src"
    assert direct(old, new) == C.NON_BREAKING
    assert direct(old, new, old_model={"columns": {"id": "INT"}}, new_model={"columns": {"id": "STRING"}}) == C.BREAKING


def test_downstream_category_keeps_a_breaking_change_going():
    assert downstream_category(C.NON_BREAKING, [C.BREAKING]) == C.INDIRECT_BREAKING
    assert downstream_category(C.METADATA, [C.INDIRECT_BREAKING, C.METADATA]) == C.INDIRECT_BREAKING
    assert downstream_category(C.NON_BREAKING, [C.NON_BREAKING]) == C.NON_BREAKING
    assert downstream_category(C.BREAKING, []) == C.BREAKING


def test_a_category_is_one_value_spelled_three_ways():
    """The spellings that tags, labels and stored reviews use all come from the value; a stored
    review's record reads back to the same value (core/plan/review.py's `Change`)."""
    from mesh_dagster.core.plan.review import Change

    c = C.INDIRECT_NON_BREAKING
    assert (c.label, c.slug, c.words) == ("Indirect Non-breaking", "indirect-non-breaking", "indirect non breaking")
    assert [x.slug for x in C] == ["breaking", "non-breaking", "forward-only", "indirect-breaking",
                                   "indirect-non-breaking", "metadata"]
    stored = Change(name="s.m", change="indirectly modified", category=c).model_dump_json()
    assert '"category":"indirect non breaking"' in stored
    assert Change.model_validate_json(stored).category is c
