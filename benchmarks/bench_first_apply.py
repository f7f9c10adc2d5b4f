"""The first `plan --auto-apply` of the issue-9 project (benchmarks/gen_first_apply.py) on local
Spark: wall time, Spark calls issued and time per model; with `--sqlmesh`, SQLMesh's first apply
of the same model files on the same kind of local Spark, and the ratio.

    python benchmarks/bench_first_apply.py [--runs 2] [--sqlmesh] [--daily] [--concurrent-tasks N]
                                           [--keep DIR] [--code CHECKOUT]

`--daily`: both tools apply up to execution time 2024-01-31 (30 days), then the daily run of the
next interval of every model is timed too: ours `mesh run --execution-time 2024-02-01`, SQLMesh's
`sqlmesh run --end 2024-01-31` (its run has no execution time; a day as `--end` is inclusive).

`--concurrent-tasks N` sets the connection's `concurrent_tasks` for both tools (default: each
tool's own, 4 for both on Spark). `--code` times another checkout of mesh_dagster (e.g. a
`git worktree` of an older commit, for before/after numbers on the same machine).

Each run starts from a fresh project directory (fresh `.mesh`, metastore and warehouse). Spark
calls are counted from the engine's opt-in trace (`MESH_SQL_TRACE`): one line per call, catalog
look-ups included. SQLMesh runs from a throwaway venv (never imported here): created with
`python -m venv --system-site-packages /tmp/sqlmesh_venv` (reusing the installed pyspark) and
`pip install 'sqlmesh==0.236.*'`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_first_apply import generate

MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]
SQLMESH_VENV = Path("/tmp/sqlmesh_venv")
BATCH_LINE = re.compile(r"^\[\d+/\d+\]\s+(\S+)\s.*?([\d.]+)s\s*$")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


# --daily: both tools apply up to this execution time, then run the next day's interval of every model
DAILY_FIRST, DAILY_NEXT = "2024-01-31", "2024-02-01"


def ours(work: Path, code: Path | None, concurrent_tasks: int | None, daily: bool = False) -> tuple[float, float]:
    project = generate(work / "mesh_project", "mesh", concurrent_tasks=concurrent_tasks)
    trace = work / "sql_trace.tsv"
    trace.unlink(missing_ok=True)
    env = {**os.environ, "MESH_SQL_TRACE": str(trace)}
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code.resolve()), env.get("PYTHONPATH", "")])
    when = ["--execution-time", DAILY_FIRST] if daily else []
    elapsed, out = run([*MESH, "-p", str(project), "plan", "--auto-apply", *when], work, env)
    calls = [line.split("\t", 1) for line in trace.read_text().splitlines()]
    statements = [what for _, what in calls if not what.startswith("[")]  # SQL text, not a catalog call
    print(f"mesh first apply: {elapsed:.1f} s wall, {len(calls)} Spark calls "
          f"({len(statements)} SQL statements, {sum(float(s) for s, _ in calls):.1f} s inside Spark)")
    kinds = Counter("catalog" if what.startswith("[") else what.split(" ", 1)[0].upper() for _, what in calls)
    print("  calls by first word: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    per_model = sorted(((float(m[2]), m[1]) for m in map(BATCH_LINE.match, out.splitlines()) if m), reverse=True)
    print(f"  per model: {len(per_model)} batches, {sum(s for s, _ in per_model):.1f} s total; slowest: "
          + ", ".join(f"{name} {secs:.1f}s" for secs, name in per_model[:5]))
    if not daily:
        return elapsed, 0.0
    next_day, out = run([*MESH, "-p", str(project), "run", "--execution-time", DAILY_NEXT], work, env)
    batches = sum(1 for line in out.splitlines() if BATCH_LINE.match(line))
    print(f"mesh daily run ({DAILY_NEXT}): {next_day:.1f} s wall, {batches} batches")
    return elapsed, next_day


def sqlmesh(work: Path, concurrent_tasks: int | None, daily: bool = False) -> tuple[float, float]:
    binary = SQLMESH_VENV / "bin" / "sqlmesh"
    if not binary.exists():
        raise SystemExit(f"{binary} not found: create the venv as the module docstring says")
    project = generate(work / "sqlmesh_project", "sqlmesh", concurrent_tasks=concurrent_tasks)
    when = ["--execution-time", DAILY_FIRST] if daily else []
    elapsed, _ = run([str(binary), "-p", str(project), "plan", "--auto-apply", "--no-prompts", *when], work)
    print(f"SQLMesh first apply: {elapsed:.1f} s wall")
    if not daily:
        return elapsed, 0.0
    # `sqlmesh run` has no execution time: its --end (a day: inclusive) stops it after DAILY_FIRST's interval
    next_day, out = run([str(binary), "-p", str(project), "run", "--end", DAILY_FIRST], work)
    shown = [line.strip() for line in out.splitlines() if "insert" in line.lower() or "evaluat" in line.lower()]
    print(f"SQLMesh daily run (up to {DAILY_FIRST} inclusive): {next_day:.1f} s wall; it says: "
          + " | ".join(shown[-3:]))
    return elapsed, next_day


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--sqlmesh", action="store_true", help="also time SQLMesh's first apply")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--code", type=Path, help="time the mesh_dagster of this checkout instead")
    parser.add_argument("--concurrent-tasks", type=int, help="the connection's concurrent_tasks, for both tools")
    parser.add_argument("--daily", action="store_true",
                        help=f"apply up to {DAILY_FIRST}, then time the next day's run (both tools)")
    args = parser.parse_args()
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="first_apply_") as tmp:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            print(f"-- run {i + 1}/{args.runs}")
            mine, mine_daily = ours(work, args.code, args.concurrent_tasks, args.daily)
            if args.sqlmesh:
                theirs, theirs_daily = sqlmesh(work, args.concurrent_tasks, args.daily)
                print(f"ratio mesh/SQLMesh: {mine / theirs:.2f}")
                if args.daily:
                    print(f"ratio mesh/SQLMesh, daily run: {mine_daily / theirs_daily:.2f}")


if __name__ == "__main__":
    main()
