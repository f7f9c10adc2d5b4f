"""The two config.yaml keys whose effect only Spark shows (see tests/unit/test_accepted_keys.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import CONFIG, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError


def test_connection_catalog_is_set_on_the_session(spark) -> None:
    from mesh_dagster.engine.session import _configure

    with pytest.raises(EngineError, match="no_such_catalog"):
        _configure(spark, SparkConnectionConfig(catalog="no_such_catalog"))
    _configure(spark, SparkConnectionConfig(catalog="spark_catalog"))
    assert spark.catalog.currentCatalog() == "spark_catalog"


def test_plan_auto_apply_applies_without_asking(spark, engine, unique_schema: str, tmp_path: Path) -> None:
    """`plan: auto_apply: true` applies the plan with no prompt (the CLI reuses this process's
    Spark session, so the test's warehouse receives the view)."""
    config = ("gateways:\n  local:\n    connection:\n      master: local[2]\n      config:\n"
              "        spark.sql.shuffle.partitions: 2\n" + CONFIG + "plan:\n  auto_apply: true\n")
    root = write_project(tmp_path / "p", {"models/v.sql": f"MODEL (name {unique_schema}.v, kind VIEW);\nSELECT 1 AS a\n"},
                         config)
    result = CliRunner().invoke(cli, ["-p", str(root), "plan", "--skip-tests"], input="")
    assert result.exit_code == 0, result.output
    assert "Apply - " not in result.output
    assert engine.session.fetchall(f"SELECT a FROM {unique_schema}.v") == [(1,)]
