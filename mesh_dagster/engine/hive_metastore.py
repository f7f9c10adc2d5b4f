"""A Hive metastore on Postgres: one catalog that every process opens with a session of its own.

Embedded Derby admits one JVM, which is why the local default shares one Connect server. A
metastore in Postgres has no such limit: the CLI, each Dagster run and each colleague start their
own Spark and meet in one catalog. What this module adds around Spark's own Hive client:

- Everything that can be checked before a JVM starts is checked first, each failure one line:
  the JDBC driver jar (Debian's `libpostgresql-jdbc-java`), the server's TCP port within the
  connection's `connect_timeout`, and a login to the database (a wrong database name, user or
  password). A refusal therefore leaves nothing behind: no JVM, no warehouse folder, no tables.
- The Hive schema is created on first use, by DataNucleus, the way Spark's Hive client does for
  Derby. Two of its habits need care on Postgres:
  * it creates a table lazily, the first time a kind of object needs it, on a connection of its
    own; with foreign keys that `ALTER TABLE ... REFERENCES "TBLS"` waits for the very transaction
    that made it create the table, and Hive hangs forever (seen on `CREATE TABLE ... PARTITIONED
    BY`). So tables and columns are created automatically, constraints are not (Hive's
    metastore code keeps the references consistent itself);
  * two processes creating the same table at once make one of them fail. So the first process
    takes a Postgres advisory lock, and while holding it runs once through the catalog calls
    mesh makes (databases, partitioned tables, partitions, views, properties, drops), which
    creates every table they need; the others wait on the lock and then find the schema there.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.config.connections import METASTORE_URL_SETTING, MetastoreConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.cluster import unreachable_reason

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEBIAN_DRIVER_JAR",
    "DEBIAN_PACKAGE",
    "PASSWORD_ENV",
    "MetastoreUnreachableError",
    "check_metastore",
    "driver_jar",
    "export_password",
    "initialise_schema",
    "jdbc_url",
    "metastore_settings",
]

DEBIAN_PACKAGE = "libpostgresql-jdbc-java"
DEBIAN_DRIVER_JAR = Path("/usr/share/java/postgresql.jar")
POSTGRES_DRIVER = "org.postgresql.Driver"
# The password reaches the JVM through its environment, which only its user can read: PySpark hands
# builder settings to spark-submit as command-line arguments, which `ps` shows to everyone. Hadoop
# expands `${env.NAME}` when Hive reads the setting.
PASSWORD_ENV = "MESH_HIVE_METASTORE_PASSWORD"
# Any fixed 64-bit number: the lock is per Postgres database, i.e. per metastore.
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"mesh_dagster hive metastore schema").digest()[:8], "big", signed=True)
_LOCK_WAIT_S = 600.0
# The tables the warm-up below leaves behind; all present = nothing left to create.
_SCHEMA_TABLES = ("DBS", "TBLS", "SDS", "COLUMNS_V2", "PARTITIONS", "PARTITION_KEYS", "PARTITION_KEY_VALS",
                  "PARTITION_PARAMS", "TABLE_PARAMS", "TBL_PRIVS", "PART_PRIVS")
_WARM_UP_DATABASE = "mesh_metastore_init"


class MetastoreUnreachableError(EngineError):
    """The metastore's database cannot be reached or opened (raised before Spark starts)."""


def jdbc_url(meta: MetastoreConfig) -> str:
    return f"jdbc:postgresql://{meta.host}:{meta.port}/{meta.database}"


def driver_jar(meta: MetastoreConfig) -> Path:
    """The PostgreSQL JDBC driver Spark must load; a missing one says what to install."""
    jar = Path(meta.driver_jar).expanduser() if meta.driver_jar else DEBIAN_DRIVER_JAR
    if jar.is_file():
        return jar.resolve()
    if meta.driver_jar:
        raise EngineError(f"The PostgreSQL JDBC driver for the Hive metastore is not at {jar} (metastore.driver_jar "
                          f"in config.yaml): give the path of the driver's jar, or install Debian's "
                          f"{DEBIAN_PACKAGE} and remove `driver_jar`.")
    raise EngineError(f"The PostgreSQL JDBC driver for the Hive metastore is missing ({jar}): install it with "
                      f"`apt-get install {DEBIAN_PACKAGE}` (Debian/Ubuntu), or set metastore.driver_jar in "
                      f"config.yaml to the driver's jar.")


def check_metastore(meta: MetastoreConfig, timeout_s: float) -> Path:
    """Everything that can fail before a JVM starts; returns the driver jar.

    The database is checked before the driver: each of these messages must be reachable on its own,
    and a metastore that cannot be reached is the problem to fix first.
    """
    where = f"{meta.host}:{meta.port}"
    reason = unreachable_reason(meta.host, meta.port, timeout_s)
    if reason is not None:
        raise MetastoreUnreachableError(
            f"Cannot reach the Hive metastore database (Postgres) at {where}: {reason}. Is Postgres running there? "
            f"Check `metastore:` in config.yaml.")
    with _connect(meta, timeout_s):
        pass
    return driver_jar(meta)


