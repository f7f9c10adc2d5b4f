"""The Spark setting mesh's writes rely on (`spark.sql.sources.partitionOverwriteMode`, which every
session mesh opens sets to `dynamic`) is refused wherever a user could give it, instead of loading
and then being ignored: a dagster-pyspark `PySparkResource`, a gateway's connection `config`."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster_pyspark import PySparkResource
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.dagster import ProjectLoadError, definitions

MODEL = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"}
REASON = "mesh's writes replace exactly the partitions of an interval (dynamic partition overwrite)"


@pytest.mark.parametrize("key", ["spark.sql.sources.partitionOverwriteMode", "spark.sql.sources.PARTITIONOVERWRITEMODE"])
def test_a_pyspark_resource_setting_the_overwrite_mode_is_refused_at_load(tmp_path: Path, key: str) -> None:
    root = write_project(tmp_path / "p", MODEL)
    with pytest.raises(ProjectLoadError) as e:
        definitions(root, pyspark=PySparkResource(spark_config={key: "static", "spark.sql.shuffle.partitions": "3"}))
    assert str(e.value) == (f"Cannot load the mesh project {root}: Spark setting {key} cannot be set in "
                            f"PySparkResource.spark_config: {REASON}")
    assert not (root / ".mesh").exists()  # refused before the state store (or anything else) was made


def test_a_context_given_the_overwrite_mode_refuses_it_without_pointing_at_config_yaml(tmp_path: Path) -> None:
    """The resource of a run (`MeshResource(spark_config=...)`, not through `definitions`) says the same."""
    root = write_project(tmp_path / "p", MODEL)
    context = Context(root, spark_config={"spark.sql.sources.partitionOverwriteMode": "dynamic"},
                      spark_config_source="PySparkResource.spark_config")
    with pytest.raises(ConfigError) as e:
        context.connection  # noqa: B018
    assert str(e.value) == ("Spark setting spark.sql.sources.partitionOverwriteMode cannot be set in "
                            f"PySparkResource.spark_config: {REASON}")


def test_a_connection_config_setting_the_overwrite_mode_is_refused_at_its_line(tmp_path: Path) -> None:
    config = ("gateways:\n  local:\n    connection:\n      config:\n        spark.sql.shuffle.partitions: 2\n"
              "        spark.sql.sources.partitionOverwriteMode: static\nmodel_defaults:\n  dialect: spark\n")
    root = write_project(tmp_path / "p", MODEL, config)
    with pytest.raises(ConfigError) as e:
        Context(root).config  # noqa: B018
    assert str(e.value) == (
        "config.yaml:6: gateways.local.connection.config.spark.sql.sources.partitionOverwriteMode: Spark setting "
        f"spark.sql.sources.partitionOverwriteMode cannot be set in a connection's config: {REASON}")
    assert not (root / ".mesh").exists()
