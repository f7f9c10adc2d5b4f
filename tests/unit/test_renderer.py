"""Rendering: transpiling, reference rewriting, embedded models, star expansion, audits, errors."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlglot import exp

from mesh_dagster.core.errors import MacroError, ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import (
    RenderContext,
    output_columns,
    referenced_tables,
    render_audit,
    render_query,
    render_sql,
)

EMPTY = MacroRegistry()
SEED = "sqlmesh_example.seed_model"
SEED_TABLE = "mesh__sqlmesh_example.sqlmesh_example__seed_model__111"
JAN1 = datetime(2024, 1, 1, tzinfo=UTC)
JAN3 = datetime(2024, 1, 3, tzinfo=UTC)


def model(query: str | None, name: str = "sqlmesh_example.child", dialect: str = "spark",
          kind: ModelKind | None = None, **kw) -> Model:
    return Model(name=name, kind=kind or ModelKind(name=KindName.FULL), dialect=dialect, query=query,
                 path="models/x.sql", query_line=10, **kw)


def incremental(time_column: str = "event_date", **kw) -> ModelKind:
    return ModelKind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column=time_column, **kw)


# -- the quickstart models ------------------------------------------------------------------------

INCREMENTAL_QUERY = """SELECT
  id,
  item_id,
  event_date,
FROM
  sqlmesh_example.seed_model
