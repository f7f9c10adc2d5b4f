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

import atexit
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from mesh_dagster.core.config.connections import METASTORE_URL_SETTING, WAREHOUSE_SETTING, SparkConnectionConfig
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import class_archive
from mesh_dagster.engine.cluster import check_master, loopback_master, unreachable_reason
from mesh_dagster.engine.hive_metastore import (
    check_metastore,
    driver_jar,
    export_password,
    initialise_schema,
    metastore_settings,
)
from mesh_dagster.engine.java import (
    MINIMUM_JAVA,
    check_java,
    find_java,
    parse_java_major,
)
from mesh_dagster.engine.metastore import (
    MetastoreHolder,
    busy_message,
    derby_busy_database,
    derby_database,
    metastore_holder,
)

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

__all__ = [
    "MINIMUM_JAVA",
    "MetastoreBusyError",
    "SparkSQLError",
    "build_session",
    "check_java",
    "close_if_unreachable",
    "fail_fast",
    "find_java",
    "local_session_config",
    "metastore_in_use",
    "parse_java_major",
    "quiet_pyspark_error_logs",
    "redact_secrets",
    "spark_error_message",
    "to_engine_error",
    "unreachable_reason",
    "watch_server",
]

LOG4J2_FILE = "log4j2.properties"
CLIENT_RETRIES = 6  # DefaultPolicy backoff 50 ms x4 up to 10 s: about 25 s in all
PROBE_RETRIES = 3  # about 1 s: the server either answers the first request or is not there

# Errors only, to stderr: JVM startup otherwise prints NativeCodeLoader, Hive and metastore WARNs
# that drown the CLI's own output. The PySpark gateway logger is pinned to the root level so Spark
# does not announce "Setting default log level"; the metastore handler logs (with a stack trace)
# every exception it then hands to Spark, which reaches us as an exception anyway. DataNucleus does
# the same for a metastore it cannot open (~900 lines per Hive retry when another process holds
# Derby); the Java exception, causes included, still reaches us and any log file we write.
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
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = off
"""

# Settings every session gets at runtime, Spark Connect ones included (a Connect server's default
# STATIC overwrite mode would make INSERT OVERWRITE wipe every partition of a table). The Hive ones
# matter for Hive-serde tables; passed to the builder spark-submit would print "Warning: Ignoring
# non-Spark config property", as runtime settings they are silent. The user's config wins.
# The metastore filters partitions in SQL where it can, else through its ORM, which filters string
# partition keys only: a DATE key read while its direct SQL failed once (a lock held by a killed
# client's statement still running on a Connect server, say) fails the whole query with
# INTERNAL_ERROR_HIVE_METASTORE_PARTITION_FILTER. With the fallback Spark lists the table's
# partitions and filters them itself, on that failure only.
SESSION_CONFIG = {
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "hive.exec.dynamic.partition": "true",
    "hive.exec.dynamic.partition.mode": "nonstrict",
    "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
}

# A local master runs driver and executors in one JVM: nothing needs to reach it from another
# machine. Spark's defaults would still bind the driver's RPC endpoint and block manager to the
# host's external address (and a UI on every interface), where anyone on the network could submit
# work that reads and writes every file of this user. So every listener is on loopback, and
# `spark.authenticate` (Spark generates the secret itself for local masters) keeps other accounts
# of this machine, who can reach loopback too, from talking to the driver.
LOOPBACK_CONFIG = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.authenticate": "true",
}

# The embedded warehouse (local master, no `warehouse:`) is regenerable dev data only Spark reads: no `_SUCCESS`
# per write (a warehouse the user names may feed tools that wait for them). `.crc` files stay: `sc.textFile` and
# LOAD DATA LOCAL fail on RawLocalFileSystem (no LocalFileSystem). Measured: benchmarks/bench_spark_settings.py.
EMBEDDED_WAREHOUSE_CONFIG = {"spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}
_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\d+)?\]|-cluster\[(\d+),(\d+),\d+\])?")
_MAX_MESSAGE = 600


class SparkSQLError(EngineError):
    """A Spark statement failed. `condition` is Spark's error class, e.g. TABLE_OR_VIEW_NOT_FOUND."""

    def __init__(self, message: str, condition: str | None = None, sql: str | None = None):
        self.condition = condition
        self.sql = sql
        super().__init__(message)


class MetastoreBusyError(SparkSQLError):
    """Another process has the project's embedded Derby metastore open (Derby admits one JVM)."""


class LostServerError(SparkSQLError):
    """The Spark Connect server this process used went away mid-command (see `watch_server`)."""


