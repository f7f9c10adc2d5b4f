"""The shared local Spark Connect server, with real JVMs and real client processes.

Kept cheap for a 2-core machine shared with other Spark tests: one server (master local[1])
serves most tests; the CLI lifecycle test starts a second one; error paths die early. Clients
run in their own processes, as the Dagster webserver, daemon and runs would, and because a
classic session may already live in this pytest process. Every server is stopped on teardown.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.connect_server import (
    INFO_FILE,
    LOG_FILE,
    SERVER_CLASS,
    ServerInfo,
    server_status,
    start_server,
    stop_server,
)
from tests.listening_sockets import descendants, is_loopback, listening

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
gateways:
  local:
    connection:
      master: local[1]
      config:
        spark.sql.shuffle.partitions: 2
model_defaults:
  dialect: spark
"""
CONN = SparkConnectionConfig(master="local[1]", config={"spark.sql.shuffle.partitions": 2})

# Starts (or finds) the server of a project, as any process of the project would.
START = """
import json, sys, time
from pathlib import Path
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.engine.connect_server import start_server
project = Path(sys.argv[1])
started = time.monotonic()
info = start_server(load_config(project).gateway().connection, project / ".mesh")
print(json.dumps({"pid": info.pid, "port": info.port, "token": info.token, "seconds": time.monotonic() - started}))
"""

# A project process doing DDL and queries; it then reads what the other process created.
CLIENT = """
import json, sys, time
from pathlib import Path
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.engine.connect_server import project_session
project, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
spark = project_session(load_config(project).gateway().connection, project / ".mesh")
engine = SparkEngine(spark)
engine.catalog.create_schema(me)
for i in range(3):
    engine.session.execute(f"CREATE TABLE {me}.t{i} USING parquet AS SELECT id FROM range({i + 2})")
engine.catalog.create_view(f"{me}.v", f"SELECT count(*) AS n FROM {me}.t2")
(project / f"{me}.done").touch()
deadline = time.monotonic() + 600
while not (project / f"{other}.done").exists():
    if time.monotonic() > deadline:
        sys.exit("the other client never finished")
    time.sleep(0.2)
location = [r for r in engine.session.fetchall(f"DESCRIBE DATABASE {me}") if r[0] == "Location"][0][1]
print(json.dumps({
    "session": type(spark).__module__,
    "other_view": engine.session.fetchall(f"SELECT n FROM {other}.v")[0][0],
    "other_tables": sorted(engine.catalog.list_objects(other)),
    "location": location,
    "overwrite_mode": spark.conf.get("spark.sql.sources.partitionOverwriteMode"),
}))
"""

# An embedded session of the project that holds Derby's lock, then tries to go shared.
EMBEDDED = """
import sys
from pathlib import Path
from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.connect_server import project_session, start_server
from mesh_dagster.engine.session import build_session
from mesh_dagster.core.config.connections import SparkConnectionConfig
mesh_dir = Path(sys.argv[1])
conn = SparkConnectionConfig(master="local[1]")
spark = build_session(conn, mesh_dir)
spark.sql("SHOW DATABASES").collect()
for attempt in (lambda: start_server(conn, mesh_dir), lambda: project_session(conn, mesh_dir, shared=True)):
    try:
        attempt()
        print("NO ERROR", flush=True)
    except EngineError as e:
        print("ERROR", e, flush=True)
print("HOLDING", flush=True)
sys.stdin.read()
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MESH_SPARK_SERVER"}  # the product's default
    return {**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}


def _python(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True, env=_env())


def _finish(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    return json.loads(out.strip().splitlines()[-1])


def _mesh(project: Path, *args: str) -> subprocess.CompletedProcess:
    code = ("import sys; from mesh_dagster.cli.main import cli; from mesh_dagster.cli.spark_commands import spark; "
            "cli.add_command(spark); cli(sys.argv[1:], obj={})")
    return subprocess.run([sys.executable, "-c", code, "-p", str(project), *args], capture_output=True, text=True,
                          env=_env(), timeout=600)


def _alive(pid: int) -> bool:
    try:
        return SERVER_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _make_sure_stopped(mesh_dir: Path, pids: set[int]) -> None:
    """Teardown: never leave a JVM behind, even when a test failed half-way."""
    stop_server(mesh_dir)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A project whose server two processes asked for at the same moment."""
    project = tmp_path_factory.mktemp("shared_project")
    (project / "config.yaml").write_text(CONFIG)
    starters = [_python(START, str(project)) for _ in range(2)]
    results = []
    try:
        results = [_finish(p) for p in starters]
        yield {"project": project, "mesh_dir": project / ".mesh", "starts": results}
    finally:
        for p in starters:
            if p.poll() is None:
                p.kill()
        _make_sure_stopped(project / ".mesh", {r["pid"] for r in results})


