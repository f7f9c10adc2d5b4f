"""Real shared services for the team deployment tests (fixtures exported by conftest.py): scratch
Postgres databases, a Spark standalone cluster (master and worker from the installed PySpark's `spark-class`, on 127.0.0.1)
and a Spark Connect server the user runs (spark-submit of Spark's own server class).

Every JVM runs in a process of its own; every service is stopped and every database dropped on
teardown. Postgres missing fails the test loudly (never a skip).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import yaml

from tests.spark.quickstart_copy import quickstart

REPO = Path(__file__).resolve().parents[2]
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


# -- Postgres --------------------------------------------------------------------------------------


def _admin() -> psycopg.Connection:
    try:
        return psycopg.connect(dbname="test", autocommit=True, connect_timeout=5, **PG)  # type: ignore[arg-type]
    except psycopg.Error as e:
        raise AssertionError(f"These tests need Postgres at 127.0.0.1:5432 (user postgres, database test): {e}") from e


@pytest.fixture
def scratch_db() -> Iterator[callable]:
    """`scratch_db()` -> the name of a new empty database, dropped after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"mesh_team_{uuid.uuid4().hex[:10]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return name

    yield make
    with _admin() as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_tables(database: str) -> list[str]:
    with psycopg.connect(dbname=database, connect_timeout=5, **PG) as conn:  # type: ignore[arg-type]
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
        return sorted(r[0] for r in rows)


# -- projects -----------------------------------------------------------------------------------------


def team_project(root: Path, schema: str, connection: dict, state_db: str | None = None) -> Path:
    """The quickstart (tests/spark/quickstart_copy.py) with `connection` as its Spark connection and,
    with `state_db`, its state in that Postgres database."""
    quickstart(root, schema)
    config_path = root / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    gateway = config["gateways"]["local"]
    gateway["connection"] = {"type": "spark", **connection}
    if state_db is not None:
        gateway["state_connection"] = {"type": "postgres", "database": state_db, **PG}
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def postgres_metastore(database: str) -> dict:
    return {"type": "postgres", "database": database, **PG}


def env() -> dict[str, str]:
    """The tests' environment, with this worktree's mesh_dagster first (not an installed copy)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250",
            "PYTHONPATH": f"{REPO}{os.pathsep}{path}" if path else str(REPO)}


def mesh_popen(project: Path, *args: str, input: str | None = None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env())
    if proc.stdin is not None:
        proc.stdin.write(input or "")
        proc.stdin.close()
        proc.stdin = None  # written: communicate() must not flush it again
    return proc


def finish(proc: subprocess.Popen, what: str, timeout: float = 600) -> str:
    """Wait for `proc`; its stdout, or an assertion naming `what` with both outputs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish within {timeout:g} s:\n{out}\n{err}") from None
    if proc.returncode != 0:
        raise AssertionError(f"{what} failed ({proc.returncode}):\n{out}\n{err}")
    return out


def mesh(project: Path, *args: str, input: str | None = None, timeout: float = 600) -> str:
    return finish(mesh_popen(project, *args, input=input), f"mesh {' '.join(args)}", timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check, what: str, timeout_s: float, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited ({proc.returncode}). "
                                 f"{log.read_text()[-3000:] if log else ''}")
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} not ready within {timeout_s:g} s. {log.read_text()[-3000:] if log else ''}")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# -- Spark processes ------------------------------------------------------------------------------


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {k: v for k, v in env().items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    out.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_NO_DAEMONIZE="1")
    out.update(extra or {})
    return out


def start_process(command: list[str], log: Path, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=_spark_env(extra_env), start_new_session=True)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM to the process's own group (spark-class execs java), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass
class Cluster:
    master_url: str
    web_port: int
    work_dir: Path


def _alive_workers(web_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as answer:
        return int(json.load(answer).get("aliveworkers", 0))


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Spark standalone master and one worker (1 core, 1 GiB) bound to 127.0.0.1."""
    root = tmp_path_factory.mktemp("cluster")
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, web, worker_web = free_port(), free_port(), free_port()
    master = start_process([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                            "--port", str(port), "--webui-port", str(web)], root / "master.log", root)
    worker = None
    try:
        wait_for(lambda: port_open(port), "the Spark master", 120, master, root / "master.log")
        (root / "work").mkdir()
        worker = start_process([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                "--cores", "1", "--memory", "1g", "--webui-port", str(worker_web),
                                "--work-dir", str(root / "work"), f"spark://127.0.0.1:{port}"],
                               root / "worker.log", root)
        wait_for(lambda: _alive_workers(web) >= 1, "the Spark worker", 120, worker, root / "worker.log")
        yield Cluster(f"spark://127.0.0.1:{port}", web, root / "work")
    finally:
        if worker is not None:
            stop_process(worker)
        stop_process(master)


@dataclass
class ConnectServer:
    url: str
    warehouse: Path


@pytest.fixture(scope="module")
def user_connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server as a user would run it: spark-submit of Spark's own server class, with
    its own Derby metastore and warehouse (never `mesh spark start`)."""
    root = tmp_path_factory.mktemp("connect")
    port = free_port()
    warehouse = root / "warehouse"
    conf = {
        "spark.master": "local[1]",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
    }
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    server = start_process(command, root / "server.log", root)
    try:
        wait_for(lambda: port_open(port), "the Spark Connect server", 180, server, root / "server.log")
        yield ConnectServer(f"sc://127.0.0.1:{port}", warehouse)
    finally:
        stop_process(server)
