"""Time until `dagster dev` serves the asset graph of a generated N-model project (target: 5,000
models without a timeout).

    python benchmarks/bench_webserver.py [--models 5000] [--project DIR]

Starts `dagster dev -f <definitions file>` (webserver, daemon and code server, a temporary
DAGSTER_HOME, first load ever: no project cache) and polls the webserver's GraphQL endpoint
until it lists every asset; then times the query the UI's asset graph makes (every node with its
dependencies, groups, kinds and partitions) once served. Prints seconds since start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_project import generate  # noqa: E402

COUNT = "{ assetNodes { id } }"
GRAPH = """{ assetNodes { id assetKey { path } groupName kinds isPartitioned isMaterializable
  dependencyKeys { path } dependedByKeys { path } opNames jobNames description } }"""


def graphql(port: int, query: str, timeout: float = 120) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["data"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=5000)
    parser.add_argument("--project", type=Path, help="an existing project instead of a generated one")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_bench_web_"))
    project = args.project or generate(work / "project", args.models)
    shutil.rmtree(project / ".mesh" / "cache", ignore_errors=True)
    defs_file = work / "definitions.py"
    defs_file.write_text(f"from mesh_dagster.dagster import definitions\n\ndefs = definitions({str(project)!r})\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = work / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    print(f"# dagster dev on a {args.models}-model project ({project}), port {port}")
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dagster", "dev", "-f", str(defs_file), "-p", str(port)],
                            cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        served = None
        while time.perf_counter() - began < args.timeout:
            if proc.poll() is not None:
                raise SystemExit(f"dagster dev exited with {proc.returncode}")
            try:
                nodes = graphql(port, COUNT)["assetNodes"]
            except (OSError, KeyError, TypeError, ValueError):
                nodes = []
            if len(nodes) >= args.models:
                served = time.perf_counter() - began
                break
            time.sleep(0.5)
        if served is None:
            raise SystemExit(f"the asset graph was not served within {args.timeout:.0f} s")
        print(f"asset graph served (every asset listed)        {served:7.1f} s after start")
        t0 = time.perf_counter()
        nodes = graphql(port, GRAPH)["assetNodes"]
        print(f"asset graph query (the UI's fields), {len(nodes)} nodes {time.perf_counter() - t0:7.1f} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