def metastore_settings(meta: MetastoreConfig, jar: Path) -> dict[str, str]:
    """Builder settings that point Spark's Hive client at the Postgres metastore."""
    settings = {
        METASTORE_URL_SETTING: jdbc_url(meta),
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": POSTGRES_DRIVER,
        "spark.hadoop.javax.jdo.option.ConnectionUserName": meta.user,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": f"${{env.{PASSWORD_ENV}}}" if meta.password else "",
        # See the module doc: tables and columns on demand, no foreign keys.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # The driver process alone talks to the metastore: the jar goes on its class path only.
        "spark.driver.extraClassPath": str(jar),
    }
    return settings


def export_password(meta: MetastoreConfig) -> None:
    """Put the password where the JVM about to start reads it (see PASSWORD_ENV)."""
    if meta.password:
        os.environ[PASSWORD_ENV] = meta.password


def initialise_schema(spark: SparkSession, meta: MetastoreConfig, timeout_s: float) -> float | None:
    """Create the Hive schema if it is not there yet, one process at a time.

    Called right after the session starts, before anything else touches the catalog. Returns the
    seconds spent creating it (None when it was already there).
    """
    with _connect(meta, timeout_s) as conn:
        if _schema_ready(conn):
            return None
        with _advisory_lock(conn, meta):
            if _schema_ready(conn):  # another process created it while we waited
                return None
            started = time.monotonic()
            _warm_up(spark)
            return time.monotonic() - started


def _warm_up(spark: SparkSession) -> None:
    """The catalog calls mesh makes, once: DataNucleus creates the tables each of them needs."""
    db = _WARM_UP_DATABASE
    for sql in (
        f"DROP DATABASE IF EXISTS {db} CASCADE",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT, ds DATE) USING parquet PARTITIONED BY (ds)",
        f"ALTER TABLE {db}.t ADD PARTITION (ds = DATE'2020-01-01')",
        f"ALTER TABLE {db}.t SET TBLPROPERTIES ('mesh' = 'init')",
        f"CREATE OR REPLACE VIEW {db}.v AS SELECT id, ds FROM {db}.t",
        f"SHOW PARTITIONS {db}.t",
        f"ALTER TABLE {db}.t DROP PARTITION (ds = DATE'2020-01-01')",
        f"DROP VIEW {db}.v",
        f"DROP TABLE {db}.t",
        f"DROP DATABASE {db} CASCADE",
    ):
        spark.sql(sql).collect()


def _schema_ready(conn: Any) -> bool:
    rows = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_name = ANY(%s)", (list(_SCHEMA_TABLES),)).fetchone()
    if rows is None or rows[0] < len(_SCHEMA_TABLES):
        return False
    default = conn.execute("""SELECT count(*) FROM "DBS" WHERE "NAME" = 'default'""").fetchone()
    return bool(default and default[0])


@contextmanager
def _advisory_lock(conn: Any, meta: MetastoreConfig) -> Iterator[None]:
    conn.execute(f"SET statement_timeout = {int(_LOCK_WAIT_S * 1000)}")
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    except Exception as e:  # noqa: BLE001
        raise EngineError(f"Timed out after {_LOCK_WAIT_S:g} s waiting for another process to create the Hive "
                          f"metastore's schema in {meta.database} at {meta.host}:{meta.port}: "
                          f"{_first_line(e)}") from None
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


@contextmanager
def _connect(meta: MetastoreConfig, timeout_s: float) -> Iterator[Any]:
    """An autocommit psycopg connection to the metastore database; a failure is one clear line."""
    # Imported here on purpose: only a Postgres metastore needs psycopg (~0.3 s to import), and every
    # process that starts Spark imports this module (through session.py).
    import psycopg  # deliberately lazy, see above

    where = f"{meta.host}:{meta.port}"
    try:
        conn = psycopg.connect(host=meta.host, port=meta.port, dbname=meta.database, user=meta.user,
                               password=meta.password or None, connect_timeout=max(1, round(timeout_s)),
                               autocommit=True, application_name="mesh_dagster metastore check")
    except psycopg.Error as e:
        raise MetastoreUnreachableError(_login_failure(meta, where, e)) from None
    try:
        yield conn
    finally:
        conn.close()


def _login_failure(meta: MetastoreConfig, where: str, exc: Exception) -> str:
    text = _first_line(exc)
    lowered = text.lower()
    if f'database "{meta.database}" does not exist' in lowered:
        return (f"The Hive metastore database '{meta.database}' does not exist on Postgres at {where}: create it "
                f"(`createdb -h {meta.host} -p {meta.port} -U {meta.user} {meta.database}`) or fix "
                f"metastore.database in config.yaml.")
    if "password" in lowered or "authentication" in lowered or "role" in lowered:
        return (f"Postgres at {where} refused user '{meta.user}' for the Hive metastore database "
                f"'{meta.database}': {text}. Check metastore.user and metastore.password in config.yaml.")
    return f"Cannot open the Hive metastore database '{meta.database}' on Postgres at {where}: {text}"


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    # libpq: 'connection failed: connection to server at "h", port p failed: FATAL:  <the reason>'
    return text.rpartition("FATAL:")[2].strip().rstrip(".")
