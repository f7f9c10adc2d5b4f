"""How long `mesh ui` takes from the command to a webserver that answers with every code location
loaded (issue 38, point 8), and where the time goes.

    python benchmarks/bench_ui_start.py [--runs 3] [--project DIR] [--load N] [--phases]

A copy of the example project (prod applied once first, so the state store and the warm server
exist as on a user's machine), then `mesh ui` started `--runs` times. Each run prints, in seconds
from the command: the first HTTP answer of the webserver, each code location LOADED, and the
whole. With `--phases`, the parts a start is made of are timed alone, one after another: the
`mesh` command up to its exec of the supervisor, `import dagster`, and one code location's
definitions (what each code server process does before it answers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]
LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename } } } } }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def locations(port: int) -> dict[str, str] | None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": LOCATIONS}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            entries = json.loads(response.read())["data"]["workspaceOrError"]["locationEntries"]
    except OSError:
        return None
    return {e["name"]: e["loadStatus"] for e in entries}


def one_start(project: Path) -> dict[str, float]:
    port = free_port()
    began = time.monotonic()
    process = subprocess.Popen([*MESH, "-p", str(project), "ui", "--port", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    marks: dict[str, float] = {}
    try:
        while time.monotonic() - began < 600:
            found = locations(port)
            now = time.monotonic() - began
            if found is not None:
                marks.setdefault("webserver answers", now)
                for name, status in found.items():
                    if status == "LOADED":
                        marks.setdefault(f"{name} loaded", now)
                if found and all(s == "LOADED" for s in found.values()):
                    marks["all loaded"] = now
                    return {**marks, **cpu_by_process(process.pid)}
            time.sleep(0.25)
        raise SystemExit("mesh ui did not load within 600 s")
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)


def cpu_by_process(pid: int) -> dict[str, float]:
    """CPU seconds each kind of process of the start (`pid` and its descendants) has used so far:
    what a loaded machine stretches (on 2 busy cores, the wall time follows the CPU a start needs)."""
    import psutil

    root = psutil.Process(pid)
    out: dict[str, float] = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
            line = " ".join(process.cmdline())
        except psutil.Error:
            continue
        kind = next((k for k in ("webserver", "daemon", "grpc", "supervisor", "dagster dev", "java") if k in line),
                    line[:60])
        out[f"cpu {kind}"] = out.get(f"cpu {kind}", 0.0) + times.user + times.system
    return out


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    began = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=600)
    return time.monotonic() - began


def phases(project: Path) -> dict[str, float]:
    """The parts of a start, each alone (see the module doc)."""
    definitions = ("from mesh_dagster.dagster import definitions; import sys; "
                   f"definitions({str(project)!r}, 'prod')")
    return {
        "python + import dagster": timed([sys.executable, "-c", "import dagster"]),
        "python + import mesh_dagster.dagster": timed([sys.executable, "-c", "import mesh_dagster.dagster"]),
        "mesh --help (the CLI's import)": timed([*MESH, "--help"]),
        "one location's definitions (prod)": timed([sys.executable, "-c", definitions]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--project", type=Path, help="an applied project to start the UI of (default: the example)")
    parser.add_argument("--phases", action="store_true", help="also time a start's parts alone")
    parser.add_argument("--load", type=int, default=0,
                        help="N processes spinning on the CPU beside each start (a loaded machine: 2 on 2 cores)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_ui_start_"))
    project = args.project
    try:
        if project is None:
            project = work / "project"
            shutil.copytree(ROOT / "example_project", project, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
            subprocess.run([*MESH, "-p", str(project), "plan", "--auto-apply", "--no-prompts"], check=True,
                           capture_output=True, timeout=1800)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
        try:
            runs = [one_start(project) for _ in range(args.runs)]
        finally:
            for hog in hogs:
                hog.kill()
        for i, marks in enumerate(runs, 1):
            print(f"start {i}: " + ", ".join(f"{k} {v:.1f}s" for k, v in marks.items()))
        print(f"median, all locations loaded: {statistics.median(r['all loaded'] for r in runs):.1f}s")
        if args.phases:
            for name, seconds in phases(project).items():
                print(f"  {name:<40} {seconds:5.1f}s")
    finally:
        if args.project is None:
            subprocess.run([*MESH, "-p", str(project), "spark", "stop"], capture_output=True, timeout=120)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
