"""Tick time of the git push sensor on a repository holding an N-model project with B branches.

    python benchmarks/bench_git_sensor.py [--models 1000] [--branches 50] [--ticks 5]

A bare repository gets the generated project on `main` and one commit per branch (each branch
changes one model). Timed, in this process, after the imports: the first tick (every branch is
new: B run requests), then ticks with nothing moved, then a tick after one push. A tick only lists
branch heads; the planning happens in the runs it requests.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_project import generate  # noqa: E402


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=b@example.com", "-c", "user.name=B", "-C", str(cwd), *args],
                   check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--branches", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=5)
    args = parser.parse_args()

    import dagster as dg

    from mesh_dagster.dagster import definitions

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare = root / "warehouse.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        clone = generate(root / "clone", args.models)
        git(clone, "init", "-q", "-b", "main")
        git(clone, "add", "-A")
        git(clone, "commit", "-qm", "project")
        git(clone, "remote", "add", "origin", str(bare))
        git(clone, "push", "-q", "origin", "main")
        for b in range(args.branches):
            git(clone, "checkout", "-q", "-b", f"feature/b{b:02d}", "main")
            model = clone / "models" / f"model_{args.models - 1 - b:04d}.sql"
            model.write_text(model.read_text() + f"\n-- branch {b}\n")
            git(clone, "commit", "-qam", f"branch {b}")
            git(clone, "push", "-q", "origin", f"feature/b{b:02d}")
        location = root / "location"
        location.mkdir()
        (location / "config.yaml").write_text("model_defaults:\n  start: 2024-01-01\n"
                                              "protected_environments:\n  prod: {}\n"
                                              "git:\n  repo: ../warehouse.git\n")
        sensor = definitions(location, "prod", shared_spark=False).resolve_sensor_def("git_push_sensor")
        instance = dg.DagsterInstance.ephemeral()

        def tick(cursor: str | None) -> tuple[float, int, str | None]:
            began = time.perf_counter()
            with dg.build_sensor_context(cursor=cursor, instance=instance) as context:
                result = sensor.evaluate_tick(context)
            return time.perf_counter() - began, len(result.run_requests), result.cursor

        first, requests, cursor = tick(None)
        print(f"{args.models} models, {args.branches + 1} branches")
        print(f"first tick: {first * 1000:.0f} ms, {requests} run requests")
        idle = []
        for _ in range(args.ticks):
            seconds, requests, cursor = tick(cursor)
            assert requests == 0
            idle.append(seconds)
        print(f"idle tick: median {statistics.median(idle) * 1000:.0f} ms over {args.ticks}")
        git(clone, "commit", "--allow-empty", "-qm", "again")
        git(clone, "push", "-q", "origin", "HEAD")
        seconds, requests, cursor = tick(cursor)
        print(f"tick after one push: {seconds * 1000:.0f} ms, {requests} run request(s)")


if __name__ == "__main__":
    main()
