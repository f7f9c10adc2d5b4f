"""What a warm server was started with: a client whose own differs restarts it (never a stale server),
and what only a client reads (how many models at once, the idle time) restarts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.server_identity import identity_change, server_identity

BASE = SparkConnectionConfig(master="local[2]", config={"spark.sql.shuffle.partitions": 2})


def test_the_same_connection_is_the_same_server() -> None:
    assert identity_change(server_identity(BASE), server_identity(BASE.model_copy())) is None


@pytest.mark.parametrize("change", [
    {"config": {"spark.sql.shuffle.partitions": 3}},
    {"master": "local[1]"},
    {"warehouse": "/elsewhere"},
])
def test_a_spark_setting_of_config_yaml_restarts_it(change: dict) -> None:
    changed = BASE.model_copy(update=change)
    assert identity_change(server_identity(BASE), server_identity(changed)) == (
        "the Spark settings of config.yaml changed")


@pytest.mark.parametrize("change", [
    {"concurrent_tasks": 1}, {"connect_timeout": 3.0}, {"server": {"idle_minutes": 5}},
])
def test_what_only_a_client_reads_restarts_nothing(change: dict) -> None:
    changed = SparkConnectionConfig.model_validate({**BASE.model_dump(), **change})
    assert identity_change(server_identity(BASE), server_identity(changed)) is None


def test_upgraded_packages_are_named_with_their_versions() -> None:
    now = server_identity(BASE)
    before = {**now, "pyspark": "4.2.0", "mesh_dagster": "0.0.9"}
    assert identity_change(before, now) == (
        f"the installed PySpark (4.2.0 -> {now['pyspark']}), the installed mesh_dagster "
        f"(0.0.9 -> {now['mesh_dagster']}) have changed")


def test_another_java_restarts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = server_identity(BASE)
    jdk = tmp_path / "jdk-21"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "bin" / "java").write_text("#!/bin/sh\n")
    (jdk / "bin" / "java").chmod(0o755)
    (jdk / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    other = server_identity(BASE)
    assert identity_change(before, other) == "the Java it runs on changed"
    (jdk / "release").write_text('JAVA_VERSION="21.0.2"\n')  # upgraded in place, at the same path
    assert identity_change(other, server_identity(BASE)) == "the Java it runs on changed"


def test_a_record_of_an_older_mesh_dagster_without_an_identity_is_stale() -> None:
    assert identity_change({}, server_identity(BASE)) == (
        "the installed PySpark, the installed mesh_dagster, the Java it runs on, the Spark settings of "
        "config.yaml have changed")