WHERE
  event_date between @start_date and @end_date"""


def test_quickstart_incremental_model_in_duckdb_renders_spark() -> None:
    m = model(INCREMENTAL_QUERY, name="sqlmesh_example.incremental_model", dialect="duckdb", kind=incremental())
    ctx = RenderContext(start=JAN1, end=JAN3, runtime_stage="evaluating", table_mapping={SEED: SEED_TABLE})
    assert render_sql(m, ctx, EMPTY) == (
        f"SELECT id, item_id, event_date FROM {SEED_TABLE} AS seed_model "
        "WHERE event_date BETWEEN CAST('2024-01-01' AS DATE) AND CAST('2024-01-02' AS DATE)")


def test_render_query_returns_a_query_tree() -> None:
    tree = render_query(model("SELECT 1 AS a"), RenderContext(), EMPTY)
    assert isinstance(tree, exp.Query)
    assert tree.sql(dialect="spark") == "SELECT 1 AS a"


def test_pretty() -> None:
    assert render_sql(model("SELECT a, b FROM t"), RenderContext(), EMPTY, pretty=True) == "SELECT\n  a,\n  b\nFROM t"


def test_duckdb_is_transpiled_to_spark() -> None:
    m = model("SELECT x::INT AS a, epoch_ms(b) AS c, [1, 2] AS l, \"Quoted\" AS q FROM t", dialect="duckdb")
    assert render_sql(m, RenderContext(), EMPTY) == (
        "SELECT CAST(x AS INT) AS a, TIMESTAMP_MILLIS(b) AS c, ARRAY(1, 2) AS l, `Quoted` AS q FROM t")


def test_spark_strings_with_backslashes_and_at_signs() -> None:
    m = model(r"SELECT 'it\'s @here' AS s, @x AS x", macro_definitions=["@DEF(x, 1)"])
    assert render_sql(m, RenderContext(), EMPTY) == "SELECT 'it\\'s @here' AS s, 1 AS x"


# -- reference rewriting --------------------------------------------------------------------------


def test_reference_without_alias_keeps_its_name_as_alias() -> None:
    m = model(f"SELECT seed_model.id, {SEED}.item_id FROM {SEED} JOIN ext.raw ON seed_model.id = raw.id")
    sql = render_sql(m, RenderContext(table_mapping={SEED: SEED_TABLE}), EMPTY)
    assert sql == (f"SELECT seed_model.id, seed_model.item_id FROM {SEED_TABLE} AS seed_model "
                   "JOIN ext.raw ON seed_model.id = raw.id")


def test_reference_with_alias_keeps_the_alias() -> None:
    m = model(f"SELECT s.id FROM {SEED} AS s WHERE s.id IN (SELECT id FROM {SEED})")
    sql = render_sql(m, RenderContext(table_mapping={SEED: SEED_TABLE}), EMPTY)
    assert sql == f"SELECT s.id FROM {SEED_TABLE} AS s WHERE s.id IN (SELECT id FROM {SEED_TABLE} AS seed_model)"


def test_reference_names_are_case_insensitive_and_quoted_names_match() -> None:
    m = model('SELECT id FROM "SQLMesh_Example"."Seed_Model"', dialect="duckdb")
    assert render_sql(m, RenderContext(table_mapping={SEED: SEED_TABLE}), EMPTY) == (
        f"SELECT id FROM {SEED_TABLE} AS Seed_Model")


def test_unqualified_reference_matches_default_schema() -> None:
    m = model("SELECT id FROM events")
    assert render_sql(m, RenderContext(table_mapping={"default.events": "mesh__default.default__events__1"}),
                      EMPTY) == "SELECT id FROM mesh__default.default__events__1 AS events"


def test_cte_shadows_a_model_of_the_same_name() -> None:
    m = model(f"WITH seed_model AS (SELECT id FROM {SEED}) SELECT id FROM seed_model")
    mapping = {SEED: SEED_TABLE, "seed_model": "wrong.table"}
    assert render_sql(m, RenderContext(table_mapping=mapping), EMPTY) == (
        f"WITH seed_model AS (SELECT id FROM {SEED_TABLE} AS seed_model) SELECT id FROM seed_model")


def test_this_model_and_self_reference() -> None:
    m = model("SELECT * FROM sqlmesh_example.child UNION ALL SELECT * FROM @this_model", kind=incremental())
    ctx = RenderContext(this_model="mesh__x.child__2", table_mapping={"sqlmesh_example.child": "mesh__x.child__1"})
    assert render_sql(m, ctx, EMPTY) == (
        "SELECT * FROM mesh__x.child__1 AS child UNION ALL SELECT * FROM mesh__x.child__2")


def test_embedded_models_are_inlined() -> None:
    embedded = model(f"SELECT id FROM {SEED} WHERE id > 0", name="sqlmesh_example.emb",
                     kind=ModelKind(name=KindName.EMBEDDED))
    m = model("SELECT e.id, emb.id FROM sqlmesh_example.emb AS e JOIN sqlmesh_example.emb ON TRUE")
    ctx = RenderContext(table_mapping={SEED: SEED_TABLE}, embedded={"sqlmesh_example.emb": embedded})
    inner = f"(SELECT id FROM {SEED_TABLE} AS seed_model WHERE id > 0)"
    assert render_sql(m, ctx, EMPTY) == f"SELECT e.id, emb.id FROM {inner} AS e JOIN {inner} AS emb ON TRUE"


def test_self_embedding_is_reported() -> None:
    loop = model("SELECT * FROM sqlmesh_example.loop", name="sqlmesh_example.loop", kind=ModelKind(name=KindName.EMBEDDED))
    with pytest.raises(ModelError, match="nested too deeply"):
        render_sql(model("SELECT * FROM sqlmesh_example.loop"), RenderContext(embedded={loop.name: loop}), EMPTY)


# -- star expansion -------------------------------------------------------------------------------

SCHEMAS = {
    SEED: {"id": "INT", "item_id": "INT", "event_date": "DATE"},
    "sqlmesh_example.items": {"item_id": "INT", "name": "STRING"},
}


def render_with_schemas(query: str, **kw) -> str:
    return render_sql(model(query), RenderContext(schemas=SCHEMAS, **kw), EMPTY)


def test_star_of_a_known_parent_is_expanded() -> None:
    assert render_with_schemas(f"SELECT * FROM {SEED}") == f"SELECT id, item_id, event_date FROM {SEED}"


def test_parent_gaining_a_column_changes_the_child() -> None:
    before = render_with_schemas(f"SELECT * FROM {SEED}")
    schemas = {SEED: {**SCHEMAS[SEED], "new_column": "STRING"}}
    after = render_sql(model(f"SELECT * FROM {SEED}"), RenderContext(schemas=schemas), EMPTY)
    assert before != after and after.startswith("SELECT id, item_id, event_date, new_column FROM")


def test_star_over_a_join_is_qualified_and_table_star_expands() -> None:
    sql = render_with_schemas(f"SELECT * FROM {SEED} AS s JOIN sqlmesh_example.items AS i ON s.item_id = i.item_id")
    assert sql.startswith("SELECT s.id, s.item_id, s.event_date, i.item_id, i.name FROM")
    sql = render_with_schemas(f"SELECT i.*, s.id FROM {SEED} AS s LEFT SEMI JOIN sqlmesh_example.items AS i ON TRUE")
    assert sql.startswith("SELECT i.item_id, i.name, s.id FROM")


def test_star_through_ctes_and_subqueries_and_with_mapping() -> None:
    sql = render_with_schemas(
        f"WITH a AS (SELECT * FROM {SEED}), b AS (SELECT * FROM a) SELECT * FROM (SELECT * FROM b) AS sub",
        table_mapping={SEED: SEED_TABLE})
    assert sql == (f"WITH a AS (SELECT id, item_id, event_date FROM {SEED_TABLE} AS seed_model), "
                   "b AS (SELECT id, item_id, event_date FROM a) "
                   "SELECT id, item_id, event_date FROM (SELECT id, item_id, event_date FROM b) AS sub")


def test_star_is_kept_when_a_source_is_unknown() -> None:
    assert render_with_schemas(f"SELECT * FROM {SEED} JOIN ext.other ON TRUE") == (
        f"SELECT * FROM {SEED} JOIN ext.other ON TRUE")
    assert render_with_schemas(f"SELECT * FROM {SEED} JOIN ext.other USING (item_id)") == (
        f"SELECT * FROM {SEED} JOIN ext.other USING (item_id)")


def test_star_except_in_duckdb_exclude() -> None:
    m = model(f"SELECT * EXCLUDE (event_date) FROM {SEED}", dialect="duckdb")
    assert render_sql(m, RenderContext(schemas=SCHEMAS), EMPTY) == f"SELECT id, item_id FROM {SEED}"


# Spark merges or makes columns under USING / NATURAL joins, PIVOT / UNPIVOT and LATERAL VIEW:
# sqlglot's qualify_columns expands those stars (each expected output below is what Spark 4's own
# `SELECT *` gives: names, order, and the types that are known).

ITEMS = "sqlmesh_example.items"
WIDE = {
    **SCHEMAS,
    "sqlmesh_example.big": {"item_id": "BIGINT", "label": "STRING"},
    "sqlmesh_example.arr": {"id": "INT", "xs": "ARRAY<STRING>"},
    "sqlmesh_example.sales": {"year": "INT", "quarter": "STRING", "amount": "DECIMAL(10, 2)", "n": "BIGINT"},
}


def expanded(query: str, dialect: str = "spark", **kw) -> tuple[str, dict[str, str | None] | None]:
    """The rendering with WIDE's columns, and the output columns."""
    m = model(query, dialect=dialect)
    return render_sql(m, RenderContext(schemas=WIDE, **kw), EMPTY), output_columns(m, EMPTY, {}, WIDE)


