"""The SQL that @UNION, @DATE_SPINE, @PIVOT and @DEDUPLICATE render runs on Spark and returns the
rows they promise (the rendering itself is tested without Spark in tests/unit/test_macro_library.py)."""

from __future__ import annotations

from datetime import date

import pytest

from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_sql
from mesh_dagster.engine.adapter import SparkEngine


@pytest.fixture
def relations(engine: SparkEngine, unique_schema: str) -> dict[str, dict[str, str | None]]:
    """Views over literal rows (nothing to write) and their columns as Spark reports them."""
    s = unique_schema
    engine.catalog.create_schema(s)
    views = {
        "a": "SELECT CAST(id AS INT) AS id, name, CAST(v AS INT) AS v FROM VALUES (1, 'x', 10), (2, 'y', 20) AS t(id, name, v)",
        "b": "SELECT name, CAST(id AS INT) AS id, v FROM VALUES ('y', 2, 'twenty'), ('z', 3, 'thirty') AS t(name, id, v)",
        "events": "SELECT CAST(id AS INT) AS id, status, CAST(ts AS INT) AS ts FROM VALUES (1, 'open', 1), "
                  "(1, 'closed', 2), (1, 'open', 3), (2, 'open', 1) AS t(id, status, ts)",
    }
    for name, select in views.items():
        engine.session.execute(f"CREATE VIEW {s}.{name} AS {select}")
    return {f"{s}.{name}": dict(engine.catalog.columns(f"{s}.{name}")) for name in views}


def rendered(query: str, schemas: dict[str, dict[str, str | None]]) -> str:
    model = Model(name="m.x", kind=ModelKind(name=KindName.FULL), dialect="spark", query=query,
                  path="models/x.sql", query_line=1)
    return render_sql(model, RenderContext(schemas=schemas), MacroRegistry())


def test_union_and_deduplicate(engine: SparkEngine, unique_schema: str, relations) -> None:
    s = unique_schema
    # v is INT in a and STRING in b: left out; the row ('y', 2) is in both tables.
    union = rendered(f"SELECT * FROM (@UNION('distinct', {s}.a, {s}.b)) AS u ORDER BY id", relations)
    assert engine.catalog.query_columns(union) == {"id": "int", "name": "string"}
    assert engine.session.fetchall(union) == [(1, "x"), (2, "y"), (3, "z")]
    assert len(engine.session.fetchall(rendered(f"@UNION('all', {s}.a, {s}.b)", relations))) == 4

    latest = rendered(f"@DEDUPLICATE({s}.events, [id], ['ts DESC'])", relations)
    assert engine.catalog.query_columns(latest) == {"id": "int", "status": "string", "ts": "int"}  # no helper column
    assert sorted(engine.session.fetchall(latest)) == [(1, "open", 3), (2, "open", 1)]


def test_date_spine_and_pivot(engine: SparkEngine, unique_schema: str, relations) -> None:
    weeks = engine.session.fetchall(rendered("@DATE_SPINE('week', '2024-01-01', '2024-01-29')", relations))
    assert weeks == [(date(2024, 1, d),) for d in (1, 8, 15, 22, 29)]
    quarters = rendered("WITH q AS (@DATE_SPINE('quarter', '2024-01-01', '2024-12-31')) SELECT * FROM q", relations)
    assert engine.catalog.query_columns(quarters) == {"date_quarter": "date"}
    assert engine.session.fetchall(quarters) == [(date(2024, m, 1),) for m in (1, 4, 7, 10)]

    pivot = rendered(f"SELECT id, @PIVOT(status, ['open', 'closed'], prefix := 'n_') FROM {unique_schema}.events "
                     "GROUP BY id ORDER BY id", relations)
    assert list(engine.catalog.query_columns(pivot)) == ["id", "n_open", "n_closed"]
    assert engine.session.fetchall(pivot) == [(1, 2, 1), (2, 1, 0)]
