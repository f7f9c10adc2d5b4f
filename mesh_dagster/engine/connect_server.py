"""One Spark Connect server per project, shared by every process that needs the warehouse.

The embedded default keeps its Hive metastore in Derby, and Derby admits one JVM: a second
process (the Dagster daemon beside the webserver, a run worker, a `mesh` command) fails with
`ERROR XSDB6`. So when several processes must reach the warehouse at once, one long-lived
Connect server owns the metastore and everyone else is a client. It is started on demand,
survives the process that started it, and stops with `mesh spark stop` (`stop_server`).

Everything about the server lives in the project's `.mesh/`: `connect.json` (how to reach it),
`connect.log` (its output), `connect.lock` (serialises starting and stopping). The server uses
exactly the metastore, warehouse and log settings of the embedded session (`local_session_config`),
so switching between embedded and shared never changes what tables a project sees.

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
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError
from pyspark import SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession
from pyspark.version import __version__ as pyspark_version

from mesh_dagster.core.config.connections import METASTORE_URL_SETTING, SparkConnectionConfig
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.engine.metastore import MetastoreHolder
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
    "SHARED_ENV",
    "ServerInfo",
    "project_session",
    "server_status",
    "shared_requested",
    "start_server",
    "stop_server",
]

INFO_FILE = "connect.json"
LOG_FILE = "connect.log"
LOCK_FILE = "connect.lock"
SHARED_ENV = "MESH_SPARK_SHARED"

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_BIND_ADDRESS = "127.0.0.1"
_CLIENT_HOST = "localhost"
_STOP_GRACE_S = 30.0
_LOG_TAIL_LINES = 15
# A setting only our servers have: tells this project's server from any other process by its
# command line (pids are reused; the warehouse path can be overridden by the user's config).
_MARKER = "spark.mesh_dagster.mesh_dir"
# Printed by the JVM itself on every start; never the reason anything failed.
_LOG_NOISE = ("WARNING: Using incubator modules",)
# Environment that would turn the server's own launcher into a Connect *client*.
_CLIENT_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE")

# Servers started by this process: only the parent can reap a dead child, and until then the
# kernel keeps its pid alive as a zombie.
_CHILDREN: dict[int, subprocess.Popen] = {}
# Connect sessions of this process by URL: PySpark's own getOrCreate returns whatever session
# exists, even one of another server.
_SESSIONS: dict[str, SparkSession] = {}
_SESSIONS_LOCK = threading.Lock()


class ServerInfo(BaseModel):
    """What `connect.json` records about a running server."""

    pid: int
    port: int
    url: str
    token: str = Field(repr=False)  # a secret: kept out of reprs that may reach a log
    started_ts: int
    log_path: str
    mesh_dir: str
    master: str
    spark_version: str
    ready: bool = False

    @property
    def client_url(self) -> str:
        """The URL a client connects with: `url` plus the token."""
        return f"{self.url}/;token={self.token}"


# -- public API ----------------------------------------------------------------------------------


def start_server(
    conn: SparkConnectionConfig, mesh_dir: Path, port: int | None = None, timeout_s: float = 120
) -> ServerInfo:
    """The project's running server, started first if there is none.

    Safe to call from many processes at once: a file lock makes all but one wait for the one
    that starts it. Raises EngineError when Java is missing, when this process already holds the
    metastore with an embedded session, or when the server does not answer within `timeout_s`
    (with the end of its log, which says why).
    """
    mesh_dir = Path(mesh_dir).resolve()
    if not conn.is_local:
        raise EngineError(
            f"The shared Spark Connect server is only for local masters; this connection uses "
            f"{redact_text(conn.remote or conn.master)}, which already is a shared Spark."
        )
    if conn.shared_catalog:
        raise EngineError(
            "The shared Spark Connect server is for the embedded Derby metastore; this connection's "
            "metastore is on Postgres, where every process opens its own Spark session: no server is needed."
        )
    with _lock(mesh_dir, timeout_s + 30):
        info = _read_info(mesh_dir)
        if info is not None and _answers(info, mesh_dir):
            return info
        if info is not None:
            _terminate(info.pid, mesh_dir)  # half-started or wedged: it would hold Derby's lock
            _info_path(mesh_dir).unlink(missing_ok=True)
        _refuse_if_embedded_here(mesh_dir)
        _refuse_if_held_elsewhere(conn, mesh_dir)
        check_java()
        return _launch(conn, mesh_dir, port, timeout_s)


def stop_server(mesh_dir: Path, timeout_s: float = 150) -> bool:
    """Stop the project's server. False when none was running (a stale record is removed)."""
    mesh_dir = Path(mesh_dir).resolve()
    if not _info_path(mesh_dir).exists():
        return False
    with _lock(mesh_dir, timeout_s):
        info = _read_info(mesh_dir)
        if info is not None:
            _stop_client(info)
        stopped = info is not None and _terminate(info.pid, mesh_dir)
        _info_path(mesh_dir).unlink(missing_ok=True)
    return stopped