def test_star_over_a_using_join_puts_the_key_first_once() -> None:
    sql, columns = expanded(f"SELECT * FROM {SEED} AS s LEFT JOIN {ITEMS} AS i USING (item_id)")
    # The unqualified key is the column Spark's `*` outputs, whatever the join side.
    assert sql == f"SELECT item_id, s.id, s.event_date, i.name FROM {SEED} AS s LEFT JOIN {ITEMS} AS i USING (item_id)"
    assert columns == {"item_id": "INT", "id": "INT", "event_date": "DATE", "name": "STRING"}


def test_star_over_chained_using_joins_and_semi_joins() -> None:
    sql, columns = expanded(f"SELECT * FROM {SEED} JOIN {ITEMS} USING (item_id) JOIN sqlmesh_example.arr USING (id)")
    assert sql.startswith("SELECT id, item_id, seed_model.event_date, items.name, arr.xs FROM")
    assert columns == {"id": "INT", "item_id": "INT", "event_date": "DATE", "name": "STRING", "xs": "ARRAY<STRING>"}
    sql, columns = expanded(f"SELECT * FROM {SEED} LEFT SEMI JOIN {ITEMS} USING (item_id)")
    assert sql.startswith("SELECT seed_model.item_id, seed_model.id, seed_model.event_date FROM")
    assert columns == {"item_id": "INT", "id": "INT", "event_date": "DATE"}


def test_using_key_of_two_types_has_no_known_type() -> None:
    # Spark's key is the left side's (INT) on an inner join, the coalesced one (BIGINT) on a full one.
    _, columns = expanded(f"SELECT * FROM {SEED} FULL JOIN sqlmesh_example.big USING (item_id)")
    assert columns == {"item_id": None, "id": "INT", "event_date": "DATE", "label": "STRING"}


