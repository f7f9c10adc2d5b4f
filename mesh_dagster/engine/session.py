"""Starting Spark, and turning its failures into one-line messages.

Local sessions keep everything Spark writes (Derby metastore, derby.log, warehouse, log config)
inside the project's `.mesh/` folder: Spark's defaults put `metastore_db/` and
`spark-warehouse/` in whatever directory the user happened to run the command from, which both
litters their checkout and silently gives every directory a different catalog.

PySpark classic sessions are process-wide: `getOrCreate()` hands back the session that already
exists in this process, and only runtime SQL settings of a later builder take effect. So the
first `build_session` in a process decides where the metastore and warehouse are.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from mesh_dagster.core.config import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.java import MINIMUM_JAVA, check_java, find_java, parse_java_major

__all__ = [
    "MINIMUM_JAVA",
    "SparkSQLError",
    "build_session",
    "check_java",
    "find_java",
    "local_session_config",
    "parse_java_major",
    "quiet_pyspark_error_logs",
    "spark_error_message",
    "to_engine_error",
]

LOG4J2_FILE = "log4j2.properties"

# Errors only, to stderr: JVM startup otherwise prints NativeCodeLoader, Hive and metastore WARNs
# that drown the CLI's own output. The PySpark gateway logger is pinned to the root level so Spark
# does not announce "Setting default log level"; the metastore handler logs (with a stack trace)
# every exception it then hands to Spark, which reaches us as an exception anyway.
_LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.hms.name = org.apache.hadoop.hive.metastore.RetryingHMSHandler
logger.hms.level = off
"""

# Settings every session gets at runtime, Spark Connect ones included (a Connect server's default
# STATIC overwrite mode would make INSERT OVERWRITE wipe every partition of a table). The Hive ones
# matter for Hive-serde tables; passed to the builder spark-submit would print "Warning: Ignoring
# non-Spark config property", as runtime settings they are silent. The user's config wins.
SESSION_CONFIG = {
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "hive.exec.dynamic.partition": "true",
    "hive.exec.dynamic.partition.mode": "nonstrict",
}

_MAX_MESSAGE = 600


class SparkSQLError(EngineError):
    """A Spark statement failed. `condition` is Spark's error class, e.g. TABLE_OR_VIEW_NOT_FOUND."""

    def __init__(self, message: str, condition: str | None = None, sql: str | None = None):
        self.condition = condition
        self.sql = sql
        super().__init__(message)


def build_session(
    conn: SparkConnectionConfig, mesh_dir: Path, app_name: str = "mesh_dagster"
) -> SparkSession:
    """A SparkSession for `conn`: Spark Connect when `conn.remote` is set, else a classic session.

    Returns the session that already exists in this process if there is one (see module doc).
    """
    quiet_pyspark_error_logs()
    if conn.remote:
        builder = SparkSession.builder.remote(conn.remote)
        for key, value in conn.config.items():
            builder = builder.config(key, _conf_value(value))
        try:
            spark = builder.getOrCreate()
        except Exception as e:  # noqa: BLE001 - any startup failure becomes one message
            raise to_engine_error(e, f"Cannot connect to Spark Connect at {conn.remote}") from e
        _configure(spark, conn)
        return spark

    if not _jvm_running():
        check_java()
    builder = SparkSession.builder.master(conn.master).appName(app_name).enableHiveSupport()
    for key, value in local_session_config(conn, mesh_dir).items():
        builder = builder.config(key, value)
    try:
        with _filter_jvm_stderr():
            spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001
        raise to_engine_error(e, f"Cannot start Spark (master {conn.master})") from e
    spark.sparkContext.setLogLevel("ERROR")
    _configure(spark, conn)
    return spark


def local_session_config(conn: SparkConnectionConfig, mesh_dir: Path) -> dict[str, str]:
    """Builder settings for a classic session. Writes the log4j2 configuration into `mesh_dir`.

    Local masters also get the embedded Derby metastore and the warehouse under `mesh_dir`.
    The user's `conn.config` wins over ours, except `spark.driver.extraJavaOptions`: the user's
    options are appended to ours rather than replacing them, so they cannot accidentally move
    Derby back into the cwd or turn the logs up again.
    """
    mesh_dir = Path(mesh_dir).resolve()
    mesh_dir.mkdir(parents=True, exist_ok=True)
    log_config = mesh_dir / LOG4J2_FILE
    if not log_config.exists() or log_config.read_text() != _LOG4J2_PROPERTIES:
        log_config.write_text(_LOG4J2_PROPERTIES)

    # Quoted: Spark splits these options like a shell would, and project paths may contain spaces.
    java_options = f'"-Dlog4j2.configurationFile={log_config}"'
    settings: dict[str, str] = {
        "spark.sql.catalogImplementation": "hive",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.session.timeZone": "UTC",
    }
    if conn.is_local:
        # An embedded catalog only makes sense when the whole of Spark runs on this machine; a
        # cluster `master` keeps the metastore and warehouse its own Hive configuration names.
        java_options = f'"-Dderby.system.home={mesh_dir}" {java_options}'
        settings.update(
            {
                "spark.hadoop.javax.jdo.option.ConnectionURL": (
                    f"jdbc:derby:;databaseName={mesh_dir / 'metastore_db'};create=true"
                ),
                "spark.sql.warehouse.dir": str(mesh_dir / "warehouse"),
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "4",
            }
        )
    settings["spark.driver.extraJavaOptions"] = java_options
    for key, value in conn.config.items():
        value = _conf_value(value)
        if key == "spark.driver.extraJavaOptions":
            value = f"{java_options} {value}"
        settings[key] = value
    return settings


