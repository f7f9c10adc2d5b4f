"""Column lineage (core/sql/lineage.py, core/project/lineage.py): each output column's upstream
columns from the rendered query, through CTEs, subqueries, joins, `*`, EMBEDDED models and macros;
Python models from declared `columns` and `depends_on` only; seeds and external tables read nothing."""

from __future__ import annotations

import pytest
import sqlglot
from project_builder import write_project

from mesh_dagster.context import ColumnRef, Context
from mesh_dagster.core.errors import MeshError, ModelError
from mesh_dagster.core.sql.lineage import query_lineage

SEED_CSV = "id,item_id,price,ds\n1,10,2.5,2020-01-01\n2,20,3.0,2020-01-02\n"
FILES = {
    "seeds/orders.csv": SEED_CSV,
    "models/orders.sql": """
        MODEL (name s.orders, kind SEED (path '../seeds/orders.csv'),
               columns (id INT, item_id INT, price DOUBLE, ds DATE));
    """,
    "models/items.sql": """
        MODEL (name s.items, kind FULL);
        SELECT CAST(item_id AS INT) AS item_id, 'x' AS name FROM s.orders
    """,
    "models/cte_join.sql": """
        MODEL (name s.cte_join, kind FULL);
        WITH o AS (SELECT id, item_id, price * 2 AS doubled FROM s.orders)
        SELECT o.id, i.name, o.doubled + 1 AS total, 7 AS seven
        FROM o JOIN s.items AS i ON o.item_id = i.item_id
    """,
    "models/sub.sql": """
        MODEL (name s.sub, kind FULL);
        SELECT q.k, q.n, (SELECT MAX(price) FROM s.orders) AS top
        FROM (SELECT id AS k, name AS n FROM s.cte_join) AS q
    """,
    "models/star.sql": """
        MODEL (name s.star, kind FULL);
        SELECT *, id + 1 AS next_id FROM s.cte_join
    """,
    "models/star_cte.sql": """
        MODEL (name s.star_cte, kind VIEW);
        WITH j AS (SELECT o.*, i.name FROM s.orders AS o JOIN s.items AS i ON o.item_id = i.item_id)
        SELECT * FROM j
    """,
    "models/emb.sql": """
        MODEL (name s.emb, kind EMBEDDED);
        SELECT id AS order_id, price AS amount FROM s.orders
    """,
    "models/emb2.sql": """
        MODEL (name s.emb2, kind EMBEDDED);
        SELECT order_id, amount * 100 AS cents FROM s.emb
    """,
    "models/reads_emb.sql": """
        MODEL (name s.reads_emb, kind FULL);
        SELECT e.order_id, e.cents, i.name FROM s.emb2 AS e JOIN s.items AS i ON e.order_id = i.item_id
    """,
    "macros/cols.py": """
        from mesh_dagster import macro

        @macro()
        def doubled(evaluator, column):
            return f"{column} * 2"
    """,
    "models/macro.sql": """
        MODEL (name s.macro, kind FULL);
        @DEF(factor, 3);
        SELECT @doubled(price) AS twice, price * @factor AS thrice, @STAR(s.orders, exclude := [price, ds]) FROM s.orders
    """,
    "models/py_declared.py": """
        import pandas as pd
        from mesh_dagster import model

        @model("s.py_declared", columns={"id": "int", "name": "string", "score": "double"},
               depends_on=["s.orders", "s.items"])
        def execute(context, start, end, execution_time):
            return pd.DataFrame({"id": [1], "name": ["a"], "score": [1.0]})
    """,
    "models/py_undeclared.py": """
        import pandas as pd
        from mesh_dagster import model

        @model("s.py_undeclared", columns={"id": "int"})
        def execute(context, start, end, execution_time):
            context.resolve_table("s.orders")
            return pd.DataFrame({"id": [1]})
    """,
}


