"""Warm Spark for the benchmarks: throwaway statements that warm a session, and the project's shared
Spark Connect server started as a user starts it, warmed, and always stopped.

Why: a ratio measured against a cold JVM mixes start-up into every number. The floor (bench_floor.py)
is replayed after `warm_up`; the Connect rows of bench_floor.py --connect and bench_steady.py run
their `mesh` commands against the project's server (`mesh spark start`: every `mesh` process of the
project connects to it while it runs) after the same statements went through a client of it.

`served(project)` starts the server with `mesh -p <project> spark start`, warms it through a
client in this process (a `pyspark.sql.connect.session.SparkSession` built directly on the URL in
`.mesh/connect.json`, as the product's own start-up probe does: PySpark's public builder would turn
this whole process into a Connect client, and bench_floor.py also runs an embedded session here),
and stops it with `mesh spark stop` on the way out, also on an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_first_apply import MESH, run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

WARMUP_SCHEMA = "floor_warmup"


def warm_up(spark: SparkSession | ConnectSession, warehouse: Path, rounds: int) -> None:
    """Throwaway statements of every floor kind, in a schema dropped afterwards: JIT, metastore,
    Parquet writer and planner are warm when the first timed statement runs. `warehouse` is the
    session's warehouse directory (its JVM writes there, a Connect server's included)."""
    s = f"`{WARMUP_SCHEMA}`"
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {s}")
    for i in range(rounds):
        rows = (f"SELECT CAST(id % 3 AS INT) AS id, CAST(id AS DOUBLE) AS value, "
                f"DATE_ADD(DATE'2024-01-01', CAST(id % 30 AS INT)) AS ds FROM range({90 + i})")
        directory = warehouse / f"{WARMUP_SCHEMA}.db" / f"gen_{i}"
        for sql in (
            f"CREATE TABLE IF NOT EXISTS {s}.`p{i}` (id INT, value DOUBLE, ds DATE) USING parquet PARTITIONED BY (ds)",
            f"INSERT OVERWRITE TABLE {s}.`p{i}` {rows}",
            f"CREATE OR REPLACE VIEW {s}.`v{i}` AS SELECT a.id, a.ds, a.value + COALESCE(b.value, 0) AS value "
            f"FROM {s}.`p{i}` AS a LEFT JOIN {s}.`p{i}` AS b ON a.id = b.id AND a.ds = b.ds",
            f"CREATE TABLE IF NOT EXISTS {s}.`u{i}` (id INT, ds DATE, value DOUBLE) USING parquet",
            f"INSERT OVERWRITE DIRECTORY '{directory}' USING parquet SELECT id, ds, value FROM {s}.`v{i}`",
            f"ALTER TABLE {s}.`u{i}` SET LOCATION '{directory}'",
            f"SELECT COUNT(*) FROM {s}.`u{i}`",
        ):
            spark.sql(sql).collect()
    spark.sql(f"DROP SCHEMA IF EXISTS {s} CASCADE")


def load() -> str:
    """The machine's load average, for the reader to judge the numbers: other work skews them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"


def mesh_env() -> dict[str, str]:
    """The environment of the `mesh` processes: without MESH_SPARK_SERVER, so the project's server is
    used as a user gets it (the default)."""
    return {k: v for k, v in os.environ.items() if k != "MESH_SPARK_SERVER"}


@dataclass(frozen=True)
class Served:
    """The running server of a project: how long `mesh spark start` and the warm-up took."""

    project: Path
    start_s: float
    warm_s: float


def client(project: Path) -> ConnectSession:
    """A client of the project's running server, built on `.mesh/connect.json`'s URL and token."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession  # deliberately lazy: grpc

    from mesh_dagster.engine.connect_server import server_status
    from mesh_dagster.engine.session import SESSION_CONFIG, fail_fast

    info = server_status(project / ".mesh")
    if info is None:
        raise SystemExit(f"No Spark Connect server answers for {project} (see {project / '.mesh' / 'connect.log'})")
    session = ConnectSession(connection=info.client_url)
    fail_fast(session)
    for key, value in SESSION_CONFIG.items():  # what `connect_server._configure` sets on a client
        session.conf.set(key, value)
    return session


@contextlib.contextmanager
def served(project: Path, warmup_rounds: int = 3) -> Iterator[Served]:
    """The project's Connect server, started (`mesh spark start`), warmed through a client, and
    stopped (`mesh spark stop`) however the block ends."""
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so that `finally` stops the server
    try:
        start_s, _ = run([*MESH, "-p", str(project), "spark", "start"], project.parent, mesh_env())
        began = time.perf_counter()
        session = client(project)
        try:
            warm_up(session, project / ".mesh" / "warehouse", warmup_rounds)
        finally:
            session.stop()
        yield Served(project, start_s, time.perf_counter() - began)
    finally:
        stop(project)
        signal.signal(signal.SIGTERM, previous)


def stop(project: Path) -> None:
    """`mesh spark stop`; a failure is printed, never raised (it would hide the error that ended the run)."""
    try:
        run([*MESH, "-p", str(project), "spark", "stop"], project.parent, mesh_env())
    except SystemExit as e:
        print(f"warning: could not stop the Spark Connect server of {project}: {e}", file=sys.stderr)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