def build_session(
    conn: SparkConnectionConfig, mesh_dir: Path, app_name: str = "mesh_dagster"
) -> SparkSession:
    """A SparkSession for `conn`: Spark Connect when `conn.remote` is set, else a classic session
    (the one that already exists in this process if there is one: see the module's docstring)."""
    quiet_pyspark_error_logs()
    if conn.remote:
        return _remote_session(conn)

    starting = not _jvm_running()
    if starting:
        # Everything that can be refused before a JVM starts, and before anything is written.
        if conn.shared_catalog:
            assert conn.metastore is not None
            check_metastore(conn.metastore, conn.connect_timeout)
            export_password(conn.metastore)
        check_master(conn)
        in_use = metastore_in_use(conn, mesh_dir)
        if in_use is not None:
            raise MetastoreBusyError(busy_message(*in_use))
        check_java()
    settings = local_session_config(conn, mesh_dir)
    builder = SparkSession.builder.master(conn.master).appName(app_name).enableHiveSupport()
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with _filter_jvm_stderr():
            spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001
        raise to_engine_error(e, f"Cannot start Spark (master {conn.master})") from e
    spark.sparkContext.setLogLevel("ERROR")
    if starting and conn.is_local:  # made once this command is done, never beside it (class_archive.py)
        atexit.register(class_archive.build_if_needed, str(conn.config.get("spark.driver.extraJavaOptions", "")))
    if starting and conn.shared_catalog:
        assert conn.metastore is not None
        try:
            initialise_schema(spark, conn.metastore, conn.connect_timeout)
        except EngineError:
            raise
        except Exception as e:  # noqa: BLE001
            raise to_engine_error(e, "Cannot create the Hive metastore's schema") from e
    _configure(spark, conn)
    return spark


def _remote_session(conn: SparkConnectionConfig) -> SparkSession:
    """A Connect session that gives up within seconds when the server is not there.

    PySpark retries an unreachable server for ten minutes, which suits a cluster that restarts
    mid-run but leaves a user with a typo in `remote:` staring at a silent terminal. So the first
    contact is a plain TCP connect with a timeout and, once the server answers, the settings are
    sent under a short retry policy; PySpark's own policy comes back for the run itself.
    """
    assert conn.remote is not None
    url = redact_secrets(conn.remote)
    host, port = conn.remote_address
    reason = unreachable_reason(host, port, conn.connect_timeout)
    if reason is not None:
        raise SparkSQLError(
            f"Cannot connect to Spark Connect at {url}: {reason}. Is the server running? "
            "Check `remote:` in config.yaml (or start one with `mesh spark start`)"
        )
    with _without_ipython():
        spark = SparkSession.builder.remote(conn.remote).getOrCreate()  # no request sent yet
    patient = spark.client.get_retry_policies()
    try:
        fail_fast(spark, retries=PROBE_RETRIES)
        spark.version  # noqa: B018 - the first request: does a Connect server answer?
    except Exception as e:  # noqa: BLE001 - any startup failure becomes one message
        with suppress(Exception):
            spark.client.close()
        raise to_engine_error(e, f"Cannot connect to Spark Connect at {url}") from e
    atexit.register(close_if_unreachable, spark, host, port)
    fail_fast(spark)
    try:
        builder = SparkSession.builder.remote(conn.remote)
        for key, value in conn.config.items():
            builder = builder.config(key, _conf_value(value))
        builder.getOrCreate()  # the same session: applies the settings, ignoring static ones
    except Exception as e:  # noqa: BLE001
        raise to_engine_error(e, f"Cannot configure Spark Connect at {url}") from e
    _configure(spark, conn, f"Cannot use Spark Connect at {url}")
    spark.client.set_retry_policies(patient)  # a cluster may restart mid-run: PySpark's patience
    _WATCHED[(host, port)] = ("the Spark Connect server of `remote:`", "Check that it runs, then re-run")
    return spark


@contextmanager
def _without_ipython() -> Iterator[None]:
    """PySpark's Connect client imports IPython, when it is installed, for one thing: the terminal
    width of its own progress bar, which we do not show (it falls back to 80 columns). That import
    costs every `mesh` process on a Connect server about half a second, so it is refused while the
    client loads (nothing else imports then); a later `import IPython` works as usual."""
    if "IPython" in sys.modules:
        yield
        return
    sys.modules["IPython"] = None  # type: ignore[assignment]  # `import IPython` raises ImportError
    try:
        yield
    finally:
        if sys.modules.get("IPython", 0) is None:
            del sys.modules["IPython"]


def fail_fast(session: SparkSession | ConnectSession, retries: int = CLIENT_RETRIES) -> None:
    """Give up on an unreachable server after ~25 s (`retries` 6) instead of PySpark's 10 minutes."""
    # Imported here on purpose: only a Connect session (which has loaded its client already) gets
    # here, and a classic session must not pay the Connect client's import (grpc, ~1.5 s).
    from pyspark.sql.connect.client.retries import DefaultPolicy  # deliberately lazy, see above

    session.client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=10_000)])