def refs(*pairs: str) -> tuple[ColumnRef, ...]:
    return tuple(sorted(ColumnRef(*p.rsplit(".", 1)) for p in pairs))


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Context:
    root = write_project(tmp_path_factory.mktemp("lineage") / "p", FILES)
    ctx = Context(root)
    yield ctx
    ctx.close()


def test_ctes_joins_and_literals(context):
    assert context.column_lineage("s.cte_join") == {
        "id": refs("s.orders.id"), "name": refs("s.items.name"), "total": refs("s.orders.price"), "seven": ()}


def test_subqueries_and_scalar_subqueries(context):
    assert context.column_lineage("s.sub") == {
        "k": refs("s.cte_join.id"), "n": refs("s.cte_join.name"), "top": refs("s.orders.price")}


def test_star_is_expanded_with_the_upstream_models_columns(context):
    assert context.column_lineage("s.star") == {
        "id": refs("s.cte_join.id"), "name": refs("s.cte_join.name"), "total": refs("s.cte_join.total"),
        "seven": refs("s.cte_join.seven"), "next_id": refs("s.cte_join.id")}
    assert context.column_lineage("s.star_cte") == {
        "id": refs("s.orders.id"), "item_id": refs("s.orders.item_id"), "price": refs("s.orders.price"),
        "ds": refs("s.orders.ds"), "name": refs("s.items.name")}


def test_embedded_models_are_looked_through_to_their_sources(context):
    assert context.column_lineage("s.reads_emb") == {
        "order_id": refs("s.orders.id"), "cents": refs("s.orders.price"), "name": refs("s.items.name")}


def test_macros_count_as_rendered(context):
    assert context.column_lineage("s.macro") == {
        "twice": refs("s.orders.price"), "thrice": refs("s.orders.price"),
        "id": refs("s.orders.id"), "item_id": refs("s.orders.item_id")}


def test_seeds_read_nothing_and_a_cast_keeps_its_column(context):
    assert context.column_lineage("s.orders") == {"id": (), "item_id": (), "price": (), "ds": ()}
    assert context.column_lineage("s.items") == {"item_id": refs("s.orders.item_id"), "name": ()}


def test_python_models_only_where_columns_and_depends_on_say_it(context):
    # `id` is in s.orders only, `name` in s.items only; `score` in neither: not known, not guessed
    assert context.column_lineage("s.py_declared") == {"id": refs("s.orders.id"), "name": refs("s.items.name")}
    assert context.column_upstream("s.py_declared", "score") is None
    # no depends_on: what the code reads is not said
    assert context.column_lineage("s.py_undeclared") is None


def test_a_column_both_python_parents_have_is_ambiguous(tmp_path):
    files = {k: v for k, v in FILES.items() if k.startswith(("seeds/", "models/orders", "models/items"))}
    files["models/py.py"] = """
        import pandas as pd
        from mesh_dagster import model

        @model("s.py", columns={"item_id": "int", "id": "int"}, depends_on=["s.orders", "s.items"])
        def execute(context, start, end, execution_time):
            return pd.DataFrame({"item_id": [1], "id": [1]})
    """
    ctx = Context(write_project(tmp_path / "p", files))
    assert ctx.column_lineage("s.py") == {"id": refs("s.orders.id")}


def test_unknown_column_and_model_are_errors_naming_them(context):
    with pytest.raises(ModelError, match=r"Model s.cte_join has no column 'nope' \(its columns: id, name, total"):
        context.column_upstream("s.cte_join", "nope")
    with pytest.raises(MeshError, match="Unknown model 's.nope'"):
        context.column_lineage("s.nope")
    assert context.column_upstream("s__dev.cte_join", "TOTAL") == refs("s.orders.price")


# -- the query alone --------------------------------------------------------------------------------

SCHEMAS = {"db.a": {"id": "INT", "x": "INT"}, "db.b": {"id": "INT", "y": "INT"}, "c.d.e": {"z": "INT"}}


