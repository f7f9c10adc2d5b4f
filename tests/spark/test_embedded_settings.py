"""Spark settings of the embedded default (local master, warehouse under `.mesh/`), issue 23:
shuffle partitions sized to the master's cores (two a core), and no `_SUCCESS` marker per write. Cluster masters
and a warehouse the user names keep Spark's own behaviour; the user's `config:` wins over ours.
(benchmarks/bench_spark_settings.py measures each setting; `.crc` checksums are kept, see session.py.)"""

from __future__ import annotations

import os
from pathlib import Path

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.session import local_cores, local_session_config

MARKERS = "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs"
PARTITIONS = "spark.sql.shuffle.partitions"


def _settings(tmp_path: Path, **connection) -> dict[str, str]:
    return local_session_config(SparkConnectionConfig(**connection), tmp_path / "mesh")


def test_the_embedded_default_writes_no_markers_and_sizes_shuffles_to_its_cores(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings[MARKERS] == "false"
    assert local_cores("local[*]") == len(os.sched_getaffinity(0))
    assert settings[PARTITIONS] == str(2 * local_cores("local[*]"))
    assert _settings(tmp_path, master="local[3]")[PARTITIONS] == "6"
    assert _settings(tmp_path, master="local")[PARTITIONS] == "2"
    assert _settings(tmp_path, master="local[2,4]")[PARTITIONS] == "4"  # 4 is the task retries
    assert _settings(tmp_path, master="local-cluster[2,3,1024]")[PARTITIONS] == "12"  # 2 workers of 3 cores
    assert "spark.hadoop.fs.file.impl" not in settings  # checksums stay: see EMBEDDED_WAREHOUSE_CONFIG
    assert "spark.sql.adaptive.enabled" not in settings  # Spark's default (on) is what we rely on


def test_a_cluster_master_or_a_named_warehouse_keeps_sparks_own(tmp_path: Path) -> None:
    cluster = _settings(tmp_path, master="spark://127.0.0.1:7077")
    assert MARKERS not in cluster and PARTITIONS not in cluster
    for named in (_settings(tmp_path, warehouse="/data/warehouse"),
                  _settings(tmp_path, warehouse="file:///data/warehouse"),
                  _settings(tmp_path, config={"spark.sql.warehouse.dir": "/data/warehouse"})):
        assert MARKERS not in named  # other tools may watch a warehouse the user names for markers
        assert named[PARTITIONS] == str(2 * local_cores("local[*]"))  # the master's cores, wherever the files go


def test_the_users_config_wins(tmp_path: Path) -> None:
    settings = _settings(tmp_path, config={MARKERS: True, PARTITIONS: 8})
    assert settings[MARKERS] == "true" and settings[PARTITIONS] == "8"


def test_writes_to_the_embedded_warehouse_leave_no_success_markers(spark, engine, unique_schema) -> None:
    """The shared session is the embedded default (tests/spark_fixtures.py): every write path of the
    engine (partitioned insert, a new generation directory, a seed) leaves data files only."""
    hadoop_key = MARKERS.removeprefix("spark.hadoop.")
    assert spark.sparkContext._jsc.hadoopConfiguration().get(hadoop_key) == "false"
    engine.catalog.create_schema(unique_schema)
    days = "SELECT 1 AS v, DATE'2020-01-01' AS ds UNION ALL SELECT 2, DATE'2020-01-02'"
    engine.catalog.create_table(f"{unique_schema}.inc", days, ["ds"])
    engine.writes.insert_overwrite_interval(f"{unique_schema}.inc", days, "ds", "DATE'2020-01-01'", "DATE'2020-01-03'")
    engine.writes.replace_table(f"{unique_schema}.full", "SELECT 1 AS a, 2 AS b", [])
    engine.session.execute(f"CREATE TABLE {unique_schema}.hive (a INT) STORED AS PARQUET")
    engine.session.execute(f"INSERT OVERWRITE TABLE {unique_schema}.hive SELECT 5")
    assert engine.session.fetchall(f"SELECT v FROM {unique_schema}.inc ORDER BY v") == [(1,), (2,)]
    assert engine.session.fetchall(f"SELECT a, b FROM {unique_schema}.full") == [(1, 2)]
    schema_dir = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")) / f"{unique_schema}.db"
    names = [name for _, _, files in os.walk(schema_dir) for name in files]
    assert any(name.endswith(".parquet") for name in names), names
    assert not [name for name in names if "_SUCCESS" in name], names