def test_star_over_a_natural_join() -> None:
    sql, columns = expanded(f"SELECT *, 1 AS one FROM {SEED} NATURAL FULL JOIN {ITEMS}")
    assert sql == (f"SELECT item_id, seed_model.id, seed_model.event_date, items.name, 1 AS one "
                   f"FROM {SEED} NATURAL FULL JOIN {ITEMS}")
    assert columns == {"item_id": "INT", "id": "INT", "event_date": "DATE", "name": "STRING", "one": "INT"}
    sql, _ = expanded(f"SELECT * FROM {SEED} NATURAL JOIN sqlmesh_example.sales")  # nothing in common: a cross join
    assert sql.startswith("SELECT seed_model.id, seed_model.item_id, seed_model.event_date, sales.year, sales.quarter,")


def test_using_star_through_ctes_table_stars_and_mapping() -> None:
    sql, columns = expanded(f"WITH a AS (SELECT * FROM {SEED} JOIN {ITEMS} USING (item_id)) SELECT x.* FROM a AS x",
                            table_mapping={SEED: SEED_TABLE})
    assert sql == (f"WITH a AS (SELECT item_id, seed_model.id, seed_model.event_date, items.name FROM {SEED_TABLE} "
                   f"AS seed_model JOIN {ITEMS} USING (item_id)) SELECT x.item_id, x.id, x.event_date, x.name FROM a AS x")
    assert columns == {"item_id": "INT", "id": "INT", "event_date": "DATE", "name": "STRING"}
    sql, _ = expanded(f"SELECT i.*, 1 AS one FROM {SEED} AS s JOIN {ITEMS} AS i USING (item_id)")
    assert sql.startswith("SELECT i.item_id, i.name, 1 AS one FROM")


def test_star_with_lateral_views() -> None:
    sql, columns = expanded("SELECT * FROM sqlmesh_example.arr LATERAL VIEW POSEXPLODE(xs) t AS p, x")
    assert sql == "SELECT arr.id, arr.xs, t.p, t.x FROM sqlmesh_example.arr LATERAL VIEW POSEXPLODE(xs) t AS p, x"
    assert columns == {"id": "INT", "xs": "ARRAY<STRING>", "p": None, "x": None}  # generator types: unknown
    sql, _ = expanded("SELECT t.* FROM sqlmesh_example.arr AS a LATERAL VIEW OUTER EXPLODE(xs) t AS x")
    assert sql.startswith("SELECT t.x FROM")


def test_star_with_pivot_and_unpivot() -> None:
    sql, columns = expanded("SELECT * FROM sqlmesh_example.sales PIVOT (SUM(amount) AS s, COUNT(n) AS c "
                            "FOR quarter IN ('Q1' AS q1, 'Q2' AS q2))")
    assert sql.startswith("SELECT year, q1_s, q1_c, q2_s, q2_c FROM sqlmesh_example.sales PIVOT(")
    assert columns == {"year": "INT", "q1_s": None, "q1_c": None, "q2_s": None, "q2_c": None}
    sql, columns = expanded("SELECT * FROM sqlmesh_example.sales PIVOT (SUM(amount) FOR quarter IN ('Q1', '2024-01'))")
    assert sql.startswith("SELECT year, n, Q1, `2024-01` FROM")
    assert columns == {"year": "INT", "n": "BIGINT", "q1": None, "2024-01": None}
    sql, columns = expanded("SELECT * FROM sqlmesh_example.sales UNPIVOT (val FOR col IN (year, n))")
    assert sql.startswith("SELECT quarter, amount, col, val FROM")
    assert columns == {"quarter": "STRING", "amount": "DECIMAL(10, 2)", "col": None, "val": None}


def test_duckdb_exclude_over_a_using_join() -> None:
    sql, _ = expanded(f"SELECT * EXCLUDE (name) FROM {SEED} JOIN {ITEMS} USING (item_id)", dialect="duckdb")
    assert sql == f"SELECT item_id, seed_model.id, seed_model.event_date FROM {SEED} JOIN {ITEMS} USING (item_id)"


