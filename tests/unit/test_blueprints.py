"""Blueprints (SQLMesh's `blueprints`): one model file, one model per blueprint; in SQL and Python.

Expectations from SQLMesh's documentation: the name uses a blueprint variable (`@{customer}`,
`@customer`), the variables are `@name`, `@{name}` and `@BLUEPRINT_VAR('name', default)` in the
query and the properties, blueprint variables shadow config variables of the same name, each
generated model is an ordinary model (its own snapshot and fingerprint).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.sql.renderer import RenderContext, render_sql
from mesh_dagster.state.store import StateStore

CONFIG = "model_defaults:\n  dialect: spark\n  start: 2020-01-01\nvariables:\n  factor: 99\n  region: eu\n"
TEMPLATE = """MODEL (
  name @{customer}.orders,
  kind FULL,
  owner @owner,
  blueprints (
    (customer := 'acme', factor := 1, owner := 'ann'),
    (customer := globex, factor := 2, owner := 'bob')
  )
);

SELECT @factor AS factor, @BLUEPRINT_VAR('customer') AS customer, @BLUEPRINT_VAR('other', 'none') AS other,
  @VAR('factor') AS global_factor, '@{customer}' AS literal, @region AS region
"""
CHILD = "MODEL (name report.sushi_@customer, blueprints ((customer := acme), (customer := globex)));\n" \
        "SELECT * FROM @{customer}.orders\n"


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    return write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}", files, CONFIG)


def _refused(root: Path, *fragments: str) -> None:
    with pytest.raises(MeshError) as e:
        load_project(root, use_cache=False)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_each_blueprint_is_a_model_with_its_values(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, {"models/orders.sql": TEMPLATE, "models/child.sql": CHILD}))
    assert sorted(project.models) == ["acme.orders", "globex.orders", "report.sushi_acme", "report.sushi_globex"]
    acme, globex = project.models["acme.orders"], project.models["globex.orders"]
    assert (acme.owner, globex.owner) == ("ann", "bob")  # properties take the blueprint's values
    assert (acme.line, acme.query_line, acme.line_of("owner")) == (1, 11, 4)  # lines as written
    assert project.parents("report.sushi_globex") == ["globex.orders"]
    rendered = {name: render_sql(project.models[name], RenderContext(variables=project.variables), project.macros)
                for name in ("acme.orders", "globex.orders")}
    # the blueprint shadows the config variable `factor`; @VAR reads the config's; strings are not templates
    assert rendered["acme.orders"] == ("SELECT 1 AS factor, 'acme' AS customer, 'none' AS other, 99 AS global_factor, "
                                       "'@{customer}' AS literal, 'eu' AS region")
    assert rendered["globex.orders"].startswith("SELECT 2 AS factor, globex AS customer")  # an identifier, as written


def test_each_generated_model_has_its_own_fingerprint_and_changes_alone(tmp_path: Path) -> None:
    root = _project(tmp_path, {"models/orders.sql": TEMPLATE})
    snapshots = build_snapshots(load_project(root, use_cache=False))
    assert snapshots["acme.orders"].fingerprint != snapshots["globex.orders"].fingerprint
    with StateStore(f"sqlite:///{tmp_path}/state.db") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02"), state)
        path = root / "models/orders.sql"
        path.write_text(path.read_text().replace("factor := 2", "factor := 3"))
        plan = build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-02")
    assert plan.directly_modified == ["globex.orders"] and "acme.orders" not in plan.backfills


def test_blueprint_models_load_the_same_from_the_cache(tmp_path: Path) -> None:
    root = _project(tmp_path, {"models/orders.sql": TEMPLATE, "models/child.sql": CHILD})
    first = load_project(root)
    again = load_project(root)
    assert first.models == again.models and first.dag.parents == again.dag.parents
    path = root / "models/orders.sql"
    path.write_text(path.read_text().replace("factor := 2", "factor := 'two'"))
    assert load_project(root).columns("globex.orders")["factor"] == "STRING"  # not the cached INT


def test_blueprint_mistakes_are_refused_at_their_line(tmp_path: Path) -> None:
    no_variable = TEMPLATE.replace("name @{customer}.orders", "name s.orders")
    _refused(_project(tmp_path, {"models/o.sql": no_variable}), "models/o.sql:2:", "must use a blueprint variable")
    same_name = TEMPLATE.replace("customer := globex", "customer := acme")
    _refused(_project(tmp_path, {"models/o.sql": same_name}), "models/o.sql:7:", "acme.orders again",
             "blueprint at line 6")
    missing = TEMPLATE.replace("factor := 2, ", "")
    _refused(_project(tmp_path, {"models/o.sql": missing}), "models/o.sql:7:", "no value to factor")
    unknown_macro = "MODEL (name @{c}.t,\n  blueprints @nowhere());\nSELECT 1 AS x\n"
    _refused(_project(tmp_path, {"models/o.sql": unknown_macro}), "models/o.sql:2:", "Unknown macro @nowhere")
    nothing = {"models/o.sql": unknown_macro.replace("@nowhere()", "@empty()"),
               "macros/gen.py": "from mesh_dagster import macro\n\n\n@macro()\ndef empty(evaluator):\n    return 'x'\n"}
    _refused(_project(tmp_path, nothing), "models/o.sql:2:", "A blueprint is written")
    malformed = TEMPLATE.replace("(customer := 'acme', factor := 1, owner := 'ann')", "acme")
    _refused(_project(tmp_path, {"models/o.sql": malformed}), "models/o.sql:6:", "A blueprint is written")
    clash = {"models/o.sql": TEMPLATE, "models/other.sql": "MODEL (name acme.orders);\nSELECT 1 AS x\n"}
    _refused(_project(tmp_path, clash), "Duplicate model name 'acme.orders'")


PYTHON = '''import pandas as pd

from mesh_dagster import model


@model(
    "@{customer}_py.totals",
    kind="FULL",
    description="totals of @{customer}",
    blueprints=[{"customer": "acme", "factor": 1}, {"customer": "globex", "factor": 10}],
    columns={"customer": "string", "value": "int"},
)
def execute(context, start, end, execution_time, factor, **kwargs):
    return pd.DataFrame({"customer": [context.blueprint_var("customer")], "value": [factor * 2]})
'''


GENERATOR = '''from mesh_dagster import macro


@macro()
def gen_blueprints(evaluator):
    return [f"(customer := '{name}', factor := {i})" for i, name in enumerate(["north", "south"], start=1)]
'''


def test_blueprints_given_by_a_macro(tmp_path: Path) -> None:
    """`blueprints @gen_blueprints()`: the project's macro returns the blueprints as SQL text."""
    model = TEMPLATE.replace("""blueprints (
    (customer := 'acme', factor := 1, owner := 'ann'),
    (customer := globex, factor := 2, owner := 'bob')
  )""", "blueprints @gen_blueprints()").replace("owner @owner,", "owner @{customer}_team,")
    project = load_project(_project(tmp_path, {"models/o.sql": model, "macros/gen.py": GENERATOR}), use_cache=False)
    assert sorted(project.models) == ["north.orders", "south.orders"]
    assert project.models["south.orders"].blueprint_variables == {"customer": "'south'", "factor": "2"}
    assert project.models["south.orders"].owner == "south_team"