def server_status(mesh_dir: Path) -> ServerInfo | None:
    """The project's server if it is running and answering, else None.

    A record whose process is gone (killed, machine rebooted, pid reused) is deleted. A server
    that is alive but does not answer yet (another process is starting it) keeps its record.
    """
    mesh_dir = Path(mesh_dir).resolve()
    info = _read_info(mesh_dir)
    if info is None:
        if _info_path(mesh_dir).exists():
            _remove_stale(mesh_dir, None)
        return None
    if not _is_server_process(info.pid, mesh_dir):
        _remove_stale(mesh_dir, info.pid)
        return None
    return info if info.ready and _port_open(info.port) else None


def shared_requested() -> bool:
    """Whether the environment asks for the shared server (`MESH_SPARK_SHARED=1`)."""
    return os.environ.get(SHARED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def project_session(
    conn: SparkConnectionConfig, mesh_dir: Path, *, shared: bool | None = None
) -> SparkSession:
    """The session a project's Context should use.

    - `conn.remote` or a cluster `master`: that Spark, as `build_session` does.
    - a shared (Postgres) metastore: this process's own session, whatever `shared` says; every
      process may open the catalog, so the server is neither needed nor used.
    - local master, and the project's server is running: a client of it. The server holds the
      Derby metastore, so an embedded session could not open it anyway.
    - local master and `shared` (default: `MESH_SPARK_SHARED=1`): start the server if needed,
      then a client of it. A process already using Spark Connect is always shared.
    - otherwise: the embedded session.

    Raises EngineError when the answer is a Connect session but this process already runs an
    embedded one: PySpark cannot hold both.
    """
    mesh_dir = Path(mesh_dir).resolve()
    if not conn.is_local or conn.shared_catalog:
        return build_session(conn, mesh_dir)
    if shared is None:
        shared = shared_requested() or _connect_mode()
    info = server_status(mesh_dir)
    if info is None and not shared and _starting(mesh_dir):
        shared = True  # another process is starting it: wait for it rather than race it for Derby
    if info is None and not shared:
        if _connect_mode():
            raise EngineError(
                f"This process already uses Spark Connect, and the shared Spark server of {mesh_dir.parent} "
                f"is not running. Start it with `mesh spark start`."
            )
        return build_session(conn, mesh_dir)
    if _classic_running():
        reason = "its shared Spark server is running" if info is not None else "a shared Spark server was requested"
        raise EngineError(
            f"This process already runs an embedded Spark session, and a Spark Connect session cannot "
            f"be added to it, but {reason} for {mesh_dir.parent}. Use one kind per process: run "
            f"`mesh spark stop` to go back to embedded Spark, or unset {SHARED_ENV}."
        )
    if info is None:
        info = start_server(conn, mesh_dir)
    return _client_session(info, conn)


# -- launching -----------------------------------------------------------------------------------


def _launch(conn: SparkConnectionConfig, mesh_dir: Path, port: int | None, timeout_s: float) -> ServerInfo:
    port = _choose_port(port)
    token = uuid.uuid4().hex
    log_path = mesh_dir / LOG_FILE
    spark_home = _spark_home()
    command = _server_command(conn, mesh_dir, port, spark_home)
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
    env.update(SPARK_HOME=str(spark_home), SPARK_CONNECT_AUTHENTICATE_TOKEN=token)

    with open(log_path, "wb") as log:
        log.write(f"mesh_dagster: starting Spark Connect server on {_BIND_ADDRESS}:{port}\n".encode())
        log.flush()
        try:
            process = subprocess.Popen(
                command, env=env, cwd=mesh_dir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        except OSError as e:
            raise EngineError(f"Cannot start the Spark Connect server ({command[0]}): {e}") from None
    _CHILDREN[process.pid] = process
    info = ServerInfo(
        pid=process.pid, port=port, url=f"sc://{_CLIENT_HOST}:{port}", token=token, started_ts=now_ms(),
        log_path=str(log_path), mesh_dir=str(mesh_dir), master=conn.master, spark_version=pyspark_version,
    )
    # Recorded before it is ready, so a starter that dies now does not leave an unknown JVM behind.
    _write_info(mesh_dir, info)
    try:
        _await_ready(info, process, timeout_s)
    except BaseException:
        _terminate(process.pid, mesh_dir)
        _info_path(mesh_dir).unlink(missing_ok=True)
        raise
    info.ready = True
    _write_info(mesh_dir, info)
    return info


def _server_command(conn: SparkConnectionConfig, mesh_dir: Path, port: int, spark_home: Path) -> list[str]:
    """spark-submit of the Connect server class: no jar needed, SparkSubmit knows the class."""
    settings = local_session_config(conn, mesh_dir)
    settings.update(
        {
            "spark.master": conn.master,
            "spark.app.name": f"mesh_dagster Connect server ({mesh_dir.parent.name})",
            "spark.connect.grpc.binding.address": _BIND_ADDRESS,
            "spark.connect.grpc.binding.port": str(port),
            _MARKER: str(mesh_dir),
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
            sock.bind((_BIND_ADDRESS, port or 0))
        except OSError:
            raise EngineError(f"Cannot start the Spark Connect server: port {port} is already in use") from None
        return sock.getsockname()[1]


def _await_ready(info: ServerInfo, process: subprocess.Popen, timeout_s: float) -> None:
    """Wait for the port, then run a catalog query: the metastore opens lazily, on first use."""
    deadline = time.monotonic() + timeout_s
    while not _port_open(info.port):
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
        watch_server(session, _BIND_ADDRESS, info.port, "the project's shared Spark Connect server",
                     "Start it again with `mesh spark start`, then re-run")
        atexit.register(close_if_unreachable, session, _BIND_ADDRESS, info.port)
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
            f"Start the server before any embedded session: `mesh spark start`, or set {SHARED_ENV}=1."
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


# -- connect.json, the lock and processes ---------------------------------------------------------


def _info_path(mesh_dir: Path) -> Path:
    return mesh_dir / INFO_FILE


def _read_info(mesh_dir: Path) -> ServerInfo | None:
    try:
        return ServerInfo.model_validate(json.loads(_info_path(mesh_dir).read_text()))
    except (OSError, ValueError, ValidationError):
        return None


def _write_info(mesh_dir: Path, info: ServerInfo) -> None:
    """Atomically, readable by this user only: it holds the token."""
    path = _info_path(mesh_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(info.model_dump_json(indent=2))
    os.replace(tmp, path)


def _remove_stale(mesh_dir: Path, pid: int | None) -> None:
    """Delete a dead server's record, unless someone holds the lock (they are replacing it)."""
    with _try_lock(mesh_dir) as locked:
        if not locked:
            return
        current = _read_info(mesh_dir)
        if (current is None and pid is None) or (current is not None and current.pid == pid):
            _info_path(mesh_dir).unlink(missing_ok=True)


@contextlib.contextmanager
def _lock(mesh_dir: Path, timeout_s: float) -> Iterator[None]:
    lock = _file_lock(mesh_dir)
    try:
        lock.acquire(timeout=timeout_s, poll_interval=0.2)
    except Timeout:
        raise EngineError(
            f"Timed out after {timeout_s:g} s waiting for another process to finish starting or "
            f"stopping the Spark Connect server of {mesh_dir.parent} (lock {mesh_dir / LOCK_FILE})."
        ) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _try_lock(mesh_dir: Path) -> Iterator[bool]:
    lock = _file_lock(mesh_dir)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _file_lock(mesh_dir: Path) -> FileLock:
    """An flock on `connect.lock` (`filelock.FileLock`): the kernel drops it with its process, so a
    starter that dies leaves nothing stale. A new object per use: flock excludes other threads of this
    process too, as it must (one starter per project, whatever the thread)."""
    if os.name != "posix":  # the server's process group is stopped with killpg
        raise EngineError("The shared Spark Connect server needs a POSIX system (Linux or macOS).")
    # fallback_to_soft=False: on a filesystem without flock, fail rather than leave a marker that a
    # crashed starter would leave behind for good.
    return FileLock(mesh_dir / LOCK_FILE, fallback_to_soft=False)


def _starting(mesh_dir: Path) -> bool:
    info = _read_info(mesh_dir)
    return info is not None and not info.ready and _is_server_process(info.pid, mesh_dir)


def _answers(info: ServerInfo, mesh_dir: Path) -> bool:
    return info.ready and _is_server_process(info.pid, mesh_dir) and _port_open(info.port)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((_BIND_ADDRESS, port)) == 0


def _is_server_process(pid: int, mesh_dir: Path) -> bool:
    """Alive, and still this project's Connect server rather than a recycled pid."""
    child = _CHILDREN.get(pid)
    if child is not None:  # ours, and its pid cannot be reused before we reap it
        return child.poll() is None
    try:
        command = psutil.Process(pid).cmdline()  # a zombie's is empty (or raises ZombieProcess)
    except (psutil.Error, ValueError):  # gone, not ours to read, or not a pid at all
        return False
    return any(SERVER_CLASS in arg for arg in command) and f"{_MARKER}={mesh_dir}" in command


def _terminate(pid: int, mesh_dir: Path) -> bool:
    """SIGTERM (Spark shuts down cleanly and releases Derby), SIGKILL after a grace period."""
    if not _is_server_process(pid, mesh_dir):
        _reap(pid)
        return False
    for sig, wait_s in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            _signal(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _is_server_process(pid, mesh_dir):
            time.sleep(0.2)
        if not _is_server_process(pid, mesh_dir):
            break
    _reap(pid)
    return True


def _signal(pid: int, sig: int) -> None:
    """The server's whole process group: while starting, the JVM is still a shell script with a
    launcher child that must not outlive it. The server leads its own group (`start_new_session`)."""
    if os.getpgid(pid) == pid:
        os.killpg(pid, sig)
    else:
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=10)
