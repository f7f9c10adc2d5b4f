"""Probes of the team deployment's connection keys for tests/unit/test_accepted_keys.py: each shows
the key's effect on the Spark session settings mesh builds (or on what it refuses), without Spark."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.engine import hive_metastore
from mesh_dagster.engine.cluster import check_master
from mesh_dagster.engine.session import local_session_config

_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"


def _settings(tmp_path: Path, **connection) -> dict[str, str]:
    return local_session_config(SparkConnectionConfig(**connection), tmp_path / "mesh")


def _jar(tmp_path: Path) -> Path:
    """A stand-in for the driver's jar: these probes read settings, no JVM loads it."""
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"PK")
    return jar


def _postgres(tmp_path: Path, **metastore) -> dict[str, str]:
    metastore.setdefault("driver_jar", str(_jar(tmp_path)))
    return _settings(tmp_path, metastore={"type": "postgres", **metastore}, warehouse="/shared/warehouse")


def _refused(tmp_path: Path, connection_yaml: str, *fragments: str) -> None:
    root = tmp_path / f"c{len(list(tmp_path.iterdir())) if tmp_path.exists() else 0}"
    root.mkdir(parents=True)
    text = "gateways:\n  a:\n    connection:\n" + textwrap.indent(textwrap.dedent(connection_yaml), "      ")
    (root / "config.yaml").write_text(text)
    with pytest.raises(MeshError) as e:
        load_config(root)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def probe_metastore(tmp_path: Path) -> None:
    assert "jdbc:derby:" in _settings(tmp_path)[_URL]  # the default: embedded Derby
    assert _postgres(tmp_path)[_URL] == "jdbc:postgresql://127.0.0.1:5432/mesh_metastore"
    assert not SparkConnectionConfig().shared_catalog
    assert SparkConnectionConfig(metastore={"type": "postgres"}, warehouse="/w").shared_catalog


def probe_metastore_type(tmp_path: Path) -> None:
    assert "jdbc:derby:" in _settings(tmp_path, metastore={"type": "derby"})[_URL]
    settings = _postgres(tmp_path)
    assert settings["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    _refused(tmp_path, "metastore:\n  type: mysql\n", "config.yaml:5:", "metastore.type")


def probe_metastore_host(tmp_path: Path) -> None:
    assert _postgres(tmp_path, host="hms.example.com")[_URL] == "jdbc:postgresql://hms.example.com:5432/mesh_metastore"
    _refused(tmp_path, "metastore:\n  type: derby\n  host: x\n", "config.yaml:6:", "metastore.host", "`type: postgres` only")


def probe_metastore_port(tmp_path: Path) -> None:
    assert _postgres(tmp_path, port=6543)[_URL] == "jdbc:postgresql://127.0.0.1:6543/mesh_metastore"
    _refused(tmp_path, "metastore:\n  type: postgres\n  port: 0\n", "metastore.port")


def probe_metastore_database(tmp_path: Path) -> None:
    assert _postgres(tmp_path, database="hms")[_URL] == "jdbc:postgresql://127.0.0.1:5432/hms"


def probe_metastore_user(tmp_path: Path) -> None:
    assert _postgres(tmp_path, user="hive")["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"


def probe_metastore_password(tmp_path: Path) -> None:
    # Through the JVM's environment (hive_metastore.PASSWORD_ENV), never on spark-submit's command line.
    assert _postgres(tmp_path, password="pw")["spark.hadoop.javax.jdo.option.ConnectionPassword"] == \
        "${env.MESH_HIVE_METASTORE_PASSWORD}"
    assert all("pw" != value for value in _postgres(tmp_path, password="pw").values())
    assert _postgres(tmp_path)["spark.hadoop.javax.jdo.option.ConnectionPassword"] == ""


def probe_metastore_driver_jar(tmp_path: Path) -> None:
    jar = _jar(tmp_path)
    assert _postgres(tmp_path, driver_jar=str(jar))["spark.driver.extraClassPath"] == str(jar)
    debian = tmp_path / "usr" / "share" / "java" / "postgresql.jar"
    with mock.patch.object(hive_metastore, "DEBIAN_DRIVER_JAR", debian):  # without the key: Debian's jar
        with pytest.raises(MeshError, match="apt-get install libpostgresql-jdbc-java"):
            _postgres(tmp_path, driver_jar=None)
        debian.parent.mkdir(parents=True)
        debian.write_bytes(b"PK")
        assert _postgres(tmp_path, driver_jar=None)["spark.driver.extraClassPath"] == str(debian.resolve())
    extra = _settings(tmp_path, metastore={"type": "postgres", "driver_jar": str(jar)}, warehouse="/w",
                      config={"spark.driver.extraClassPath": "/opt/x.jar"})["spark.driver.extraClassPath"]
    assert extra == f"{jar}:/opt/x.jar"  # the user's class path is added to the driver's, not instead


def probe_warehouse(tmp_path: Path) -> None:
    assert _settings(tmp_path, warehouse="/shared/wh")["spark.sql.warehouse.dir"] == "/shared/wh"
    assert _settings(tmp_path, master="spark://h:7077", warehouse="hdfs://nn/wh")["spark.sql.warehouse.dir"] == \
        "hdfs://nn/wh"
    _refused(tmp_path, "warehouse: wh\n", "config.yaml:4:", "warehouse", "relative")


def probe_connect_timeout(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(MeshError, match="connect_timeout 3 s"):
        check_master(SparkConnectionConfig(master=f"spark://127.0.0.1:{port}", connect_timeout=3))
    _refused(tmp_path, "connect_timeout: 0\n", "config.yaml:4:", "connect_timeout")


TEAM_CONFIG_PROBES: dict[str, Callable[[Path], None]] = {
    "gateways.*.connection.metastore": probe_metastore,
    **{f"gateways.*.connection.metastore.{key}": globals()[f"probe_metastore_{key}"]
       for key in ("type", "host", "port", "database", "user", "password", "driver_jar")},
    "gateways.*.connection.warehouse": probe_warehouse,
    "gateways.*.connection.connect_timeout": probe_connect_timeout,
}