def test_python_blueprints_give_the_function_their_values(tmp_path: Path) -> None:
    from datetime import datetime

    from mesh_dagster.execution.evaluate.python_evaluation import python_query
    from tests.execution.fake_engine import FakeEngine

    project = load_project(_project(tmp_path, {"models/totals.py": PYTHON}), use_cache=False)
    assert sorted(project.models) == ["acme_py.totals", "globex_py.totals"]
    assert project.models["globex_py.totals"].description == "totals of globex"
    engine = FakeEngine()
    for name in sorted(project.models):
        day = datetime(2020, 1, 1)
        with python_query(engine, project.models[name], {}, project.variables, day, day, day):
            pass
    frames = [frame.to_dict("records") for chunks in engine.frames.values() for frame in chunks]
    assert frames == [[{"customer": "acme", "value": 2}], [{"customer": "globex", "value": 20}]]  # not the config's 99
    snapshots = build_snapshots(project)
    assert snapshots["acme_py.totals"].fingerprint.data_hash != snapshots["globex_py.totals"].fingerprint.data_hash


def test_python_blueprint_mistakes_are_refused_at_their_line(tmp_path: Path) -> None:
    no_variable = PYTHON.replace('"@{customer}_py.totals"', '"s.totals"')
    _refused(_project(tmp_path, {"models/t.py": no_variable}), "models/t.py:7:", "must use a blueprint variable")
    same = PYTHON.replace('"customer": "globex"', '"customer": "acme"')
    _refused(_project(tmp_path, {"models/t.py": same}), "models/t.py:10:", "Two blueprints generate")
    not_list = PYTHON.replace('blueprints=[{"customer": "acme", "factor": 1}, {"customer": "globex", "factor": 10}]',
                              'blueprints={"customer": "acme"}')
    _refused(_project(tmp_path, {"models/t.py": not_list}), "models/t.py:10:", "blueprints is a list of dicts")
