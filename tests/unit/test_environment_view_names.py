"""A model named like another model's view in an environment (`s__dev.t` beside `s.t`): refused when the
project loads, and a plan whose views would land on another environment's views of other models is refused
before anything is written (issue 34, point 4: `mesh plan dev` replaced `s__dev.t`'s prod data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.config.names import environment_readings, view_schema
from mesh_dagster.core.errors import ModelError, PlanError
from mesh_dagster.core.project.project import load_project

FULL = "MODEL (name {name}, kind FULL);\nSELECT 1 AS x\n"
RULE = "(a schema ending in `__<environment>` holds that environment's views)"


@pytest.mark.parametrize("schema", ["a", "a__b", "a___b", "a__prod", "a__", "x__b__c__d"])
def test_every_reading_of_a_schema_is_an_environments_view_schema(schema: str) -> None:
    readings = environment_readings(schema)
    assert all(view_schema(model_schema, env) == schema for model_schema, env in readings)
    expected = {"a": [], "a__b": [("a", "b")], "a___b": [("a", "_b"), ("a_", "b")], "a__prod": [], "a__": [],
                "x__b__c__d": [("x", "b__c__d"), ("x__b", "c__d"), ("x__b__c", "d")]}
    assert readings == expected[schema]


def test_a_model_named_like_another_models_dev_view_is_refused_at_load(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {
        "models/full.sql": FULL.format(name="sqlmesh_example.full_model"),
        "models/dev_full.sql": "-- a copy\n" + FULL.format(name="sqlmesh_example__dev.full_model"),
    })
    with pytest.raises(ModelError) as e:
        load_project(root)
    assert str(e.value) == (
        "models/dev_full.sql:2: Model sqlmesh_example__dev.full_model has the name of the view environment 'dev' "
        "gives sqlmesh_example.full_model (models/full.sql:1): planning 'dev' would replace one with the other. "
        f"Rename one of them {RULE}")
    assert not (root / ".mesh").exists()  # nothing written, not even the parse cache


def test_a_declared_external_table_named_like_a_view_is_refused_too(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {
        "models/m.sql": FULL.format(name="raw.orders"),
        "external_models.yaml": "- name: raw__feature_x.orders\n  columns:\n    id: int\n",
    })
    with pytest.raises(ModelError, match=r"^external_models.yaml:1: Model raw__feature_x.orders has the name of the "
                                         r"view environment 'feature_x' gives raw.orders \(models/m.sql:1\)"):
        load_project(root)


def test_names_that_no_view_takes_still_load(tmp_path: Path) -> None:
    """Another table in the schema, an EMBEDDED model (no object at all), an external model beside it
    (no views), and `__prod` (prod's views carry no suffix) meet no view."""
    root = write_project(tmp_path / "p", {
        "models/a.sql": FULL.format(name="s.t"),
        "models/b.sql": FULL.format(name="s__dev.other"),
        "models/c.sql": "MODEL (name s__feature.t, kind EMBEDDED);\nSELECT 1 AS x\n",
        "models/d.sql": FULL.format(name="s__prod.t"),
        "models/e.sql": FULL.format(name="raw__dev.orders"),
        "external_models.yaml": "- name: raw.orders\n  columns:\n    id: int\n",
    })
    assert {"s.t", "s__dev.other", "s__feature.t", "s__prod.t", "raw__dev.orders"} <= set(load_project(root).models)


def _applied(root: Path, environment: str) -> None:
    ctx = Context(root)
    try:
        record_plan(ctx.plans.plan(environment, execution_time="2024-01-02"), ctx.state)
    finally:
        ctx.close()


def _environments(root: Path) -> dict[str, list[str]]:
    ctx = Context(root)
    try:
        return {env.name: sorted(env.promoted) for env in ctx.state.environments.get_environments()}
    finally:
        ctx.close()


def test_planning_dev_where_prod_shows_a_model_of_that_name_is_refused(tmp_path: Path) -> None:
    """prod (applied from another branch) shows `s__dev.t`; this branch has `s.t` only: its dev view would
    be prod's `s__dev.t`."""
    root = write_project(tmp_path / "p", {"models/t.sql": FULL.format(name="s__dev.t")})
    _applied(root, "prod")
    (root / "models" / "t.sql").write_text(FULL.format(name="s.t"))
    with pytest.raises(PlanError) as e:
        Context(root).plans.plan("dev", execution_time="2024-01-02")
    assert str(e.value) == (
        "models/t.sql:1: Environment 'dev' would show s.t as the view s__dev.t, where environment 'prod' shows the "
        f"model s__dev.t: rename one of the two models {RULE}")
    assert _environments(root) == {"prod": ["s__dev.t"]}  # no dev was recorded


def test_planning_prod_onto_a_dev_view_is_refused(tmp_path: Path) -> None:
    """The reverse: `dev` shows `s.t` (view `s__dev.t`); a project whose prod would hold a model `s__dev.t`."""
    root = write_project(tmp_path / "p", {"models/t.sql": FULL.format(name="s.t")})
    _applied(root, "dev")
    (root / "models" / "t.sql").write_text(FULL.format(name="s__dev.t"))
    with pytest.raises(PlanError, match=r"^models/t.sql:1: Environment 'prod' would show s__dev.t as the view "
                                        r"s__dev.t, where environment 'dev' shows the model s.t: rename one"):
        Context(root).plans.plan("prod", execution_time="2024-01-02")
    assert _environments(root) == {"dev": ["s.t"]}
    Context(root).plans.plan("other", execution_time="2024-01-02")  # views elsewhere meet nothing