@pytest.mark.parametrize("sql, expected", [
    # the fast path: one plain SELECT
    ("SELECT a.id, a.x + b.y AS s FROM db.a AS a JOIN db.b AS b ON a.id = b.id",
     {"id": ["db.a.id"], "s": ["db.a.x", "db.b.y"]}),
    ("SELECT x, y FROM db.a JOIN db.b ON a.id = b.id", {"x": ["db.a.x"], "y": ["db.b.y"]}),
    # sqlglot: a lateral alias, USING, set operations, names of any depth
    ("SELECT x + 1 AS y, y * 2 AS z FROM db.a", {"y": ["db.a.x"], "z": ["db.a.x"]}),
    ("SELECT * FROM db.a JOIN db.b USING (id)",
     {"id": ["db.a.id", "db.b.id"], "x": ["db.a.x"], "y": ["db.b.y"]}),
    ("SELECT id, x FROM db.a UNION ALL SELECT id, y FROM db.b",
     {"id": ["db.a.id", "db.b.id"], "x": ["db.a.x", "db.b.y"]}),
    ("SELECT a.id, (SELECT MAX(z) FROM c.d.e) AS m FROM db.a AS a", {"id": ["db.a.id"], "m": ["c.d.e.z"]}),
])
def test_query_lineage(sql, expected):
    tree = sqlglot.parse_one(sql, read="spark")
    before = tree.sql()
    found = query_lineage(tree, SCHEMAS)
    assert found == {c: refs(*r) for c, r in expected.items()}
    assert tree.sql() == before  # the caller's tree is left as it was


def test_a_star_over_an_unknown_table_has_no_lineage():
    assert query_lineage(sqlglot.parse_one("SELECT * FROM unknown_t", read="spark"), SCHEMAS) is None


def test_lineage_is_computed_once_per_model(context, monkeypatch):
    import mesh_dagster.core.project.lineage as module

    context.column_lineage("s.sub")
    monkeypatch.setattr(module, "render_query", lambda *a: (_ for _ in ()).throw(AssertionError("rendered again")))
    context.column_lineage("s.sub")


def test_a_plain_selects_lineage_comes_with_loading_and_a_self_reference_is_no_upstream(tmp_path, monkeypatch):
    import mesh_dagster.core.project.lineage as module

    files = {k: v for k, v in FILES.items() if k.startswith(("seeds/", "models/orders", "models/items"))}
    files["models/selfref.sql"] = """
        MODEL (name s.selfref, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), columns (id INT, ds DATE));
        SELECT COALESCE(prev.id, o.id) AS id, o.ds FROM s.orders AS o LEFT JOIN s.selfref AS prev ON o.id = prev.id
        WHERE o.ds BETWEEN @start_ds AND @end_ds
    """
    ctx = Context(write_project(tmp_path / "p", files))
    ctx.project  # noqa: B018 - loaded (and rendered) here
    monkeypatch.setattr(module, "render_query", lambda *a: (_ for _ in ()).throw(AssertionError("rendered again")))
    assert ctx.column_lineage("s.items") == {"item_id": refs("s.orders.item_id"), "name": ()}
    assert ctx.column_lineage("s.selfref") == {"id": refs("s.orders.id"), "ds": refs("s.orders.ds")}


@pytest.mark.parametrize("sql", [
    "SELECT a.id, a.x + b.y AS s, COUNT(DISTINCT b.y) AS n FROM db.a AS a LEFT JOIN db.b AS b ON a.id = b.id GROUP BY 1, 2",
    "SELECT x, y, ROW_NUMBER() OVER (PARTITION BY x ORDER BY y) AS rn FROM db.a JOIN db.b ON a.id = b.id",
    "SELECT CASE WHEN x > 0 THEN 'p' ELSE 'n' END AS sign, 1 AS one FROM db.a",
])
def test_the_fast_path_agrees_with_sqlglots_lineage(sql):
    from mesh_dagster.core.sql.lineage import _sqlglot_lineage, plain_select_lineage

    tree = sqlglot.parse_one(sql, read="spark")
    fast = plain_select_lineage(tree, SCHEMAS)
    assert fast is not None and fast == _sqlglot_lineage(tree, SCHEMAS)
