"""The project's warm Spark: one Spark Connect server per project, shared by every process that
needs the warehouse.

Starting Spark costs a JVM and ten seconds or more; a command that runs for two should not pay
it every time. So on a local master with the embedded metastore (the default) every command
reaches Spark through the project's server, like Gradle's daemon: the first command that needs it
starts it (`project_session`, or `start_early` beside the command's own work), later ones are
its clients, and it stops itself once idle (idle_watch.py) or on `mesh spark stop`. A client never
talks to a stale server: one started with another PySpark, mesh_dagster, Java or Spark settings is
restarted first (server_identity.py). The opt-out (`server.enabled: false`, `MESH_SPARK_SERVER=0`)
runs Spark in the command's own process.

The embedded default keeps its Hive metastore in Derby, and Derby admits one JVM: that is also why
Dagster's processes (webserver, daemon, run workers) share the server whatever the project chose.

Everything about the server lives in the project's `.mesh/` (server_record.py): `connect.json`
(how to reach it, what it was started with), `connect.log` (its output and its watcher's),
`connect.lock` (serialises starting, stopping and the idle stop), `connect.used` (its last use).
The server uses exactly the metastore, warehouse and log settings of the embedded session
(`local_session_config`), so switching between embedded and served never changes what tables a
project sees.

The server binds 127.0.0.1 only and requires a token (kept in the 0600 `connect.json`): Spark SQL
can read and write any file its user can, so other accounts on the machine must not get in.
PySpark accepts a token without TLS only for the host name `localhost`, hence URLs say
`sc://localhost:<port>` although the socket is bound to 127.0.0.1.

A classic (embedded) session and a Connect session cannot live in one Python process: PySpark
refuses to create a Connect session while a classic SparkContext runs, and once a Connect session
exists it routes every later builder to Connect. `project_session` therefore keeps a process on
whichever kind it started with and says so clearly when asked to mix them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

from pyspark import SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession
from pyspark.version import __version__ as pyspark_version

from mesh_dagster.core.config.connections import METASTORE_URL_SETTING, SparkConnectionConfig
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.engine.idle_watch import start_watcher
from mesh_dagster.engine.metastore import MetastoreHolder
from mesh_dagster.engine.server_identity import identity_change, server_identity
from mesh_dagster.engine.server_process import (
    BIND_ADDRESS,
    CHILDREN,
    MARKER,
    SERVER_CLASS,
    clients,
    is_server_process,
    port_open,
    retire,
    server_status,
)
from mesh_dagster.engine.server_record import (
    INFO_FILE,
    LOG_FILE,
    SERVER_ENV,
    ServerInfo,
    info_path,
    mark_used,
    read_info,
    server_lock,
    write_info,
)
from mesh_dagster.engine.session import (
    _configure,
    build_session,
    check_java,
    close_if_unreachable,
    fail_fast,
    local_session_config,
    metastore_in_use,
    quiet_pyspark_error_logs,
    spark_error_message,
    to_engine_error,
    watch_server,
)

__all__ = [
    "INFO_FILE",
    "LOG_FILE",
    "SERVER_ENV",
    "ServerInfo",
    "project_session",
    "server_requested",
    "server_status",
    "start_server",
    "stop_server",
]

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")

_CLIENT_HOST = "localhost"
_LOG_TAIL_LINES = 15
# Printed by the JVM itself on every start; never the reason anything failed.
_LOG_NOISE = ("WARNING: Using incubator modules",)
# Environment that would turn the server's own launcher into a Connect *client*.
_CLIENT_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE")

# Connect sessions of this process by URL: PySpark's own getOrCreate returns whatever session
# exists, even one of another server.
_SESSIONS: dict[str, SparkSession] = {}
_SESSIONS_LOCK = threading.Lock()
logger = logging.getLogger(__name__)


# -- public API ----------------------------------------------------------------------------------


def start_server(
    conn: SparkConnectionConfig, mesh_dir: Path, port: int | None = None, timeout_s: float = 120
) -> ServerInfo:
    """The project's running server, started first if there is none, restarted first if it was
    started with what changed since (server_identity.py). Marks it used (the idle stop counts anew).

    Safe to call from many processes at once: a file lock makes all but one wait for the one
    that starts it. Raises EngineError when Java is missing, when this process already holds the
    metastore with an embedded session, when a stale server has clients (restarting it would cut
    their work off), or when the server does not answer within `timeout_s` (with the end of its
    log, which says why).
    """
    mesh_dir = Path(mesh_dir).resolve()
    if not conn.has_server:
        raise EngineError(_no_server_here(conn))
    identity = server_identity(conn)
    with server_lock(mesh_dir, timeout_s + 30):
        info = read_info(mesh_dir)
        if info is not None and _answers(info, mesh_dir):
            change = identity_change(info.identity, identity)
            if change is None:
                _follow_idle_time(info, conn, mesh_dir)
                mark_used(mesh_dir)
                return info
            _refuse_restart_in_use(info, change)
            logger.warning(f"Restarting the project's Spark server: {change} since it started.")
        if info is not None:
            _stop_client(info)
            retire(info.pid, mesh_dir)  # half-started, wedged or stale: it would hold Derby's lock
        _refuse_if_embedded_here(mesh_dir)
        _refuse_if_held_elsewhere(conn, mesh_dir)
        check_java()
        info = _launch(conn, mesh_dir, port, timeout_s, identity)
        mark_used(mesh_dir)
        return info


def stop_server(mesh_dir: Path, timeout_s: float = 150) -> bool:
    """Stop the project's server. False when none was running (a stale record is removed)."""
    mesh_dir = Path(mesh_dir).resolve()
    if not info_path(mesh_dir).exists():
        return False
    with server_lock(mesh_dir, timeout_s):
        info = read_info(mesh_dir)
        if info is None:
            info_path(mesh_dir).unlink(missing_ok=True)
            return False
        _stop_client(info)
        return retire(info.pid, mesh_dir)