def spark_error_message(exc: BaseException) -> str:
    """One line from a Spark failure: `[ERROR_CLASS] first line of the message`.

    Spark messages carry the analyzed plan and the JVM stack trace after the first line; users
    need neither to fix their SQL.
    """
    condition = _condition(exc)
    text = _message_text(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    if condition and not first.startswith(f"[{condition}"):
        first = f"[{condition}] {first}"
    if len(first) > _MAX_MESSAGE:
        first = first[: _MAX_MESSAGE - 3] + "..."
    return first


def to_engine_error(exc: BaseException, context: str | None = None, sql: str | None = None) -> SparkSQLError:
    """Wrap any Spark/Py4J/Connect exception as the EngineError users see."""
    message = spark_error_message(exc)
    return SparkSQLError(f"{context}: {message}" if context else message, _condition(exc), sql)


def _configure(spark: SparkSession, conn: SparkConnectionConfig,
               context: str = "Cannot configure the Spark session") -> None:
    """Our session settings (unless the user set them) and the configured catalog."""
    try:
        for key, value in SESSION_CONFIG.items():
            if key not in conn.config:
                spark.conf.set(key, value)
        if conn.catalog:
            spark.catalog.setCurrentCatalog(conn.catalog)
    except Exception as e:  # noqa: BLE001
        raise to_engine_error(e, context) from e


def quiet_pyspark_error_logs() -> None:
    """PySpark logs every failed query as a JSON record on stderr before raising it.

    We raise the same error as one line (see `to_engine_error`); the JSON dump would duplicate it
    with a stack trace on top. Users who want the records can lower these loggers' level again.
    """
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _condition(exc: BaseException) -> str | None:
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(exc, getter, None)
        if callable(method):
            try:
                value = method()
            except Exception:  # noqa: BLE001 - a dead JVM must not hide the original error
                continue
            if value:
                return str(value)
    return None


_JAVA_EXCEPTION_LINE = re.compile(r"^\s*:?\s*((?:[a-z]\w*\.)+\w*(?:Exception|Error)\b.*)$", re.MULTILINE)


def _message_text(exc: BaseException) -> str:
    grpc = sys.modules.get("grpc")
    details = getattr(exc, "details", None)
    if callable(details) and grpc is not None and isinstance(exc, grpc.RpcError):
        # A gRPC failure of Spark Connect (e.g. the shared server went away): its text is a repr.
        try:
            return f"Spark Connect server unreachable: {details()}"
        except Exception:  # noqa: BLE001
            pass
    get_message = getattr(exc, "getMessage", None)
    if callable(get_message):
        try:
            message = get_message()
        except Exception:  # noqa: BLE001
            message = None
        if message:
            return str(message)
    text = str(exc)
    # Py4JJavaError: "An error occurred while calling o42.sql.\n: org.apache...Exception: msg\n\tat ..."
    if "An error occurred while calling" in text:
        match = _JAVA_EXCEPTION_LINE.search(text)
        if match:
            return match.group(1)
    return text


# Printed by the JVM itself (spark-submit always adds `--add-modules=jdk.incubator.vector`), so no
# log configuration can silence it.
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


@contextmanager
def _filter_jvm_stderr() -> Iterator[None]:
    """Launch the JVM with its stderr piped through a thread that drops known startup noise.

    The JVM inherits file descriptor 2 when PySpark spawns it, so for the duration of the launch
    fd 2 points at a pipe; a daemon thread copies every other line to the original stderr for
    the rest of the JVM's life. Does nothing when a JVM is already running or fd 2 is unusable.
    """
    original = _dup_stderr() if os.name == "posix" and not _jvm_running() else None
    if original is None:
        yield
        return
    read_fd, write_fd = os.pipe()
    forward_to = os.dup(original)
    threading.Thread(target=_forward_lines, args=(read_fd, forward_to), name="mesh-jvm-stderr", daemon=True).start()
    try:
        _flush_stderr()
        os.dup2(write_fd, 2)
        os.close(write_fd)
        yield
    finally:
        _flush_stderr()
        os.dup2(original, 2)
        os.close(original)


def _dup_stderr() -> int | None:
    try:
        return os.dup(2)
    except OSError:
        return None


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


def _forward_lines(read_fd: int, write_fd: int) -> None:
    with os.fdopen(read_fd, "rb") as source:
        for line in iter(source.readline, b""):
            if line.startswith(_JVM_NOISE):
                continue
            try:
                os.write(write_fd, line)
            except OSError:
                pass
    os.close(write_fd)


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None  # noqa: SLF001 - no public equivalent
