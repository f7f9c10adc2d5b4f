"""Which way the suite's commands reach local Spark: the lane.

The product's default is the project's warm Spark server (engine/connect_server.py): the first
command that needs Spark starts it and it stays up, idle, for half an hour. The suite runs in that
lane by default (`MESH_SPARK_SERVER=1`, as a user's commands run): every command goes through its
project's server, and the servers a test started in its `tmp_path` (or a module in its fixtures'
directories) are stopped after it (`stop_servers_under`), so no JVM outlives its test.
`MESH_SPARK_SERVER=0 python -m pytest ...` runs the suite in the opt-out lane: Spark in each
command's own process, one shared session per test process for in-process tests. A test that runs
Spark in the test process itself stays in the opt-out lane whichever lane is chosen (`in_process`);
the tests of the server itself and of the opt-out set what they need.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from mesh_dagster.engine.server_process import MARKER, terminate
from mesh_dagster.engine.server_record import SERVER_ENV

OPT_OUT = "0"
SERVER = "1"


def choose() -> None:
    os.environ.setdefault(SERVER_ENV, SERVER)


def server_lane() -> bool:
    return os.environ.get(SERVER_ENV) != OPT_OUT


def stop_servers_under(root: Path | None) -> None:
    """Stop every project server whose `.mesh` is under `root` (a test's tmp_path)."""
    if root is None or not server_lane():
        return
    prefix = f"{MARKER}={Path(root).resolve()}"
    for process in psutil.process_iter(["cmdline"]):
        marker = next((arg for arg in process.info["cmdline"] or [] if arg.startswith(prefix)), None)
        if marker is not None:  # terminate stops nothing but that project's server itself
            terminate(process.pid, Path(marker.split("=", 1)[1]))


def embedded_here() -> bool:
    """This process runs an embedded (classic) Spark session: the shared one of tests/spark_fixtures.py."""
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and pyspark.SparkContext._active_spark_context is not None  # noqa: SLF001


@contextmanager
def in_process(needed: bool) -> Iterator[None]:
    """In the server lane, the Contexts of a test that runs Spark in the test process (the `spark`
    mark, the `spark`/`engine` fixtures, or the shared session already running here) use that
    embedded session, as its commands do: a process holds one kind of session (the product refuses
    a second), so such a test runs in the opt-out lane whichever lane the suite runs in."""
    with pytest.MonkeyPatch.context() as env:
        if needed and server_lane():
            env.setenv(SERVER_ENV, OPT_OUT)
        yield
