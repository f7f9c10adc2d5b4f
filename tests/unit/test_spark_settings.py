"""core/config/spark_settings.py: Spark settings from outside config.yaml (a PySparkResource) merged
with a gateway's connection; conflicts and settings a running shared server cannot apply refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.config.spark_settings import spark_settings_refusal, with_spark_settings
from mesh_dagster.core.errors import ConfigError

SOURCE = "PySparkResource.spark_config"
CLUSTER = SparkConnectionConfig(master="spark://cluster:7077", config={"spark.executor.memory": "2g"})


def test_team_path_takes_master_packages_and_configs() -> None:
    settings = {"spark.jars.packages": "org.example:lib:1.0", "spark.executor.cores": 2,
                "spark.sql.ansi.enabled": False, "spark.executor.memory": "2g"}
    assert spark_settings_refusal(CLUSTER, settings, SOURCE) is None
    merged = with_spark_settings(CLUSTER, settings)
    assert merged.master == "spark://cluster:7077"
    assert merged.config == {"spark.executor.memory": "2g", "spark.jars.packages": "org.example:lib:1.0",
                             "spark.executor.cores": "2", "spark.sql.ansi.enabled": "false"}
    assert CLUSTER.config == {"spark.executor.memory": "2g"}  # the gateway's own is untouched


def test_master_from_the_resource_when_the_gateway_names_none() -> None:
    settings = {"spark.master": "spark://other:7077", "spark.executor.memory": "4g"}
    assert spark_settings_refusal(SparkConnectionConfig(), settings, SOURCE) is None
    merged = with_spark_settings(SparkConnectionConfig(), settings)
    assert (merged.master, merged.is_local, merged.config) == ("spark://other:7077", False,
                                                               {"spark.executor.memory": "4g"})


@pytest.mark.parametrize(("conn", "settings", "loc", "text"), [
    (CLUSTER, {"spark.executor.memory": "4g"}, ("config", "spark.executor.memory"),
     "PySparkResource.spark_config sets spark.executor.memory='4g' but the gateway's connection config says '2g'"),
    (CLUSTER, {"spark.master": "yarn"}, ("master",),
     "PySparkResource.spark_config sets spark.master='yarn' but the gateway's connection says master "
     "spark://cluster:7077"),
    (SparkConnectionConfig(remote="sc://h:15002/;token=abc"), {"spark.master": "yarn"}, ("remote",),
     "PySparkResource.spark_config sets spark.master='yarn' but the gateway's connection uses Spark Connect "
     "(remote 'sc://h:15002/;token=***')"),
    (SparkConnectionConfig(master="spark://c:7077", config={"spark.hadoop.fs.s3a.secret.key": "a"}),
     {"spark.hadoop.fs.s3a.secret.key": "b"}, ("config", "spark.hadoop.fs.s3a.secret.key"),
     "PySparkResource.spark_config sets spark.hadoop.fs.s3a.secret.key=*** but the gateway's connection config "
     "says ***"),
])
def test_conflicts_refused_naming_both_values(conn, settings, loc, text) -> None:
    assert spark_settings_refusal(conn, settings, SOURCE) == (loc, text)


def test_embedded_default_takes_session_settings_only() -> None:
    local = SparkConnectionConfig(config={"spark.driver.memory": "2g"})
    fine = {"spark.sql.shuffle.partitions": "7", "spark.master": "local[*]", "spark.driver.memory": "2g"}
    assert spark_settings_refusal(local, fine, SOURCE) is None  # what config.yaml already says is no news
    for key in ("spark.jars.packages", "spark.executor.memory", "spark.sql.extensions", "spark.master"):
        loc, text = spark_settings_refusal(local, {key: "local[2]"}, SOURCE)
        assert loc == ("config",)
        assert text.startswith(f"PySparkResource.spark_config sets {key}='local[2]', which applies only when Spark "
                               f"starts, but with a local master and the embedded Derby metastore runs use the "
                               f"project's shared Spark Connect server")
        assert "\n" not in text


def test_context_refuses_with_config_yaml_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "gateways:\n  spark:\n    connection:\n      master: spark://cluster:7077\n"
        "      config:\n        spark.executor.memory: 2g\n")
    ok = Context(tmp_path, spark_config={"spark.sql.shuffle.partitions": 3}, spark_config_source=SOURCE)
    assert ok.connection.config == {"spark.executor.memory": "2g", "spark.sql.shuffle.partitions": "3"}
    assert not ok.connection.has_server
    bad = Context(tmp_path, spark_config={"spark.executor.memory": "8g"}, spark_config_source=SOURCE)
    with pytest.raises(ConfigError) as e:
        bad.connection  # noqa: B018
    assert str(e.value) == ("config.yaml:6: PySparkResource.spark_config sets spark.executor.memory='8g' but the "
                            "gateway's connection config says '2g'")