def test_two_processes_starting_at_once_get_one_server(shared):
    first, second = shared["starts"]
    assert first["pid"] == second["pid"]
    assert (first["port"], first["token"]) == (second["port"], second["token"])
    assert _alive(first["pid"])


def test_connect_json_describes_the_server(shared):
    mesh_dir = shared["mesh_dir"]
    path = mesh_dir / INFO_FILE
    data = json.loads(path.read_text())
    info = ServerInfo.model_validate(data)
    assert info.pid == shared["starts"][0]["pid"]
    assert info.url == f"sc://localhost:{info.port}"
    assert info.ready is True
    assert Path(info.log_path) == mesh_dir / LOG_FILE and Path(info.log_path).exists()
    assert info.mesh_dir == str(mesh_dir.resolve())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the token
    assert server_status(mesh_dir) == info


def test_server_uses_the_project_metastore_and_binds_loopback(shared):
    command = Path(f"/proc/{shared['starts'][0]['pid']}/cmdline").read_bytes().decode().split("\0")
    mesh_dir = str(shared["mesh_dir"].resolve())
    assert "spark.sql.catalogImplementation=hive" in command
    assert "spark.connect.grpc.binding.address=127.0.0.1" in command
    assert f"spark.sql.warehouse.dir={mesh_dir}/warehouse" in command
    assert any(c.startswith("spark.hadoop.javax.jdo.option.ConnectionURL=") and f"{mesh_dir}/metastore_db" in c
               for c in command)
    assert (shared["mesh_dir"] / "metastore_db").is_dir()
    assert not (shared["project"] / "metastore_db").exists()


def test_server_listens_on_loopback_only_and_authenticates(shared):
    pid = shared["starts"][0]["pid"]
    sockets = listening(descendants(pid))
    info = server_status(shared["mesh_dir"])
    assert (pid, "127.0.0.1", info.port) in sockets  # gRPC
    assert len(sockets) > 1  # and Spark's own driver endpoints
    exposed = [s for s in sockets if not is_loopback(s[1])]
    assert exposed == [], f"listening beyond loopback: {exposed}"
    command = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert "spark.authenticate=true" in command
    assert not any(info.token in c for c in command)  # the token travels in the environment only


def test_start_is_idempotent(shared):
    info = start_server(CONN, shared["mesh_dir"])
    again = start_server(CONN, shared["mesh_dir"])
    assert info.pid == again.pid == shared["starts"][0]["pid"]
    assert info.token == again.token


def test_two_client_processes_share_the_warehouse(shared):
    project = shared["project"]
    a = _python(CLIENT, str(project), "client_a", "client_b")
    b = _python(CLIENT, str(project), "client_b", "client_a")
    out_a, out_b = _finish(a), _finish(b)
    for out, _other in ((out_a, "client_b"), (out_b, "client_a")):
        assert out["session"].startswith("pyspark.sql.connect")
        assert out["other_view"] == 4
        assert out["other_tables"] == ["t0", "t1", "t2", "v"]
        assert str(shared["mesh_dir"].resolve() / "warehouse") in out["location"]
        assert out["overwrite_mode"] == "dynamic"


def test_cli_status_shows_the_running_server(shared):
    result = _mesh(shared["project"], "spark", "status")
    assert result.returncode == 0, result.stderr
    info = server_status(shared["mesh_dir"])
    assert f"Running: {info.url}" in result.stdout
    assert f"pid {info.pid}, master local[1]" in result.stdout
    assert f"token: set, in {shared['project'].resolve() / '.mesh' / INFO_FILE} (readable by you only)" \
        in result.stdout
    assert f"log {info.log_path}" in result.stdout
    assert info.token not in result.stdout + result.stderr