# -- a Connect server lost mid-command ------------------------------------------------------------
# PySpark retries an unavailable server for minutes, then each clean-up step fails the same way, so
# a killed server used to end a run after ~2 minutes with the error of a clean-up step. A watched
# server is asked whether it still listens before each retry: a closed port is a lost server, at
# once, and every error from then on says so (with what to do) instead of naming a clean-up step.

_WATCHED: dict[tuple[str, int], tuple[str, str]] = {}  # (host, port) -> (what it is, what to do if lost)
_UNAVAILABLE = ("StatusCode.UNAVAILABLE", "failed to connect to all addresses", "Connection refused",
                "Socket closed", "Spark Connect server unreachable")


def watch_server(session: SparkSession | ConnectSession, host: str, port: int, what: str, todo: str,
                 retries: int = CLIENT_RETRIES) -> None:
    """Make `session` give up as soon as its server at `host:port` stops listening, and name the
    server (`what`) and the remedy (`todo`) in the errors that follow."""
    # Deliberately lazy, as in `fail_fast`: only Connect sessions get here.
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class WhileListening(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return super().can_retry(e) and unreachable_reason(host, port, timeout_s=1.0) is None

    _WATCHED[(host, port)] = (what, todo)
    session.client.set_retry_policies([WhileListening(max_retries=retries, max_backoff=10_000)])


def lost_server_message(exc: BaseException) -> str | None:
    """Which watched server is gone, when `exc` says a Connect server did not answer."""
    if not _WATCHED:
        return None
    chain: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(f"{seen!r} {_message_text(seen)}")
        seen = seen.__cause__ or seen.__context__
    if not any(marker in text for text in chain for marker in _UNAVAILABLE):
        return None
    for (host, port), (what, todo) in list(_WATCHED.items()):
        if unreachable_reason(host, port, timeout_s=1.0) is not None:
            return (f"Lost {what} at {host}:{port}: it stopped or was killed while this command ran. {todo} "
                    "(what did not finish was not recorded)")
    return None


def close_if_unreachable(session: SparkSession, host: str, port: int) -> None:
    """At exit PySpark sends a clean-up request, retried for minutes when the server is gone."""
    # A remote session, typed by pyspark's builder as the classic class (which has no is_stopped).
    stopped = session.is_stopped  # type: ignore[attr-defined]
    if not stopped and unreachable_reason(host, port, timeout_s=1.0) is not None:
        with suppress(Exception):
            session.client.close()


def local_session_config(conn: SparkConnectionConfig, mesh_dir: Path) -> dict[str, str]:
    """Builder settings for a classic session. Writes the log4j2 configuration into `mesh_dir`.

    A configured `metastore: postgres` and `warehouse` apply to any master. Without them, local
    masters get the embedded Derby metastore and the warehouse under `mesh_dir`, and a cluster
    master keeps what its own Hive configuration names. The user's `conn.config` wins over ours,
    except `spark.driver.extraJavaOptions` and `spark.driver.extraClassPath`: the user's are
    appended to ours rather than replacing them, so they cannot accidentally move Derby back into
    the cwd, turn the logs up again or drop the metastore's JDBC driver.
    """
    mesh_dir = Path(mesh_dir).resolve()
    mesh_dir.mkdir(parents=True, exist_ok=True)
    log_config = mesh_dir / LOG4J2_FILE
    if not log_config.exists() or log_config.read_text() != _LOG4J2_PROPERTIES:
        log_config.write_text(_LOG4J2_PROPERTIES)

    # Quoted: Spark splits these like a shell would (paths may hold spaces). A JVM crash reports into mesh_dir.
    java_options = f'"-Dlog4j2.configurationFile={log_config}" "-XX:ErrorFile={mesh_dir / "hs_err_pid%p.log"}"'
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
        archive = class_archive.java_options(str(conn.config.get("spark.driver.extraJavaOptions", "")))
        java_options = f"{java_options} {archive}".strip()
        settings.update(
            {
                METASTORE_URL_SETTING: _embedded_metastore_url(mesh_dir),
                WAREHOUSE_SETTING: str(mesh_dir / "warehouse"),
                "spark.sql.shuffle.partitions": str(2 * local_cores(conn.master)),
                **LOOPBACK_CONFIG,
            }
        )
        if conn.warehouse is None and WAREHOUSE_SETTING not in conn.config:
            settings.update(EMBEDDED_WAREHOUSE_CONFIG)
    elif loopback_master(conn.master):
        # Workers of a master on loopback are on this machine: they reach the driver there too.
        settings.update({k: v for k, v in LOOPBACK_CONFIG.items() if k.startswith("spark.driver.")})
    if conn.shared_catalog:
        assert conn.metastore is not None
        settings.update(metastore_settings(conn.metastore, driver_jar(conn.metastore)))
    if conn.warehouse is not None:
        settings[WAREHOUSE_SETTING] = conn.warehouse
    settings["spark.driver.extraJavaOptions"] = java_options
    for key, value in conn.config.items():
        value = _conf_value(value)
        if key == "spark.driver.extraJavaOptions":
            value = f"{java_options} {value}"
        elif key == "spark.driver.extraClassPath" and key in settings:
            value = f"{settings[key]}{os.pathsep}{value}"
        settings[key] = value
    return settings


def local_cores(master: str) -> int:
    """Tasks a local master runs at once (`local[4]` 4, `local[*]` our CPUs, `local` 1). Twice that is a query's
    shuffle partitions (Spark's tuning guide: 2-3 tasks a core): fewer than the cores leave some idle after every
    shuffle; adaptive execution (on by default) coalesces the small ones."""
    match = _LOCAL_MASTER.fullmatch(master.replace(" ", ""))
    if match is None or match.group(1) == "*":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads, workers, per_worker = match.groups()
    return max(1, int(threads) if threads else int(workers) * int(per_worker) if workers else 1)


def metastore_in_use(conn: SparkConnectionConfig, mesh_dir: Path) -> tuple[Path, MetastoreHolder] | None:
    """The embedded Derby metastore a local session of `conn` would open, and the other process
    that has it open; None when it is free or not Derby. Asked before a JVM starts (see
    `engine.metastore`); writes nothing. A shared (Postgres) metastore is never busy."""
    if not conn.is_local or conn.shared_catalog:
        return None
    url = conn.config.get(METASTORE_URL_SETTING)
    database = derby_database(_embedded_metastore_url(mesh_dir) if url is None else str(url))
    if database is None:
        return None
    holder = metastore_holder(database)
    return (database, holder) if holder is not None else None


def _embedded_metastore_url(mesh_dir: Path) -> str:
    return f"jdbc:derby:;databaseName={Path(mesh_dir).resolve() / 'metastore_db'};create=true"


def spark_error_message(exc: BaseException) -> str:
    """One line from a Spark failure: `[ERROR_CLASS] first line of the message`.

    Spark messages carry the analyzed plan and the JVM stack trace after the first line; users
    need neither to fix their SQL. A metastore that another process holds is said as such: its
    first line would be "Unable to instantiate SessionHiveMetaStoreClient".
    """
    busy = _busy_message(exc) or lost_server_message(exc)
    if busy is not None:
        return busy
    condition = _condition(exc)
    text = _message_text(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    if condition and not first.startswith(f"[{condition}"):
        first = f"[{condition}] {first}"
    if len(first) > _MAX_MESSAGE:
        first = first[: _MAX_MESSAGE - 3] + "..."
    return redact_secrets(first)


def _busy_message(exc: BaseException) -> str | None:
    database = derby_busy_database(exc)
    if database is None:
        return None
    return busy_message(database, metastore_holder(database) or MetastoreHolder())


def redact_secrets(text: str) -> str:
    """`sc://host:port/;token=abc` -> `sc://host:port/;token=***`: messages reach terminals and logs."""
    return redact_text(text)


def to_engine_error(exc: BaseException, context: str | None = None, sql: str | None = None) -> SparkSQLError:
    """Wrap any Spark/Py4J/Connect exception as the EngineError users see."""
    busy = _busy_message(exc)
    if busy is not None:  # says all there is to say: no "Spark query failed" in front
        return MetastoreBusyError(busy, condition="XSDB6", sql=sql)
    lost = lost_server_message(exc)
    if lost is not None:  # the same: not the step that happened to notice it
        return LostServerError(lost, sql=sql)
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
    The Connect client also warns when its retries run out, just before raising the error we
    report, and PySpark warns about its own use of a deprecated error getter.
    """
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]", category=UserWarning)
    warnings.filterwarnings("ignore", message="Deprecated in 4.0.0, use getCondition", category=FutureWarning)


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


_GRPC_DETAILS = re.compile(r'^\s*details = "(.*)"\s*$', re.MULTILINE)


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
    text = str(exc)
    if callable(get_message):
        try:
            message = get_message()
        except Exception:  # noqa: BLE001
            message = None
        if message:
            text = str(message)
    grpc_details = _GRPC_DETAILS.search(text)
    if grpc_details:  # SparkConnectGrpcException wraps the gRPC error's repr
        return f"Spark Connect server unreachable: {grpc_details.group(1)}"
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
    return SparkContext._active_spark_context is not None  # noqa: SLF001 - no public equivalent