@pytest.mark.parametrize("query", [
    f"SELECT * FROM {SEED}",
    f"SELECT *, 1 AS one FROM {SEED} AS s JOIN {ITEMS} AS i ON s.item_id = i.item_id",
    f"SELECT i.* FROM {SEED} AS s LEFT SEMI JOIN {ITEMS} AS i ON TRUE",
    f"SELECT s.*, 1 AS one FROM {SEED} AS s",
    f"WITH a AS (SELECT id, item_id AS k FROM {SEED}) SELECT * FROM a JOIN (SELECT name FROM {ITEMS}) AS b ON TRUE",
])
def test_sqlglot_path_expands_plain_stars_as_the_fast_path_does(query: str) -> None:
    """The fast path is an optimisation of sqlglot's expansion, not another meaning of `*`."""
    from sqlglot import parse_one

    from mesh_dagster.core.sql.query_columns import _expand_with_sqlglot, cte_queries, expand_stars

    fast, slow = parse_one(query, read="spark"), parse_one(query, read="spark")
    expand_stars(fast, WIDE, cte_queries(fast))
    outer = slow.find(exp.Select)
    assert isinstance(outer, exp.Select)
    assert _expand_with_sqlglot(slow, [outer], WIDE, cte_queries(slow))
    assert "*" not in fast.sql(dialect="spark").replace("COUNT(*)", "")
    assert slow.sql(dialect="spark") == fast.sql(dialect="spark")


@pytest.mark.parametrize("query", [
    # a lateral view without a name or without column names (Spark names them `col`...)
    "SELECT * FROM sqlmesh_example.arr LATERAL VIEW EXPLODE(xs) t",
    "SELECT * FROM sqlmesh_example.arr LATERAL VIEW EXPLODE(xs) AS x",
    # a PIVOT after a join pivots the whole FROM clause
    "SELECT * FROM sqlmesh_example.sales JOIN sqlmesh_example.items ON TRUE PIVOT (SUM(amount) FOR quarter IN ('Q1'))",
    # two stars in one SELECT
    f"SELECT s.*, i.* FROM {SEED} AS s JOIN {ITEMS} AS i USING (item_id)",
    # the key is in a third source too: the unqualified key would be ambiguous
    f"SELECT * FROM {SEED} JOIN {ITEMS} USING (item_id) JOIN sqlmesh_example.big ON TRUE",
    # a source column Spark names itself (`count(1)`)
    f"WITH a AS (SELECT COUNT(*) FROM {SEED}) SELECT * FROM a NATURAL JOIN {ITEMS}",
    # names differing only in case: Spark matches them, sqlglot would not
    f"SELECT * FROM {SEED} NATURAL JOIN (SELECT 1 AS ITEM_ID) AS x",
    f"SELECT * FROM {SEED} JOIN {ITEMS} USING (ITEM_ID)",
    # no such column
    f"SELECT * FROM {SEED} JOIN {ITEMS} USING (nope)",
])
def test_star_is_kept_where_the_expansion_is_not_certain(query: str) -> None:
    sql, columns = expanded(query)
    assert "SELECT * FROM" in sql or "SELECT s.*, i.* FROM" in sql
    assert columns is None


def test_count_star_is_not_touched() -> None:
    assert render_with_schemas(f"SELECT COUNT(*) AS n FROM {SEED}") == f"SELECT COUNT(*) AS n FROM {SEED}"


# -- referenced_tables / output_columns ------------------------------------------------------------


def test_referenced_tables() -> None:
    m = model(
        "WITH recent AS (SELECT * FROM Sqlmesh_Example.Seed_Model) "
        "SELECT * FROM recent JOIN `ext`.`raw` ON TRUE JOIN sqlmesh_example.child ON TRUE JOIN range(10) ON TRUE "
        "WHERE id IN (SELECT id FROM @{schema}.items) AND x IN (SELECT x FROM plain)")
    assert referenced_tables(m, EMPTY, {"schema": "sqlmesh_example"}) == {
        SEED, "ext.raw", "sqlmesh_example.items", "plain"}


def test_referenced_tables_of_a_user_macro(tmp_path) -> None:
    from mesh_dagster.core.macros.user import load_macros

    (tmp_path / "m.py").write_text("from mesh_dagster import macro\n\n@macro()\ndef src(evaluator):\n"
                                   "    return 'db.generated'\n")
    registry = load_macros(tmp_path)
    assert referenced_tables(model("SELECT * FROM @src()"), registry, {}) == {"db.generated"}


