"""A multi-repo project in Dagster: `definitions(first, repos=[second])` is one code location with
every repository's models as assets, materialized through Dagster's own execution on the test
process's Spark session, each model rendered with its own repository's macro."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.dagster import definitions
from mesh_dagster.dagster.code_location import ProjectLoadError

pytestmark = pytest.mark.spark


def _macro(value: str) -> str:
    return f"from sqlmesh import macro\n\n\n@macro()\ndef dup(evaluator):\n    return \"'{value}'\"\n"


def _repos(tmp_path: Path, schema: str) -> tuple[Path, Path]:
    first = write_project(tmp_path / "repo_1", {
        "models/a.sql": f"MODEL (name {schema}.a, kind FULL);\nSELECT 1 AS col_a, @dup() AS who\n",
        "macros/__init__.py": _macro("repo_1"),
    }, CONFIG + "project: repo_1\n")
    second = write_project(tmp_path / "repo_2", {
        "models/c.sql": f"MODEL (name {schema}.c, kind FULL);\nSELECT col_a, who, @dup() AS mine FROM {schema}.a\n",
        "macros/__init__.py": _macro("repo_2"),
    }, CONFIG + "project: repo_2\n")
    return first, second


@pytest.fixture
def schema(spark):
    name = f"mr_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        spark.sql(f"DROP SCHEMA IF EXISTS {s} CASCADE")


def test_every_repository_s_models_are_assets_of_one_code_location(tmp_path: Path, schema: str, spark) -> None:
    first, second = _repos(tmp_path, schema)
    defs = definitions(first, "prod", repos=[second], shared_spark=False)
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {f"{schema}/a", f"{schema}/c"} <= keys
    instance = dg.DagsterInstance.ephemeral()
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    promoted = defs.resolve_job_def("promote_prod").execute_in_process(instance=instance, raise_on_error=False)
    assert promoted.success
    rows = [row.asDict() for row in spark.sql(f"SELECT who, mine FROM {schema}.c").collect()]
    assert rows == [{"who": "repo_1", "mine": "repo_2"}]  # each repository's own @dup


def test_a_git_watched_multi_repo_project_is_refused_at_load(tmp_path: Path) -> None:
    first, second = _repos(tmp_path, "mr_git")
    (first / "config.yaml").write_text((first / "config.yaml").read_text() + "git:\n  repo: .\n  protected: []\n")
    with pytest.raises(ProjectLoadError, match="`git:` watches one repository, and this project has several"):
        definitions(first, "prod", repos=[second], shared_spark=False)