def server_requested(conn: SparkConnectionConfig) -> bool:
    """Whether commands reach Spark through the warm server: `MESH_SPARK_SERVER` when it is set
    (on: 1, true, yes, on; off: 0, false, no, off), else the connection's `server.enabled`."""
    raw = os.environ.get(SERVER_ENV, "").strip().lower()
    if not raw:
        return conn.server.enabled
    if raw in _ON or raw in _OFF:
        return raw in _ON
    raise EngineError(f"{SERVER_ENV}={raw!r} is neither on ({', '.join(_ON)}) nor off ({', '.join(_OFF)}).")


def project_session(
    conn: SparkConnectionConfig, mesh_dir: Path, *, shared: bool | None = None
) -> SparkSession:
    """The session a project's Context should use.

    - `conn.remote`, a cluster `master` or a shared (Postgres) metastore: the process's own session,
      as `build_session` makes it; every process may open the catalog, so no server is needed.
    - a local master on the embedded metastore, the server requested (`shared`, default:
      `server_requested`, which is true unless opted out): a client of the project's warm server,
      started (or restarted: never a stale one) when needed.
    - opted out, and the project's server idles: it is stopped, then the embedded session.
    - opted out, but the project's server has clients (or is being started): a client of it, with a
      warning. The server holds the Derby metastore, so an embedded session could not open it.
    - opted out: the embedded session, in this process.

    Raises EngineError when the answer is a Connect session but this process already runs an
    embedded one: PySpark cannot hold both.
    """
    mesh_dir = Path(mesh_dir).resolve()
    if not conn.has_server:
        return build_session(conn, mesh_dir)
    if shared is None:
        shared = server_requested(conn) or _connect_mode()
    if not shared and not _server_kept(mesh_dir):
        if _connect_mode():
            raise EngineError(
                f"This process already uses Spark Connect, and the Spark server of {mesh_dir.parent} "
                f"is not running. Start it with `mesh spark start`."
            )
        return build_session(conn, mesh_dir)
    if _classic_running():
        raise EngineError(
            f"This process already runs an embedded Spark session, and a Spark Connect session cannot "
            f"be added to it, but the Spark server of {mesh_dir.parent} is asked for or running. Use one "
            f"kind per process: set {SERVER_ENV}=0 for embedded Spark only, and `mesh spark stop`."
        )
    return _client_session(start_server(conn, mesh_dir), conn)


