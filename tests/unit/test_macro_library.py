"""The built-in macros that write SQL (@UNION, @DATE_SPINE, @PIVOT, @DEDUPLICATE,
@HAVERSINE_DISTANCE, @SQL, @RESOLVE_TEMPLATE) and the clause operators (@WHERE(cond) ...),
rendered to Spark SQL without Spark; every wrong argument is an error naming the macro, file and line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mesh_dagster.core.errors import MacroError, ModelError
from mesh_dagster.core.macros.evaluator import MacroEvaluator
from mesh_dagster.core.macros.syntax import discovering_dependencies
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, output_columns, render_sql

EMPTY = MacroRegistry()
SCHEMAS: dict[str, dict[str, str | None]] = {
    "db.a": {"id": "INT", "name": "STRING", "amount": "DECIMAL(10,2)", "ds": None, "only_a": "INT"},
    "db.b": {"NAME": "STRING", "id": "INT", "amount": "DOUBLE", "ds": "DATE"},
    "db.c": {"id": "INT", "ds": "DATE", "name": "STRING"},
}


def make_model(query: str, dialect: str = "spark") -> Model:
    return Model(name="db.x", kind=ModelKind(name=KindName.FULL), dialect=dialect, query=query,
                 path="models/x.sql", query_line=10)


def render(query: str, *, dialect: str = "spark", **ctx) -> str:
    ctx.setdefault("schemas", SCHEMAS)
    return render_sql(make_model(query, dialect), RenderContext(**ctx), EMPTY)


def fails(query: str, message: str, **ctx) -> None:
    with pytest.raises(MacroError, match=r"^models/x\.sql:10: " + message):
        render(query, **ctx)


# -- @UNION ----------------------------------------------------------------------------------------

A_AND_B = "SELECT CAST(id AS INT) AS id, CAST(name AS STRING) AS name, CAST(ds AS DATE) AS ds FROM db.{}"


def test_union_selects_the_shared_columns_in_the_first_tables_order_cast_to_their_type() -> None:
    """`amount` differs in type and `only_a` is missing from b: both are left out; `ds`'s type is
    unknown in a, so b's DATE decides; names match whatever their case."""
    assert render("@UNION('distinct', db.a, db.b)") == f"{A_AND_B.format('a')} UNION {A_AND_B.format('b')}"
    assert render("@UNION('ALL', db.a, db.b)") == f"{A_AND_B.format('a')} UNION ALL {A_AND_B.format('b')}"


def test_union_type_defaults_to_all_and_takes_more_tables() -> None:
    assert render("@UNION(db.a, db.b, db.c)") == " UNION ALL ".join(A_AND_B.format(t) for t in "abc")


def test_union_condition_true_unions_false_selects_the_first_table() -> None:
    assert render("@UNION(1 > 0, 'all', db.a, db.b)") == render("@UNION('all', db.a, db.b)")
    assert render("@UNION(1 > 2, 'all', db.a, db.b)") == (
        "SELECT CAST(id AS INT) AS id, CAST(name AS STRING) AS name, CAST(amount AS DECIMAL(10, 2)) AS amount, "
        "ds AS ds, CAST(only_a AS INT) AS only_a FROM db.a")
    assert render("@UNION(@flag, db.a, db.b)", variables={"flag": True}) == render("@UNION(db.a, db.b)")


def test_union_in_a_subquery_and_a_cte() -> None:
    assert render("SELECT id FROM (@UNION('all', db.a, db.c)) AS u") == (
        f"SELECT id FROM ({A_AND_B.format('a')} UNION ALL {A_AND_B.format('c')}) AS u")
    assert render("WITH u AS (@UNION('all', db.a, db.c)) SELECT * FROM u").endswith("SELECT id, name, ds FROM u")


def test_union_output_columns_are_typed() -> None:
    columns = output_columns(make_model("@UNION('all', db.a, db.b)"), EMPTY, {}, SCHEMAS)
    assert columns == {"id": "INT", "name": "STRING", "ds": "DATE"}


def test_union_while_dependencies_are_discovered_reads_every_table() -> None:
    with discovering_dependencies():
        assert MacroEvaluator().expand("@UNION('distinct', db.a, db.b)") == \
            "SELECT * FROM db.a UNION SELECT * FROM db.b"