def test_output_columns() -> None:
    m = model(f"SELECT s.id, item_id AS item, CAST(x AS DECIMAL(10, 2)) AS amount, 'z' AS new_column, 1 AS one, "
              f"TRUE AS flag, x + 1 AS other FROM {SEED} AS s")
    assert output_columns(m, EMPTY, {}, SCHEMAS) == {
        "id": "INT", "item": "INT", "amount": "DECIMAL(10, 2)", "new_column": "STRING", "one": "INT",
        "flag": "BOOLEAN", "other": None}


def test_output_columns_through_star_union_and_declared() -> None:
    star = model(f"SELECT * FROM {SEED} UNION ALL SELECT * FROM {SEED}")
    assert output_columns(star, EMPTY, {}, SCHEMAS) == SCHEMAS[SEED]
    declared = model("SELECT a FROM t", columns={"a": "BIGINT"})
    assert output_columns(declared, EMPTY, {}, {}) == {"a": "BIGINT"}
    assert output_columns(model(None), EMPTY, {}, {}) is None


def test_output_columns_unknown() -> None:
    assert output_columns(model("SELECT * FROM ext.unknown"), EMPTY, {}, SCHEMAS) is None
    assert output_columns(model("SELECT COUNT(*) FROM t"), EMPTY, {}, {}) is None


# -- audits ---------------------------------------------------------------------------------------

AUDIT = "SELECT * FROM @this_model WHERE @column IS NULL"


def test_audit_on_incremental_model_is_filtered_to_the_interval() -> None:
    m = model(INCREMENTAL_QUERY, kind=incremental(), columns={"id": "INT", "event_date": "DATE"})
    ctx = RenderContext(start=JAN1, end=JAN3, this_model="mesh__x.x__1", runtime_stage="auditing")
    assert render_audit(AUDIT, "duckdb", {"column": "id"}, m, ctx, EMPTY) == (
        "SELECT * FROM (SELECT * FROM mesh__x.x__1 WHERE `event_date` BETWEEN CAST('2024-01-01' AS DATE) "
        "AND CAST('2024-01-02' AS DATE)) AS x__1 WHERE id IS NULL")


def test_audit_time_filter_for_timestamp_and_string_columns() -> None:
    ctx = RenderContext(start=JAN1, end=JAN3, this_model="mesh__x.x__1")
    ts = model(INCREMENTAL_QUERY, kind=incremental("ts"))
    assert ("WHERE `ts` BETWEEN CAST('2024-01-01 00:00:00.000000' AS TIMESTAMP) "
            "AND CAST('2024-01-02 23:59:59.999999' AS TIMESTAMP)") \
        in render_audit("SELECT * FROM @this_model AS t", "spark", {}, ts, ctx, EMPTY)
    ds = model(INCREMENTAL_QUERY, kind=incremental("ds", time_column_format="%Y%m%d"), columns={"ds": "STRING"})
    assert render_audit("SELECT * FROM @this_model AS t", "spark", {}, ds, ctx, EMPTY) == (
        "SELECT * FROM (SELECT * FROM mesh__x.x__1 WHERE `ds` BETWEEN '20240101' AND '20240102') AS t")


def test_audit_on_full_model_and_args_with_each() -> None:
    m = model("SELECT 1 AS a")
    query = "SELECT * FROM @this_model WHERE @REDUCE(@EACH(@columns, c -> c IS NULL), (l, r) -> l OR r)"
    sql = render_audit(query, "spark", {"columns": "(a, b)"}, m, RenderContext(this_model="mesh__x.x__1"), EMPTY)
    assert sql == "SELECT * FROM mesh__x.x__1 WHERE (a IS NULL) OR (b IS NULL)"


def test_audit_without_physical_table_uses_the_mapping() -> None:
    m = model("SELECT 1 AS a", name="db.m")
    sql = render_audit("SELECT * FROM @this_model", "spark", {}, m, RenderContext(table_mapping={"db.m": "db__dev.m"}),
                       EMPTY)
    assert sql == "SELECT * FROM db__dev.m AS m"


def test_audit_errors_point_at_the_audit_file() -> None:
    with pytest.raises(ModelError, match=r"^audits/a\.sql:4: Cannot parse audit"):
        render_audit("SELECT *\nFROM (", "spark", {}, model("SELECT 1"), RenderContext(), EMPTY,
                     path="audits/a.sql", line=3)


