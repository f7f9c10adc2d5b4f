"""Which way the suite's commands reach local Spark: the lane.

The product's default is the project's warm Spark server (engine/connect_server.py): the first
command that needs Spark starts it and it stays up, idle, for half an hour. A test suite that runs
hundreds of projects in temporary directories would leave a JVM behind for each, so the suite
runs in the opt-out lane by default (`MESH_SPARK_SERVER=0`: Spark in each command's own process,
one shared session per test process for in-process tests). The tests of the server itself set
what they need, and `MESH_SPARK_SERVER=1 python -m pytest ...` runs the suite in the server lane:
every command goes through its project's server, and the servers a test started in its
`tmp_path` are stopped after it (`stop_servers_under`).
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from mesh_dagster.engine.server_process import MARKER, terminate
from mesh_dagster.engine.server_record import SERVER_ENV

OPT_OUT = "0"


def choose() -> None:
    os.environ.setdefault(SERVER_ENV, OPT_OUT)


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