def test_query_macros_as_the_query_of_models_in_a_project(tmp_path: Path) -> None:
    """A model's query may be a query macro; its parents are found before their columns are known."""
    from project_builder import write_project

    from mesh_dagster.core.project.project import load_project

    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL, columns (id INT, v STRING));\nSELECT 1 AS id, 'x' AS v\n",
        "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT CAST(2 AS INT) AS id, 'y' AS v, 3 AS w\n",
        "models/u.sql": "MODEL (name s.u, kind VIEW);\n@UNION('all', s.a, s.b)\n",
        "models/w.sql": "MODEL (name s.w, kind VIEW);\n@WITH(TRUE) c AS (SELECT id FROM s.u) SELECT id FROM c\n",
        "models/d.sql": "MODEL (name s.d, kind VIEW);\n@DEDUPLICATE(s.u, [id], ['v DESC'])\n",
    })
    project = load_project(root, use_cache=False)
    assert project.parents("s.u") == ["s.a", "s.b"]
    assert project.columns("s.u") == {"id": "INT", "v": "STRING"}
    assert project.parents("s.w") == project.parents("s.d") == ["s.u"]
    assert project.columns("s.d") == {"id": "INT", "v": "STRING"}


@pytest.mark.parametrize(("query", "message"), [
    ("@UNION('bad', db.a, db.b)", "@UNION: the type must be 'ALL' or 'DISTINCT', got 'bad'"),
    ("@UNION('all')", "@UNION needs at least one table"),
    ("@UNION()", "@UNION needs at least one table"),
    ("@UNION('all', db.a, db.unknown)", "@UNION: the columns of db.unknown are not known"),
    ("@UNION('all', db.a, 1 + 1)", "@UNION: expected a table name, got `1 \\+ 1`"),
    ("@UNION('all', db.a, kind := 'x')", "@UNION takes positional arguments only"),
])
def test_union_errors(query: str, message: str) -> None:
    fails(query, message)


def test_union_without_a_shared_column() -> None:
    fails("@UNION('all', db.a, db.d)", "@UNION: db.a, db.d have no column in common \\(same name and type\\)",
          schemas={**SCHEMAS, "db.d": {"other": "INT", "id": "STRING"}})


# -- @DATE_SPINE -----------------------------------------------------------------------------------


def spine(part: str, start: str, end: str, step: str) -> str:
    return (f"SELECT CAST(_exploded.date_{part} AS DATE) AS date_{part} FROM (SELECT EXPLODE(SEQUENCE("
            f"CAST('{start}' AS DATE), CAST('{end}' AS DATE), INTERVAL {step})) AS date_{part}) AS _exploded")


@pytest.mark.parametrize(("part", "step"), [
    ("day", "'1' DAY"), ("week", "'1' WEEK"), ("month", "'1' MONTH"), ("quarter", "'3' MONTH"), ("year", "'1' YEAR"),
])
def test_date_spine_steps_by_the_datepart(part: str, step: str) -> None:
    assert render(f"@DATE_SPINE('{part.upper()}', '2024-01-01', '2024-12-31')") == \
        spine(part, "2024-01-01", "2024-12-31", step)


def test_date_spine_in_a_cte_with_date_macros_and_typed_output() -> None:
    sql = render("WITH d AS (@DATE_SPINE('day', @start_ds, @end_date)) SELECT * FROM d",
                 start=datetime(2024, 2, 1, tzinfo=UTC), end=datetime(2024, 2, 4, tzinfo=UTC))
    assert sql == f"WITH d AS ({spine('day', '2024-02-01', '2024-02-03', chr(39) + '1' + chr(39) + ' DAY')}) " \
                  "SELECT date_day FROM d"
    assert output_columns(make_model("@DATE_SPINE('month', '2024-01-01', '2024-03-01')"), EMPTY, {}, {}) == \
        {"date_month": "DATE"}


@pytest.mark.parametrize("dialect", ["duckdb", "snowflake", "postgres", "bigquery"])
def test_date_spine_in_other_dialects_is_the_same_spark_sql(dialect: str) -> None:
    assert render("@DATE_SPINE('week', '2024-01-01', '2024-02-01')", dialect=dialect) == \
        spine("week", "2024-01-01", "2024-02-01", "'1' WEEK")


@pytest.mark.parametrize(("query", "message"), [
    ("@DATE_SPINE('hour', '2024-01-01', '2024-01-02')",
     "@DATE_SPINE: datepart must be one of 'day', 'week', 'month', 'quarter', 'year', got 'hour'"),
    ("@DATE_SPINE('day', '2024-02-01', '2024-01-01')", "@DATE_SPINE: start_date 2024-02-01 is after end_date 2024-01-01"),
    ("@DATE_SPINE('day', '01/02/2024', '2024-01-05')",
     "@DATE_SPINE: argument 'start_date' expected date \\('YYYY-MM-DD'\\), got `'01/02/2024'`"),
    ("@DATE_SPINE('day', '2024-01-01', ds)", "@DATE_SPINE: argument 'end_date' expected date"),
    ("@DATE_SPINE('day', '2024-01-01')", "@DATE_SPINE is missing argument 'end_date'"),
    ("@DATE_SPINE(1, '2024-01-01', '2024-01-02')", "@DATE_SPINE: datepart must be one of"),
])
def test_date_spine_errors(query: str, message: str) -> None:
    fails(query, message)