def _server_kept(mesh_dir: Path) -> bool:
    """Opted out: whether the project's server must serve this process anyway. An idle one is stopped
    (its Derby lock would keep the embedded session out); one with clients, or starting, is kept."""
    if server_status(mesh_dir) is None and not _starting(mesh_dir):
        return False
    with server_lock(mesh_dir, 150):
        info = read_info(mesh_dir)
        if info is None or not is_server_process(info.pid, mesh_dir):
            info_path(mesh_dir).unlink(missing_ok=True)
            return False
        in_use = clients(info.pid, info.port) if info.ready else 1
        if in_use:
            logger.warning(f"Spark runs in this process when the project's server is off ({SERVER_ENV}=0 or "
                           f"`server.enabled: false`), but the server is in use by {in_use} client(s) and holds "
                           f"the metastore: this command is its client too.")
            return True
        retire(info.pid, mesh_dir)
        return False


def start_early(conn: SparkConnectionConfig, mesh_dir: Path) -> None:
    """Start the project's server in a thread, when this process will want it and it is not running:
    the command's own work (loading the project, planning) overlaps the JVM's start. A failure is
    left to the command's own `project_session`, which meets the same cause and reports it."""
    mesh_dir = Path(mesh_dir).resolve()
    try:
        wanted = conn.has_server and server_requested(conn) and not _classic_running()
    except EngineError:
        return
    if wanted and server_status(mesh_dir) is None:
        threading.Thread(target=_start_quietly, args=(conn, mesh_dir), name="mesh-spark-start", daemon=True).start()


def _start_quietly(conn: SparkConnectionConfig, mesh_dir: Path) -> None:
    try:
        start_server(conn, mesh_dir)
    except Exception:  # noqa: BLE001 - reported by the command when it asks for Spark itself
        logger.debug("Starting the project's Spark server early failed", exc_info=True)


def _no_server_here(conn: SparkConnectionConfig) -> str:
    if not conn.is_local:
        return (f"The project's Spark server is only for local masters; this connection uses "
                f"{redact_text(conn.remote or conn.master)}, which already is a shared Spark.")
    return ("The project's Spark server is for the embedded Derby metastore; this connection's metastore "
            "is on Postgres, where every process opens its own Spark session: no server is needed.")


def _follow_idle_time(info: ServerInfo, conn: SparkConnectionConfig, mesh_dir: Path) -> None:
    """`server.idle_minutes` changed in config.yaml: the watcher follows it, no restart needed."""
    idle_s = conn.server.idle_minutes * 60
    if info.idle_s != idle_s:
        info.idle_s = idle_s
        write_info(mesh_dir, info)


def _refuse_restart_in_use(info: ServerInfo, change: str) -> None:
    in_use = clients(info.pid, info.port)
    if in_use:
        raise EngineError(
            f"The project's Spark server must restart ({change} since it started), but {in_use} "
            f"client{'s are' if in_use > 1 else ' is'} using it (a command, a Dagster run or a notebook). "
            f"Run this again once they finish, or stop it for everyone with `mesh spark stop`."
        )


# -- launching -----------------------------------------------------------------------------------


