"""The warm loop (issue 36): what a user waits for, day to day, now that the project's warm Spark
server is the default, side by side with SQLMesh 0.236 on the same local Spark in one run, and
against the warm floor of issue 23 (bench_floor.py).

    flock /tmp/bench.lock python benchmarks/bench_warm_loop.py [--rounds 3] [--no-sqlmesh] [--no-dagster]
                                                              [--no-fresh] [--keep DIR]

Measured as a user gets it: every `mesh` command is a new process, the server is started by the
first command that needs Spark (never by hand) and nothing is warmed beforehand. On the issue-9
project (gen_first_apply.py: a seed, 15 INCREMENTAL_BY_TIME_RANGE, 8 FULL and 6 VIEW models):

1. first apply, no server running: `mesh plan --auto-apply --skip-tests --execution-time 2024-01-31`
   | SQLMesh `plan --auto-apply --no-prompts --execution-time 2024-01-31`;
2. daily run x rounds, one new interval of each model: `mesh run --execution-time <day + 1>`
   | `sqlmesh run --end <day>` (inclusive: the same interval);
3. dev loop x (rounds + 1): one non-breaking edit of a mid-chain FULL model (a new column after its
   last one), then `mesh plan dev --auto-apply --skip-tests --execution-time <day>` | `sqlmesh plan dev
   --auto-apply --no-prompts --execution-time <day>`. The first round creates `dev` and is shown apart:
   the loop is the second and later rounds;
4. a Dagster run of one partition, launch -> success (bench_steady.py's (c), through the same server);
5. the warm floor of the first apply and of the first daily run (bench_floor.py: their Spark statements
   replayed in one warm embedded session), with the per-phase tables of ours against it;
6. the first apply on a fresh machine: a new copy of the project, no server running, an empty JVM
   cache (no class archive: MESH_JVM_CACHE). SQLMesh keeps no archive: its (1) is its fresh machine.

This machine's class archive is made before anything is timed, so that no build runs during a
measurement. SQLMesh runs from a throwaway venv (bench_first_apply.py's docstring says how). The
load average is printed with each number: measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_first_apply import MESH, SQLMESH_VENV, run  # noqa: E402 - sibling scripts
from bench_floor import DAILY_RUN, FIRST_APPLY, Ours, measure_floor, report, run_ours  # noqa: E402
from bench_steady import Results, dagster_rounds, mid_chain_full, with_columns  # noqa: E402
from gen_first_apply import generate  # noqa: E402
from warm_server import load, mesh_env  # noqa: E402

from mesh_dagster.engine import class_archive  # noqa: E402

FIRST = dt.date(2024, 1, 31)


def ensure_archive() -> None:
    archive = class_archive.archive_path()
    if archive is not None and (not archive.is_file() or class_archive.damage(archive) is not None):
        print(f"making this machine's class archive first ({archive})", flush=True)
        class_archive.build(archive)


def mesh(project: Path, *args: str, env: dict[str, str] | None = None) -> float:
    return run([*MESH, "-p", str(project), *args], project.parent, env or mesh_env())[0]


def sqlmesh(project: Path, *args: str) -> float:
    return run([str(SQLMESH_VENV / "bin" / "sqlmesh"), "-p", str(project), *args], project.parent)[0]


def first_apply(mine: Path, theirs: Path | None, work: Path, results: Results) -> Ours:
    ours = run_ours(mine, work / "trace_first_apply.tsv", FIRST_APPLY[1])
    results.add("first apply, no server running: mesh", ours.wall)
    if theirs is not None:
        results.add("first apply: SQLMesh", sqlmesh(theirs, "plan", "--auto-apply", "--no-prompts",
                                                    "--execution-time", FIRST.isoformat()))
    return ours


def daily_runs(mine: Path, theirs: Path | None, work: Path, rounds: int, results: Results) -> Ours:
    """The daily run, round by round; the first round's trace is returned (the floor replays it)."""
    traced: Ours | None = None
    for i in range(rounds):
        day = FIRST + dt.timedelta(days=i)  # the interval of `day`, due at the next midnight
        command = ["run", "--execution-time", (day + dt.timedelta(days=1)).isoformat()]
        ours = run_ours(mine, work / f"trace_daily_{i + 1}.tsv", command)
        traced = traced or ours
        results.add("daily run, one interval x 30 models: mesh", ours.wall)
        if theirs is not None:
            results.add("daily run: SQLMesh", sqlmesh(theirs, "run", "--end", day.isoformat()))
    assert traced is not None
    return traced