# -- @PIVOT ----------------------------------------------------------------------------------------


def test_pivot_defaults() -> None:
    assert render("SELECT d, @PIVOT(status, ['cancelled', 'completed']) FROM t GROUP BY 1") == (
        "SELECT d, SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END) AS `cancelled`, "
        "SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS `completed` FROM t GROUP BY 1")


def test_pivot_options() -> None:
    sql = render("SELECT @PIVOT(status, [1, 2], agg := 'MAX', cmp := '>=', prefix := 's_', suffix := '_n', "
                 "then_value := amount, else_value := NULL, quote := FALSE, distinct := TRUE) FROM t")
    assert sql == ("SELECT MAX(DISTINCT CASE WHEN status >= 1 THEN amount ELSE NULL END) AS s_1_n, "
                   "MAX(DISTINCT CASE WHEN status >= 2 THEN amount ELSE NULL END) AS s_2_n FROM t")
    assert render("SELECT @PIVOT(s, ['a'], FALSE, 'count') FROM t") == \
        "SELECT COUNT(CASE WHEN s = 'a' THEN 1 ELSE 0 END) FROM t"
    assert render("SELECT @PIVOT(s, @values, cmp := 'like') FROM t", variables={"values": ["a%"]}) == \
        "SELECT SUM(CASE WHEN s LIKE 'a%' THEN 1 ELSE 0 END) AS `a%` FROM t"


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT @PIVOT(s, [])", "@PIVOT needs at least one value to pivot on"),
    ("SELECT @PIVOT(s, ['a'], cmp := 'DROP')", "@PIVOT: cmp must be a comparison operator \\(.*\\), got 'DROP'"),
    ("SELECT @PIVOT(s, ['a'], agg := 'SUM(x); DROP')", "@PIVOT: agg must be the name of an aggregate function"),
    ("SELECT @PIVOT(s, ['a'], quote := 'maybe')", "@PIVOT: argument 'quote' expected bool, got `'maybe'`"),
    ("SELECT @PIVOT(s, ['a'], then_value := (1 +))",
     "@PIVOT wrote `SUM\\(CASE WHEN s = 'a' THEN \\(1 \\+\\) ELSE 0 END\\)`, which is not valid SQL"),
    ("SELECT @PIVOT(s, ['a'], bogus := 1)", "@PIVOT has no argument 'bogus'"),
    ("SELECT @PIVOT(s)", "@PIVOT is missing argument 'values'"),
])
def test_pivot_errors(query: str, message: str) -> None:
    fails(query, message)


def test_pivot_that_writes_invalid_sql() -> None:
    fails("SELECT @PIVOT(s, ['a'], then_value := 'x' 'y' 'z' FROM) FROM t", "@PIVOT wrote `SUM\\(CASE WHEN")


# -- @DEDUPLICATE ----------------------------------------------------------------------------------


def test_deduplicate_keeps_the_first_row_per_partition_without_a_helper_column() -> None:
    sql = render("@DEDUPLICATE(db.c, [id, CAST(ds AS DATE)], ['ds DESC NULLS FIRST', 'name'])")
    assert sql == ("SELECT id, ds, name FROM (SELECT id, ds, name, ROW_NUMBER() OVER (PARTITION BY id, "
                   "CAST(ds AS DATE) ORDER BY ds DESC NULLS FIRST, name) AS _w FROM db.c) AS _t WHERE _w = 1")
    assert output_columns(make_model("@DEDUPLICATE(db.c, [id], ['ds'])"), EMPTY, {}, SCHEMAS) == \
        {"id": "INT", "ds": "DATE", "name": "STRING"}


def test_deduplicate_a_cte_with_keyword_arguments() -> None:
    sql = render("WITH r AS (SELECT id, name FROM db.c), d AS (@DEDUPLICATE(r, partition_by := [id], "
                 "order_by := [name])) SELECT * FROM d")
    assert sql == ("WITH r AS (SELECT id, name FROM db.c), d AS (SELECT id, name FROM (SELECT id, name, ROW_NUMBER() "
                   "OVER (PARTITION BY id ORDER BY name) AS _w FROM r) AS _t WHERE _w = 1) SELECT id, name FROM d")