# -- errors -----------------------------------------------------------------------------------------


def test_syntax_error_has_absolute_line() -> None:
    m = model("SELECT a,\n  b\nFROM t WHERE (")
    with pytest.raises(ModelError) as e:
        render_sql(m, RenderContext(), EMPTY)
    assert e.value.path == "models/x.sql" and e.value.line == 12
    assert str(e.value) == "models/x.sql:12: Cannot parse query: the expression is incomplete"


def test_syntax_error_after_a_multiline_macro_keeps_the_line() -> None:
    m = model("SELECT @EACH(\n  [a, b],\n  x -> x\n),\nFROM t WHERE (")
    with pytest.raises(ModelError) as e:
        referenced_tables(m, EMPTY, {})
    assert e.value.line == 14


def test_unterminated_string() -> None:
    with pytest.raises(ModelError, match=r"^models/x\.sql:\d+: Cannot parse query"):
        render_sql(model("SELECT 'abc"), RenderContext(), EMPTY)


def test_query_must_be_a_select() -> None:
    with pytest.raises(ModelError, match=r"^models/x\.sql:10: The query must be a SELECT statement, got INSERT"):
        render_sql(model("INSERT INTO t SELECT 1"), RenderContext(), EMPTY)


def test_unknown_macro_in_query_is_a_macro_error_with_line() -> None:
    with pytest.raises(MacroError) as e:
        referenced_tables(model("SELECT 1\nFROM @missing_fn(x)"), EMPTY, {})
    assert str(e.value).startswith("models/x.sql:11: Unknown macro @missing_fn: it is not a built-in macro")


def test_model_without_query() -> None:
    with pytest.raises(ModelError, match="has no SQL query"):
        render_sql(model(None), RenderContext(), EMPTY)


# -- performance (reported, not asserted on time) -----------------------------------------------------


def test_many_models_render(capsys) -> None:
    count = 300
    models = []
    for i in range(count):
        parents = [f"s.m{j}" for j in range(max(0, i - 3), i)]
        if not parents:
            query = f"SELECT {i} AS id, 'x' AS name, CAST('2024-01-01' AS DATE) AS ds"
        else:
            joins = " ".join(f"JOIN {p} AS p{k} ON p0.id = p{k}.id" for k, p in enumerate(parents[1:], 1))
            query = (f"SELECT p0.id, p0.name, @start_ds AS ds_text, @EACH([1, 2], x -> p0.id + x AS c_@x) "
                     f"FROM {parents[0]} AS p0 {joins} WHERE p0.ds BETWEEN @start_date AND @end_date")
        models.append(model(query, name=f"s.m{i}", kind=incremental("ds")))
    mapping = {m.name: f"mesh__s.s__{m.table_name}__1" for m in models}
    ctx = RenderContext(start=JAN1, end=JAN3, table_mapping=mapping, runtime_stage="evaluating")
    started = time.perf_counter()
    refs = [referenced_tables(m, EMPTY, {}) for m in models]
    middle = time.perf_counter()
    rendered = [render_sql(m, ctx, EMPTY) for m in models]
    done = time.perf_counter()
    assert refs[5] == {"s.m2", "s.m3", "s.m4"}
    assert "FROM mesh__s.s__m2__1 AS p0 JOIN mesh__s.s__m3__1 AS p1" in rendered[5]
    with capsys.disabled():
        print(f"\n[perf] referenced_tables {1000 * (middle - started) / count:.2f} ms/model, "
              f"render_sql {1000 * (done - middle) / count:.2f} ms/model")


def test_empty_query() -> None:
    with pytest.raises(ModelError, match=r"^models/x\.sql:10: The query is empty"):
        render_sql(model("  "), RenderContext(), EMPTY)


def test_a_count_is_a_bigint_whatever_it_counts() -> None:
    # Spark's count returns a LongType: the Dagster column schema shows BIGINT, not "unknown"
    _, columns = expanded(f"SELECT item_id, COUNT(DISTINCT id) AS n, COUNT(*) AS rows, MAX(id) AS top FROM {SEED} "
                          "GROUP BY item_id")
    assert columns == {"item_id": "INT", "n": "BIGINT", "rows": "BIGINT", "top": None}