def _launch(conn: SparkConnectionConfig, mesh_dir: Path, port: int | None, timeout_s: float,
            identity: dict[str, str]) -> ServerInfo:
    port = _choose_port(port)
    token = uuid.uuid4().hex
    log_path = mesh_dir / LOG_FILE
    spark_home = _spark_home()
    command = _server_command(conn, mesh_dir, port, spark_home)
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
    env.update(SPARK_HOME=str(spark_home), SPARK_CONNECT_AUTHENTICATE_TOKEN=token)

    with open(log_path, "wb") as log:
        log.write(f"mesh_dagster: starting Spark Connect server on {BIND_ADDRESS}:{port}\n".encode())
        log.flush()
        try:
            process = subprocess.Popen(
                command, env=env, cwd=mesh_dir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        except OSError as e:
            raise EngineError(f"Cannot start the Spark Connect server ({command[0]}): {e}") from None
    CHILDREN[process.pid] = process
    info = ServerInfo(
        pid=process.pid, port=port, url=f"sc://{_CLIENT_HOST}:{port}", token=token, started_ts=now_ms(),
        log_path=str(log_path), mesh_dir=str(mesh_dir), master=conn.master, spark_version=pyspark_version,
        identity=identity, idle_s=conn.server.idle_minutes * 60,
    )
    # Recorded before it is ready, so a starter that dies now does not leave an unknown JVM behind.
    write_info(mesh_dir, info)
    try:
        _await_ready(info, process, timeout_s)
    except BaseException:
        retire(process.pid, mesh_dir)
        raise
    info.ready = True
    info.watcher_pid = start_watcher(mesh_dir, process.pid).pid
    write_info(mesh_dir, info)
    return info


def _server_command(conn: SparkConnectionConfig, mesh_dir: Path, port: int, spark_home: Path) -> list[str]:
    """spark-submit of the Connect server class: no jar needed, SparkSubmit knows the class."""
    settings = local_session_config(conn, mesh_dir)
    settings.update(
        {
            "spark.master": conn.master,
            "spark.app.name": f"mesh_dagster Connect server ({mesh_dir.parent.name})",
            "spark.connect.grpc.binding.address": BIND_ADDRESS,
            "spark.connect.grpc.binding.port": str(port),
            MARKER: str(mesh_dir),
        }
    )
    command = [str(spark_home / "bin" / "spark-submit"), "--class", SERVER_CLASS]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def _spark_home() -> Path:
    """Spark's home as PySpark itself finds it: SPARK_HOME, else the installed pyspark package."""
    home = Path(_find_spark_home())
    if not (home / "bin" / "spark-submit").is_file():
        raise EngineError(f"Cannot start the Spark Connect server: no bin/spark-submit under Spark home {home}")
    return home


def _choose_port(port: int | None) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((BIND_ADDRESS, port or 0))
        except OSError:
            raise EngineError(f"Cannot start the Spark Connect server: port {port} is already in use") from None
        return sock.getsockname()[1]


def _await_ready(info: ServerInfo, process: subprocess.Popen, timeout_s: float) -> None:
    """Wait for the port, then run a catalog query: the metastore opens lazily, on first use."""
    deadline = time.monotonic() + timeout_s
    while not port_open(info.port):
        if process.poll() is not None:
            raise EngineError(
                f"The Spark Connect server exited during start-up (exit code {process.returncode}). "
                f"{_log_tail(info)}"
            )
        if time.monotonic() > deadline:
            raise EngineError(f"The Spark Connect server did not start within {timeout_s:g} s. {_log_tail(info)}")
        time.sleep(0.25)
    try:
        _probe(info)
    except Exception as e:  # noqa: BLE001 - any failure of the first query means the server is unusable
        log = Path(info.log_path).read_text(errors="replace") if Path(info.log_path).exists() else ""
        if "XSDB6" in log or "XSDB6" in str(e):  # another process booted Derby after we checked
            raise EngineError(_held_elsewhere(Path(info.mesh_dir), MetastoreHolder())) from None
        raise EngineError(
            f"The Spark Connect server started but does not answer queries: {spark_error_message(e)}. "
            f"{_log_tail(info)}"
        ) from None


def _probe(info: ServerInfo) -> None:
    # The Connect session class is used directly: the public builder would flip this whole
    # process into Connect mode, which a process that only starts the server must not be.
    # Imported here on purpose: the Connect client (grpc, ~1.5 s to import) is needed only to probe
    # a server, and every process with an embedded (classic) session imports this module too.
    from pyspark.sql.connect.session import SparkSession as ConnectSession  # deliberately lazy, see above

    session = ConnectSession(connection=info.client_url)
    fail_fast(session)
    try:
        session.sql("SHOW DATABASES").collect()
    finally:
        session.stop()


def _log_tail(info: ServerInfo) -> str:
    path = Path(info.log_path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"No log at {path}."
    lines = [line for line in lines if line.strip() and not line.startswith(_LOG_NOISE)]
    if not lines:
        return f"Its log ({path}) is empty."
    tail = "\n".join(lines[-_LOG_TAIL_LINES:])
    return f"End of its log ({path}):\n{tail}"


# -- clients -------------------------------------------------------------------------------------


def _client_session(info: ServerInfo, conn: SparkConnectionConfig) -> SparkSession:
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(info.client_url)
        # A remote session, typed by pyspark's builder as the classic class (which has no is_stopped).
        if session is None or session.is_stopped:  # type: ignore[attr-defined]
            session = _SESSIONS[info.client_url] = _new_client_session(info, conn)
        return session


def _new_client_session(info: ServerInfo, conn: SparkConnectionConfig) -> SparkSession:
    quiet_pyspark_error_logs()
    builder = SparkSession.builder.remote(info.client_url)
    for key, value in conn.config.items():
        # Static settings are the server's (it was started with them); the builder ignores them.
        builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
    context = f"Cannot use the shared Spark Connect server at {info.url}"
    try:
        session = builder.create()
        # The server is ours, on this machine: a closed port means it is gone, not restarting.
        watch_server(session, BIND_ADDRESS, info.port, "the project's shared Spark Connect server",
                     "Run the command again: it starts the server anew (its log: .mesh/connect.log)")
        atexit.register(close_if_unreachable, session, BIND_ADDRESS, info.port)
    except Exception as e:  # noqa: BLE001
        raise to_engine_error(e, context) from e
    _configure(session, conn, context)
    return session


def _stop_client(info: ServerInfo) -> None:
    """This process's own session first: once the server is gone, stopping it would retry."""
    with _SESSIONS_LOCK:
        session = _SESSIONS.pop(info.client_url, None)
    if session is not None:
        with contextlib.suppress(Exception):
            session.stop()


def _classic_running() -> bool:
    return SparkContext._active_spark_context is not None  # noqa: SLF001 - no public equivalent


def _connect_mode() -> bool:
    return "SPARK_CONNECT_MODE_ENABLED" in os.environ


def _refuse_if_embedded_here(mesh_dir: Path) -> None:
    """An embedded session of this project in this process owns Derby; the server could not."""
    context = SparkContext._active_spark_context  # noqa: SLF001
    if context is None:
        return
    url = context.getConf().get(METASTORE_URL_SETTING, "") or ""
    if str(mesh_dir / "metastore_db") in url:
        raise EngineError(
            f"This process already runs an embedded Spark session on the metastore in {mesh_dir} and "
            f"holds its Derby lock until it exits, so the shared Spark Connect server could not open it. "
            f"Start the server before any embedded session (`mesh spark start`), or set {SERVER_ENV}=0."
        )


def _refuse_if_held_elsewhere(conn: SparkConnectionConfig, mesh_dir: Path) -> None:
    """Another process's embedded session has Derby: the server would start, then fail its probe."""
    in_use = metastore_in_use(conn, mesh_dir)
    if in_use is not None:
        raise EngineError(_held_elsewhere(mesh_dir, in_use[1]))


def _held_elsewhere(mesh_dir: Path, holder: MetastoreHolder) -> str:
    return (
        f"The Spark Connect server cannot open the metastore in {mesh_dir}: {holder.describe()} holds its "
        f"Derby lock (an embedded Spark session of this project). Stop that process, then run "
        f"`mesh spark start` again."
    )


# -- the record --------------------------------------------------------------------------------


def _starting(mesh_dir: Path) -> bool:
    info = read_info(mesh_dir)
    return info is not None and not info.ready and is_server_process(info.pid, mesh_dir)


def _answers(info: ServerInfo, mesh_dir: Path) -> bool:
    return info.ready and is_server_process(info.pid, mesh_dir) and port_open(info.port)