def test_deduplicate_as_written_before_rendering() -> None:
    assert MacroEvaluator("duckdb").expand("@DEDUPLICATE(t, [a], ['b desc'])") == \
        "SELECT * FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC) = 1"


@pytest.mark.parametrize(("query", "message"), [
    ("@DEDUPLICATE(db.c, [id])", "@DEDUPLICATE is missing argument 'order_by'"),
    ("@DEDUPLICATE(db.c, [], ['ds'])", "@DEDUPLICATE: partition_by needs at least one column"),
    ("@DEDUPLICATE(db.c, [id], [])", "@DEDUPLICATE: order_by needs at least one column"),
    ("@DEDUPLICATE(1 + 1, [id], ['ds'])", "@DEDUPLICATE: relation must be a table or CTE name, got `1 \\+ 1`"),
    ("@DEDUPLICATE(db.c, [id], ['ds sideways ('])", "@DEDUPLICATE: order_by item 'ds sideways \\(' is not an ORDER BY"),
])
def test_deduplicate_errors(query: str, message: str) -> None:
    fails(query, message)


# -- @HAVERSINE_DISTANCE ---------------------------------------------------------------------------

HAVERSINE = ("7922 * ASIN(SQRT((POWER(SIN(RADIANS((lat2 - lat1) / 2)), 2)) + (COS(RADIANS(lat1)) * "
             "COS(RADIANS(lat2)) * POWER(SIN(RADIANS((lon2 - lon1) / 2)), 2)))) * {} AS d")


def test_haversine_distance_in_miles_and_km() -> None:
    assert render("SELECT @HAVERSINE_DISTANCE(lat1, lon1, lat2, lon2) AS d") == "SELECT " + HAVERSINE.format("1.0")
    assert render("SELECT @HAVERSINE_DISTANCE(lat1, lon1, lat2, lon2, 'KM') AS d") == \
        "SELECT " + HAVERSINE.format("1.60934")
    assert "RADIANS(((b + 1) - a) / 2)" in render("SELECT @HAVERSINE_DISTANCE(a, x, b + 1, y, unit := 'mi') AS d")


def test_haversine_distance_errors() -> None:
    fails("SELECT @HAVERSINE_DISTANCE(a, b, c, d, 'furlong')", "@HAVERSINE_DISTANCE: unit must be 'mi' or 'km'")
    fails("SELECT @HAVERSINE_DISTANCE(a, b, c)", "@HAVERSINE_DISTANCE is missing argument 'lon2'")


# -- @SQL and @RESOLVE_TEMPLATE --------------------------------------------------------------------


def test_sql_expands_the_macros_inside_its_text() -> None:
    assert render("SELECT @SQL('a + 1') AS s FROM t") == "SELECT a + 1 AS s FROM t"
    assert render("SELECT @SQL('@col * @n') AS s FROM t", variables={"col": "price", "n": 2}) == \
        "SELECT 'price' * 2 AS s FROM t"
    assert render("SELECT @SQL(@'@{col}_usd') FROM t", variables={"col": "price"}) == "SELECT price_usd FROM t"
    assert render("SELECT * FROM t WHERE @SQL('x > 1', into := 'Condition')") == "SELECT * FROM t WHERE x > 1"


def test_sql_errors() -> None:
    fails("SELECT @SQL('a', into := 'Nonsense')", "@SQL: into must name a sqlglot expression type")
    fails("SELECT @SQL('SELECT (', into := 'Select')", "@SQL: `SELECT \\(` is not a Select")
    fails("SELECT @SQL(a + 1)", "@SQL: argument 'sql' expected str")


def test_resolve_template_fills_in_the_table_the_model_writes() -> None:
    ctx = dict(this_model="mesh__db.db__x__123", runtime_stage="evaluating")
    assert render("SELECT @RESOLVE_TEMPLATE('s3://w/@{catalog_name}/@{schema_name}/@{table_name}') AS l", **ctx) == \
        "SELECT 's3://w/spark_catalog/mesh__db/db__x__123' AS l"
    assert render("SELECT * FROM @RESOLVE_TEMPLATE('@{schema_name}.@{table_name}$files', mode := 'table')", **ctx) \
        == "SELECT * FROM mesh__db.`db__x__123$files`"
    assert render("SELECT @RESOLVE_TEMPLATE('@{table_name}-@{v}') AS l", variables={"v": 3}, **ctx) == \
        "SELECT 'db__x__123-3' AS l"