def dev_loop(mine: Path, theirs: Path | None, rounds: int, results: Results) -> None:
    """Round 1 creates `dev`; each round adds one more column to the same model, in both projects."""
    model = mid_chain_full(mine)
    when = (FIRST + dt.timedelta(days=rounds)).isoformat()
    for k in range(1, rounds + 2):
        label = "dev loop, first round (creates dev)" if k == 1 else "dev loop, plan dev --auto-apply"
        for project, tool in ((mine, "mesh"), (theirs, "SQLMesh")):
            if project is None:
                continue
            path = project / "models" / model.name
            original = path.read_text()
            path.write_text(with_columns(original, k))
            try:
                if tool == "mesh":
                    seconds = mesh(project, "plan", "dev", "--auto-apply", "--skip-tests", "--execution-time", when)
                else:
                    seconds = sqlmesh(project, "plan", "dev", "--auto-apply", "--no-prompts",
                                      "--execution-time", when)
            finally:
                path.write_text(original)
            results.add(f"{label}: {tool}", seconds)


def fresh_machine(work: Path, results: Results) -> None:
    """A new project and an empty JVM cache: what the very first command on a new machine costs."""
    project = generate(work / "fresh_project", "mesh").resolve()
    env = {**mesh_env(), class_archive.CACHE_ENV: str(work / "empty_jvm_cache")}
    try:
        results.add("first apply, fresh machine (no archive): mesh", mesh(project, *FIRST_APPLY[1], env=env))
    finally:
        mesh(project, "spark", "stop", env=env)  # before its watcher, idle, builds an archive there


def print_table(results: Results) -> None:
    print(f"\n{'wall seconds':<58}{'rounds':<40}{'median':>8}")
    for scenario, times in results.times.items():
        rounds = " ".join(f"{t:.1f}" for t in times)
        print(f"{scenario:<58}{rounds:<40}{statistics.median(times):>8.1f}")
    pairs = [("first apply, no server running: mesh", "first apply: SQLMesh"),
             ("daily run, one interval x 30 models: mesh", "daily run: SQLMesh"),
             ("dev loop, plan dev --auto-apply: mesh", "dev loop, plan dev --auto-apply: SQLMesh")]
    for ours, theirs in pairs:
        if ours in results.times and theirs in results.times:
            ratio = statistics.median(results.times[ours]) / statistics.median(results.times[theirs])
            print(f"ratio mesh/SQLMesh, {ours.rsplit(':', 1)[0]}: {ratio:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the daily run and the dev loop")
    parser.add_argument("--no-sqlmesh", action="store_true", help="ours and the floor only")
    parser.add_argument("--no-dagster", action="store_true", help="leave out the Dagster run")
    parser.add_argument("--no-fresh", action="store_true", help="leave out the fresh machine's first apply")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    began = time.perf_counter()
    ensure_archive()
    with tempfile.TemporaryDirectory(prefix="bench_warm_loop_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        mine = generate(work / "mesh_project", "mesh").resolve()
        theirs = None if args.no_sqlmesh else generate(work / "sqlmesh_project", "sqlmesh").resolve()
        print(f"project {mine} ({os.cpu_count()} CPUs, {load()})", flush=True)
        results = Results()
        try:
            applied = first_apply(mine, theirs, work, results)
            daily = daily_runs(mine, theirs, work, args.rounds, results)
            dev_loop(mine, theirs, args.rounds, results)
            if not args.no_dagster:
                dagster_rounds(mine, args.rounds, work, results)
        finally:
            mesh(mine, "spark", "stop")
        runs = {FIRST_APPLY[0]: applied.calls, DAILY_RUN[0]: daily.calls}
        floors = measure_floor(mine, work / "floor_project", runs, 3, 4)
        for (name, command), ours, floor in zip((FIRST_APPLY, DAILY_RUN), (applied, daily), floors):
            report(name + " - as a user gets it (warm server by default)", command, ours, floor, None)
        if not args.no_fresh:
            fresh_machine(work, results)
        print_table(results)
    print(f"\nbenchmark took {time.perf_counter() - began:.1f} s ({load()})")


if __name__ == "__main__":
    main()
