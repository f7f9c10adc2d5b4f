"""core/sql/renderer.py's `read_rendered`: the load reads a query's output from the parse cache's
tree, left there for the plan's canonical rendering, so a cold plan parses each query once; a
tree rendering would change (a `*` to expand) is the reader's own; a plan releases the cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlglot import exp

from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql import renderer
from mesh_dagster.core.sql.renderer import RenderContext, read_rendered, release_parsed, render_query

EMPTY = MacroRegistry()
SCHEMAS = {"s.parent": {"id": "INT", "value": "DOUBLE"}}


def _model(query: str) -> Model:
    return Model(name="s.child", kind=ModelKind(name=KindName.FULL), dialect="spark", query=query,
                 path="models/x.sql", query_line=1)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    release_parsed()
    seen: list[str] = []
    original = renderer._parse_one

    def counted(text: str, dialect: str) -> exp.Expr | None:
        seen.append(text)
        return original(text, dialect)

    monkeypatch.setattr(renderer, "_parse_one", counted)
    yield seen
    release_parsed()


def test_the_tree_read_at_load_is_the_one_the_plan_renders(parses: list[str]) -> None:
    model = _model("SELECT id, value * 2 AS doubled FROM s.parent -- note")
    ctx = RenderContext(schemas=SCHEMAS)
    names = read_rendered(model, ctx, EMPTY, lambda tree: [p.alias_or_name for p in tree.expressions])
    assert names == ["id", "doubled"]
    canonical = render_query(model, ctx, EMPTY).sql(dialect="spark", comments=False)
    assert canonical == "SELECT id, value * 2 AS doubled FROM s.parent"
    assert len(parses) == 1


def test_a_star_is_expanded_on_a_tree_of_the_readers_own(parses: list[str]) -> None:
    model = _model("SELECT * FROM s.parent")
    ctx = RenderContext(schemas=SCHEMAS)
    names = read_rendered(model, ctx, EMPTY, lambda tree: [p.alias_or_name for p in tree.expressions])
    assert names == ["id", "value"]
    # the expanded tree was the reader's: the next rendering parses the text again, `*` intact
    assert render_query(model, RenderContext(), EMPTY).sql(dialect="spark") == "SELECT * FROM s.parent"
    assert len(parses) == 2


def test_a_mapped_rendering_never_reads_the_shared_tree(parses: list[str]) -> None:
    model = _model("SELECT id FROM s.parent")
    ctx = RenderContext(table_mapping={"s.parent": "db.t"})
    assert read_rendered(model, ctx, EMPTY, lambda tree: tree.sql(dialect="spark")) == \
        "SELECT id FROM db.t AS parent"
    assert render_query(model, RenderContext(), EMPTY).sql(dialect="spark") == "SELECT id FROM s.parent"


def test_release_empties_the_cache(parses: list[str]) -> None:
    model = _model("SELECT id FROM s.parent")
    read_rendered(model, RenderContext(), EMPTY, lambda tree: None)
    release_parsed()
    render_query(model, RenderContext(), EMPTY)
    assert len(parses) == 2
