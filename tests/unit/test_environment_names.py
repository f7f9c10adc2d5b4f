"""Environment names: normalised for schema names, but never silently merged or emptied."""

import pytest

from mesh_dagster.core.config.names import MAX_DATABASE_NAME as MAX_SCHEMA_NAME
from mesh_dagster.core.config.names import (
    EnvironmentNameError,
    check_environment_fits,
    environment_spelling_notice,
    normalize_environment,
    view_name,
    view_schema,
)
from mesh_dagster.core.errors import PlanError


@pytest.mark.parametrize(
    "name, expected",
    [
        ("prod", "prod"),
        ("dev", "dev"),
        ("my_env2", "my_env2"),
        ("my-env", "my_env"),
        ("feature/x", "feature_x"),
        ("Dev", "dev"),
        ("a;drop", "a_drop"),
        ("a drop", "a_drop"),
        (" dev ", "dev"),
    ],
)
def test_names_normalise_to_schema_safe_text(name, expected):
    assert normalize_environment(name) == expected


@pytest.mark.parametrize(
    "name, reason",
    [
        ("", "it is empty"),  # used to mean prod: `mesh plan ""` planned production
        ("   ", "it is empty"),
        ("---", "it has no letter or digit"),
        ("/", "it has no letter or digit"),
        ("PROD", "only 'prod' names the production environment"),
        ("Prod", "only 'prod' names the production environment"),
        (" prod", "only 'prod' names the production environment"),
    ],
)
def test_names_that_cannot_be_used_are_refused(name, reason):
    with pytest.raises(EnvironmentNameError) as e:
        normalize_environment(name)
    assert isinstance(e.value, PlanError)
    assert e.value.reason == reason
    assert str(e.value) == f"Invalid environment name '{name}': {reason}"


def test_view_names_refuse_an_empty_environment_instead_of_using_prod():
    with pytest.raises(EnvironmentNameError):
        view_name("s.a", "")
    with pytest.raises(EnvironmentNameError):
        view_schema("s", "")
    assert view_name("s.a", "prod") == "s.a" and view_name("s.a", "my-env") == "s__my_env.a"


@pytest.mark.parametrize(
    "name, notice",
    [
        ("dev", None),
        ("prod", None),
        ("my-env", "environment 'my-env' is used as 'my_env'"),
        ("Dev", "environment 'Dev' is used as 'dev'"),
        ("a;drop", "environment 'a;drop' is used as 'a_drop'"),
    ],
)
def test_a_name_that_changes_is_announced(name, notice):
    assert environment_spelling_notice(name) == notice


def test_environment_fits_the_metastore_schema_limit():
    schemas = {"s", "sqlmesh_example"}  # the longest schema decides
    room = MAX_SCHEMA_NAME - len("sqlmesh_example__")
    check_environment_fits("e" * room, schemas)
    with pytest.raises(EnvironmentNameError) as e:
        check_environment_fits("e" * (room + 1), schemas)
    message = str(e.value)
    assert f"{room + 1} characters make the schema 'sqlmesh_example__eee" in message
    assert f"{MAX_SCHEMA_NAME + 1} characters long, over the metastore's limit of {MAX_SCHEMA_NAME}" in message
    assert message.endswith(f"use at most {room} characters")
    assert len(message) < 300  # the name is shortened: one readable line


def test_prod_has_no_suffix_to_fit():
    check_environment_fits("prod", {"s" * MAX_SCHEMA_NAME})
    check_environment_fits("dev", set())


def test_every_plan_refuses_an_environment_the_metastore_cannot_hold(tmp_path):
    """Checked inside build_plan, so Dagster's materialize/promote paths refuse it too."""
    from project_builder import write_project

    from mesh_dagster.core.plan.plan import build_plan
    from mesh_dagster.core.project.project import load_project
    from mesh_dagster.state.store import StateStore

    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"})
    with StateStore("sqlite://") as state:
        with pytest.raises(PlanError, match="over the metastore's limit of 128"):
            build_plan(load_project(root, use_cache=False), state, "e" * 126)
        assert build_plan(load_project(root, use_cache=False), state, "e" * 125).environment == "e" * 125