def test_cli_lifecycle(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    mesh_dir = tmp_path / ".mesh"
    pids: set[int] = set()
    try:
        started = _mesh(tmp_path, "spark", "start")
        assert started.returncode == 0, started.stderr
        info = server_status(mesh_dir)
        assert info is not None
        pids.add(info.pid)
        assert "Started the Spark Connect server" in started.stdout
        assert started.stdout.strip().splitlines()[-2:] == [
            info.url, f"token: set, in {mesh_dir.resolve() / INFO_FILE} (readable by you only)"]

        again = _mesh(tmp_path, "spark", "start")
        assert f"already running (pid {info.pid})" in again.stdout
        for output in (started, again):
            assert info.token not in output.stdout + output.stderr
        assert info.token not in Path(info.log_path).read_text()
        assert server_status(mesh_dir).pid == info.pid

        stopped = _mesh(tmp_path, "spark", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert "Stopped the Spark Connect server." in stopped.stdout
        assert not _alive(info.pid)
        assert not (mesh_dir / INFO_FILE).exists()

        status = _mesh(tmp_path, "spark", "status")
        assert status.returncode == 1
        assert "No Spark Connect server is running" in status.stdout
    finally:
        _make_sure_stopped(mesh_dir, pids)


def test_a_server_that_cannot_start_reports_its_log(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    conn = SparkConnectionConfig(master="local[1]", config={"spark.driver.memory": "not-a-size"})
    with pytest.raises(EngineError) as exc:
        start_server(conn, mesh_dir)
    message = str(exc.value)
    assert "The Spark Connect server exited during start-up" in message
    assert f"End of its log ({mesh_dir.resolve() / LOG_FILE})" in message
    assert "not-a-size" in message
    assert not (mesh_dir / INFO_FILE).exists()


def test_a_server_that_is_too_slow_is_killed(tmp_path):
    mesh_dir = tmp_path / ".mesh"
    with pytest.raises(EngineError) as exc:
        start_server(CONN, mesh_dir, timeout_s=0.5)
    assert "The Spark Connect server did not start within 0.5 s." in str(exc.value)
    assert not (mesh_dir / INFO_FILE).exists()
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _alive(int(p.name))
                 and str(mesh_dir.resolve()).encode() in (p / "cmdline").read_bytes()]
    assert leftovers == []


def test_a_project_held_by_an_embedded_session_cannot_go_shared(tmp_path):
    """The Derby lock of an embedded session: refused in its own process, reported from others."""
    mesh_dir = tmp_path / ".mesh"
    holder = _python(EMBEDDED, str(mesh_dir))
    lines: list[str] = []
    try:
        for line in holder.stdout:
            lines.append(line.strip())
            if line.startswith("HOLDING"):
                break
        assert lines and lines[-1] == "HOLDING", holder.stderr.read() if holder.poll() is not None else lines
        refused_here, no_mixing = lines[-3], lines[-2]
        assert refused_here.startswith("ERROR This process already runs an embedded Spark session on the metastore")
        assert "holds its Derby lock until it exits" in refused_here
        assert no_mixing.startswith("ERROR This process already runs an embedded Spark session, and a Spark "
                                    "Connect session cannot be added to it")

        with pytest.raises(EngineError) as exc:
            start_server(CONN, mesh_dir)
        assert "cannot open the metastore" in str(exc.value)
        assert f"another process (pid {holder.pid}: python -c" in str(exc.value)  # said before starting a JVM
        assert "holds its Derby lock (an embedded Spark session of this project)" in str(exc.value)
        assert server_status(mesh_dir) is None
        assert not (mesh_dir / INFO_FILE).exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
        stop_server(mesh_dir)


def test_a_project_with_remote_uses_that_server_and_its_settings(shared, tmp_path):
    """`remote:` in config.yaml: the session reaches the server (token included) and sends the
    project's SQL settings; the warehouse is the server's, not a new one in this project."""
    info = server_status(shared["mesh_dir"])
    assert info is not None
    project = tmp_path / "remote_project"
    project.mkdir()
    (project / "config.yaml").write_text(
        "gateways:\n  local:\n    connection:\n"
        f"      remote: {info.client_url}\n"
        "      config:\n        spark.sql.shuffle.partitions: 3\n"
        "model_defaults:\n  dialect: spark\n")
    done = _mesh(project, "fetchdf", "SET spark.sql.shuffle.partitions")
    assert done.returncode == 0, done.stderr
    assert re.search(r"spark\.sql\.shuffle\.partitions\s+3\s*$", done.stdout, re.MULTILINE), done.stdout
    assert info.token not in done.stdout + done.stderr
    assert not (project / ".mesh" / "warehouse").exists()
