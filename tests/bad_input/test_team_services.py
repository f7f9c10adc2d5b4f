"""Team services that are wrong or not there: a Postgres metastore, a standalone master, the JDBC
driver, and connection settings that cannot work together.

Each refusal is one line, comes before any JVM starts (so within the configured timeout) and
leaves nothing behind: no project file, no state row, no warehouse folder, no metastore table.
Commands that would start Spark run in processes of their own (this test process may already
hold a Spark session, which would skip the checks made before a JVM starts).
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml

from tests.bad_input.harness import assert_refused, closed_port, copy_example, mesh, mesh_process, nothing_written

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
# Spark alone waits about a minute for a master that does not answer; a refusal comes well before.
HANG_S = 90


def _project(tmp_path: Path, connection: dict) -> Path:
    project = copy_example(tmp_path / "project")
    config = yaml.safe_load((project / "config.yaml").read_text())
    config["gateways"]["local"]["connection"] = {"type": "spark", **connection}
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return project


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose accept queue is full: connecting to it neither succeeds nor fails, it hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.2)
    yield port
    for filler in fillers:
        filler.close()
    server.close()


@pytest.fixture
def metastore_db() -> Iterator[str]:
    """An empty Postgres database (must stay empty: a refused command creates no Hive table)."""
    name = f"mesh_bad_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(dbname="test", autocommit=True, connect_timeout=5, **PG)  # type: ignore[arg-type]
    except psycopg.Error as e:
        raise AssertionError(f"This test needs Postgres at 127.0.0.1:5432: {e}") from e
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(dbname="test", autocommit=True, **PG) as admin:  # type: ignore[arg-type]
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(database: str) -> list[str]:
    with psycopg.connect(dbname=database, **PG) as conn:  # type: ignore[arg-type]
        return [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'public'")]


def _refused_before_spark(tmp_path: Path, metastore: dict, *fragments: str) -> None:
    """`fragments` are in the one line printed. The driver's jar is missing unless the test gives
    one: every refusal about the database comes before the driver is looked for."""
    metastore.setdefault("driver_jar", str(tmp_path / "no-driver" / "postgresql.jar"))
    warehouse = tmp_path / "warehouse"
    project = _project(tmp_path, {"master": "local[1]", "warehouse": str(warehouse), "connect_timeout": 3,
                                  "metastore": {"type": "postgres", **metastore}})
    with nothing_written(project):
        outcome = mesh_process(project, "plan", "--auto-apply", timeout_s=HANG_S)
    assert_refused(outcome, *fragments)
    assert not warehouse.exists(), "the warehouse folder was created"
    assert not (project / ".mesh" / "log4j2.properties").exists(), "Spark was being set up"


def test_metastore_unreachable(tmp_path: Path) -> None:
    port = closed_port()
    _refused_before_spark(tmp_path, {"host": "127.0.0.1", "port": port, "database": "mesh_metastore"},
                          f"Cannot reach the Hive metastore database (Postgres) at 127.0.0.1:{port}",
                          "connection refused", "Check `metastore:` in config.yaml")


def test_metastore_that_never_answers(tmp_path: Path, silent_port: int) -> None:
    started = time.monotonic()
    _refused_before_spark(tmp_path, {"port": silent_port}, f"127.0.0.1:{silent_port}", "no answer within 3 s")
    assert time.monotonic() - started < HANG_S


def test_metastore_database_missing(tmp_path: Path) -> None:
    _refused_before_spark(tmp_path, {"database": "mesh_no_such_metastore"},
                          "The Hive metastore database 'mesh_no_such_metastore' does not exist on Postgres at "
                          "127.0.0.1:5432", "createdb")


def test_metastore_user_refused(tmp_path: Path, metastore_db: str) -> None:
    _refused_before_spark(tmp_path, {"database": metastore_db, "user": "mesh_no_such_role"},
                          "Postgres at 127.0.0.1:5432 refused user 'mesh_no_such_role'", "metastore.user")
    assert _tables(metastore_db) == []


def test_driver_jar_missing(tmp_path: Path, metastore_db: str) -> None:
    missing = tmp_path / "nowhere" / "postgresql.jar"
    _refused_before_spark(tmp_path, {"database": metastore_db, "driver_jar": str(missing)},
                          f"The PostgreSQL JDBC driver for the Hive metastore is not at {missing}",
                          "libpostgresql-jdbc-java")
    assert _tables(metastore_db) == []


def test_master_unreachable(tmp_path: Path) -> None:
    port = closed_port()
    project = _project(tmp_path, {"master": f"spark://127.0.0.1:{port}", "connect_timeout": 2})
    with nothing_written(project):
        outcome = mesh_process(project, "plan", "--auto-apply", timeout_s=HANG_S)
    assert_refused(outcome, f"Cannot reach the Spark master spark://127.0.0.1:{port}", "connection refused",
                   "Check `master:` in config.yaml")


def test_master_that_never_answers_is_given_up_on_within_the_timeout(tmp_path: Path, silent_port: int) -> None:
    project = _project(tmp_path, {"master": f"spark://127.0.0.1:{silent_port}", "connect_timeout": 2})
    started = time.monotonic()
    with nothing_written(project):
        outcome = mesh_process(project, "plan", "--auto-apply", timeout_s=HANG_S)
    assert_refused(outcome, f"spark://127.0.0.1:{silent_port}", "no answer within 2 s", "connect_timeout 2 s")
    assert time.monotonic() - started < HANG_S


# -- settings that cannot work together: refused while reading config.yaml (file and line) ----------


def _config_line(project: Path, key: str) -> int:
    """The line of `key` ("a/b": b's line after a's) inside the connection section."""
    lines = (project / "config.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.strip() == "connection:")
    for part in key.split("/"):
        line = next(i for i, text in enumerate(lines, 1) if i > line and text.strip().startswith(f"{part}:"))
    return line


@pytest.mark.parametrize(("connection", "key", "fragments"), [
    ({"remote": "sc://127.0.0.1:15002", "metastore": {"type": "postgres"}, "warehouse": "/w"}, "metastore",
     ("connection.metastore", "`remote` uses its own catalog")),
    ({"metastore": {"type": "derby", "host": "db.example.com"}}, "metastore/host",
     ("connection.metastore.host", "applies to `type: postgres` only")),
    ({"metastore": {"type": "postgres"}}, "metastore", ("connection.metastore", "needs `warehouse:`")),
    ({"metastore": {"type": "postgres"}, "warehouse": "shared/warehouse"}, "warehouse",
     ("connection.warehouse", "'shared/warehouse' is relative")),
    ({"warehouse": "/w", "config": {"spark.sql.warehouse.dir": "/v"}}, "config/spark.sql.warehouse.dir",
     ("spark.sql.warehouse.dir", "clashes with `warehouse`")),
    ({"connect_timeout": 0}, "connect_timeout", ("connection.connect_timeout", "greater than 0")),
    ({"metastore": {"type": "mysql"}}, "metastore/type", ("connection.metastore.type", "'derby' or 'postgres'")),
    ({"master": "spark://127.0.0.1:7077", "server": {"enabled": False}}, "server",
     ("connection.server", "applies to a local `master` on the embedded Derby metastore only")),
    ({"server": {"idle_minutes": 0}}, "server/idle_minutes", ("connection.server.idle_minutes", "greater than 0")),
])
def test_connection_settings_that_cannot_work(tmp_path: Path, connection: dict, key: str,
                                              fragments: tuple[str, ...]) -> None:
    project = _project(tmp_path, connection)
    with nothing_written(project):
        outcome = mesh(project, "plan", "--explain")
    line = _config_line(project, key)
    assert_refused(outcome, f"config.yaml:{line}:", *fragments)


def test_no_shared_server_for_a_shared_metastore(tmp_path: Path) -> None:
    project = _project(tmp_path, {"metastore": {"type": "postgres"}, "warehouse": str(tmp_path / "warehouse")})
    with nothing_written(project):
        outcome = mesh(project, "spark", "start")
    assert_refused(outcome, "metastore is on Postgres, where every process opens its own Spark session")
    assert not (project / ".mesh" / "connect.json").exists()