def test_resolve_template_errors() -> None:
    fails("SELECT @RESOLVE_TEMPLATE('x', mode := 'view')", "@RESOLVE_TEMPLATE: mode must be 'literal' or 'table'")
    fails("SELECT * FROM @RESOLVE_TEMPLATE('a.b.c.d', mode := 'table')",
          "@RESOLVE_TEMPLATE: 'a.b.c.d' is not a table name")
    fails("SELECT @RESOLVE_TEMPLATE('@{nope}')", "Macro variable '@nope' is undefined")


# -- clause operators ------------------------------------------------------------------------------


def test_clause_operators_write_their_clause_when_the_condition_holds() -> None:
    sql = render("SELECT a, COUNT(*) AS n FROM t @WHERE(TRUE) a > 1 @GROUP_BY(1 < 2) a @HAVING(@on) n > 1 "
                 "@ORDER_BY('x' = 'x') a @LIMIT(TRUE) 10", variables={"on": True})
    assert sql == "SELECT a, COUNT(*) AS n FROM t WHERE a > 1 GROUP BY a HAVING n > 1 ORDER BY a LIMIT 10"


def test_clause_operators_leave_their_clause_out_when_it_does_not() -> None:
    sql = render("SELECT a, COUNT(*) AS n FROM t @WHERE(FALSE) a > (SELECT MAX(b) FROM u ORDER BY 1) "
                 "@GROUP_BY(FALSE) a, b @HAVING(@on) n > 1 @ORDER_BY(1 > 2) a DESC @LIMIT(FALSE) 10",
                 variables={"on": False})
    assert sql == "SELECT a, COUNT(*) AS n FROM t"
    assert render("SELECT a FROM t @WHERE(FALSE) a = 1 GROUP BY a HAVING COUNT(*) > 1 ORDER BY a LIMIT 5") == \
        "SELECT a FROM t GROUP BY a HAVING COUNT(*) > 1 ORDER BY a LIMIT 5"


def test_a_left_out_clause_ends_with_its_subquery() -> None:
    assert render("SELECT * FROM (SELECT * FROM t @WHERE(FALSE) a = ')' LIMIT 3) AS s WHERE b = 2 UNION ALL "
                  "SELECT * FROM u @WHERE(FALSE) c = 1") == \
        "SELECT * FROM (SELECT * FROM t LIMIT 3) AS s WHERE b = 2 UNION ALL SELECT * FROM u"


def test_join_operator_takes_its_join_type_along() -> None:
    query = "SELECT * FROM t\nLEFT OUTER @JOIN({}) u ON t.a = u.a\nJOIN v ON v.a = t.a\nWHERE t.b = 1"
    assert render(query.format("TRUE")) == \
        "SELECT * FROM t LEFT OUTER JOIN u ON t.a = u.a JOIN v ON v.a = t.a WHERE t.b = 1"
    assert render(query.format("FALSE")) == "SELECT * FROM t JOIN v ON v.a = t.a WHERE t.b = 1"
    assert render("SELECT * FROM t @JOIN(FALSE) u USING (a), w") == "SELECT * FROM t CROSS JOIN w"


def test_with_operator() -> None:
    assert render("@WITH(TRUE) c AS (SELECT 1 AS x) SELECT x FROM c") == "WITH c AS (SELECT 1 AS x) SELECT x FROM c"
    assert render("@WITH(FALSE) c AS (SELECT 1 AS x), d AS (SELECT 2 AS x) SELECT 3 AS x") == "SELECT 3 AS x"


def test_a_left_out_clause_keeps_the_line_numbers() -> None:
    text = MacroEvaluator().expand("SELECT *\nFROM t\n@WHERE(FALSE) a > 1\n  AND b\nLIMIT 1")
    assert text == "SELECT *\nFROM t\n\n\nLIMIT 1"
    with pytest.raises(ModelError, match=r"^models/x\.sql:14: "):
        render("SELECT *\nFROM t\n@WHERE(FALSE) a > 1\n  AND b\nLIMIT (1")


def test_clause_operator_errors() -> None:
    fails("SELECT * FROM t @WHERE(a > 1) b", "Cannot evaluate `a > 1` at render time")
    fails("SELECT * FROM t @WHERE() b", "@WHERE is missing argument 'condition'")
    misplaced = "@WHERE\\(\\.\\.\\.\\) is a clause operator: write it where its clause starts"
    fails("SELECT @EACH([1], x -> @WHERE(TRUE))", misplaced)
    fails("SELECT @STAR(@WHERE(TRUE))", misplaced)
    fails("SELECT * FROM t @GROUP_BY(TRUE, 1) a", "@GROUP_BY takes at most 1 arguments, got 2")
