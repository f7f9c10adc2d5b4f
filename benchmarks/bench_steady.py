"""The steady state (issue 23, point 4): what a project costs day after day once it is applied, on
the issue-9 project (benchmarks/gen_first_apply.py: a seed, 15 INCREMENTAL_BY_TIME_RANGE, 8 FULL
and 6 VIEW models), after its first apply (`plan --auto-apply --skip-tests --execution-time
2024-01-31`, in its own process, not timed here: bench_floor.py times it).

    flock /tmp/bench.lock python benchmarks/bench_steady.py [--rounds 3] [--concurrent-tasks N]
                                                            [--warmup-rounds 3] [--keep DIR] [--no-dagster]

Each scenario is timed `--rounds` times (the table prints each round and the median), each round
on a new interval or a new change ((c): the same partition again), so every round does the same
work:

(a) `mesh run --execution-time <day>` with Spark in its own process (the opt-out, MESH_SPARK_SERVER=0): a cold JVM. Each
    round's day is the next one, so exactly one new daily interval of every model is due.
(b) the same, with the project's shared Spark Connect server running and warm (`mesh spark start`,
    then throwaway statements through a client: benchmarks/warm_server.py); the `mesh` process is
    then its client and starts no JVM.
(c) a Dagster run of one partition, launch -> success, the shared Connect server warm. A run takes
    "now" from the clock (a FULL model in it is rebuilt from parents complete up to the last
    interval due now), so prod is first caught up with `mesh run --execution-time <yesterday>`
    (not timed). Then `mesh ui -e prod` (webserver, daemon, code server: the UI a user runs), the
    daily schedule's dry run at today's midnight UTC (the code server evaluates the schedule as the
    daemon's tick would: one run of yesterday's partition, range tags, the models with a due
    interval) and `launchRun` of that request, timed from the mutation until the run's status is
    SUCCESS. Dagster's own timestamps split it into queued (the daemon dequeues the run, a run
    worker process starts and loads the code location) and executing (the steps). Later rounds
    launch the same request again: the partition is recomputed and the FULL models rebuilt, the
    same work. Before each launch no run may be active (at the UI's start the re-stamp sensor
    records what `mesh` commands computed, with runs of its own). Runs reach the warehouse through
    the shared server (`definitions(shared_spark=True)`, the default).
(d) `mesh plan dev --auto-apply` after one change: a column added to a mid-chain FULL model (one
    with parents and children: a non-breaking change, the model rebuilt, its children kept),
    embedded and with the Connect server warm. The dev environment exists beforehand
    (`plan dev --include-unmodified`, not timed), as a developer's does; round k adds the k-th
    column, so each round's change is new and additive, and the file is restored after it.

Order: first apply, dev created, then (a) and (d) embedded, round by round; the server started
and warmed; (b) and (d) through it, round by round; then (c) (last: it brings prod up to today;
`--no-dagster` leaves it out). The project is generated with the connection's default
`concurrent_tasks` unless `--concurrent-tasks` says otherwise. The Connect server and the UI are
stopped at the end, also on failure. The machine's load average is printed with every round:
other work on the machine skews every number.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_first_apply import BATCH_LINE, MESH, run
from dagster_ui import DagsterUI, Request
from gen_first_apply import generate
from warm_server import load, mesh_env, served

FIRST_EXECUTION = dt.date(2024, 1, 31)
DEV = "dev"
SCHEDULE = "run_prod_daily_schedule"  # dagster/jobs/schedules.py: run_<environment>_<cron slug>_schedule
SENSOR_INTERVAL_S = 35  # Dagster's default sensor interval is 30 s: quiet that long, no sensor has runs to launch
A, B, C, C_QUEUED, C_STEPS, D_EMBEDDED, D_CONNECT = (
    "(a) mesh run, one new interval: embedded (cold JVM)",
    "(b) mesh run, one new interval: Connect (warm server)",
    "(c) Dagster run of one partition, launch -> success",
    "      queued: dequeue, run worker start, code load",
    "      executing: the steps",
    "(d) mesh plan dev --auto-apply, one change: embedded",
    "(d) mesh plan dev --auto-apply, one change: Connect",
)


def days() -> Iterator[dt.date]:
    """Execution times after the first apply's, one day apart: each makes one new interval due."""
    day = FIRST_EXECUTION
    while True:
        day += dt.timedelta(days=1)
        yield day


def mesh(project: Path, *args: str, embedded: bool = False) -> tuple[float, str]:
    """A `mesh` command as a user runs it (the project's warm server, the default), or with Spark in
    its own process (`embedded`: the opt-out, MESH_SPARK_SERVER=0)."""
    env = {**mesh_env(), "MESH_SPARK_SERVER": "0"} if embedded else mesh_env()
    return run([*MESH, "-p", str(project), *args], project.parent, env)


def batches(output: str) -> int:
    """Model batches a `mesh run` or plan executed (its `[i/n] model ... 1.23s` lines)."""
    return sum(1 for line in output.splitlines() if BATCH_LINE.match(line))


# -- (d): one change to a mid-chain FULL model -------------------------------------------------------------


def mid_chain_full(project: Path) -> Path:
    """The FULL model nearest the middle of the chain that reads a non-seed model and is read."""
    texts = {p: p.read_text() for p in sorted((project / "models").glob("*.sql"))}
    names = {p: re.search(r"name (\S+),", t).group(1) for p, t in texts.items()}  # type: ignore[union-attr]
    seed = next(names[p] for p, t in texts.items() if "kind SEED" in t)
    candidates = []
    for path, text in texts.items():
        read = any(f"{names[path]} AS" in other for p, other in texts.items() if p != path)
        reads_model = any(f"{name} AS" in text for p, name in names.items() if p != path and name != seed)
        if "kind FULL" in text and read and reads_model:
            candidates.append(path)
    if not candidates:
        raise SystemExit(f"No FULL model with parents and children in {project}")
    middle = len(texts) / 2
    return min(candidates, key=lambda p: abs(int(p.stem.split("_")[-1]) - middle))


def with_columns(original: str, k: int) -> str:
    """The model with `k` added constant columns (`'r1' AS extra_1`, ...) after its last one."""
    extra = "".join(f",\n  'r{i}' AS extra_{i}" for i in range(1, k + 1))
    changed = original.replace(" AS value\nFROM", f" AS value{extra}\nFROM", 1)
    if changed == original:
        raise SystemExit("The generated model's SELECT no longer ends in `... AS value` before FROM")
    return changed


def plan_dev(project: Path, model: Path, k: int, when: dt.date, embedded: bool = False) -> tuple[float, str]:
    """`mesh plan dev --auto-apply` with the k-th column added; the file restored afterwards."""
    original = model.read_text()
    model.write_text(with_columns(original, k))
    try:
        wall, out = mesh(project, "plan", DEV, "--auto-apply", "--execution-time", when.isoformat(), embedded=embedded)
    finally:
        model.write_text(original)
    return wall, f"{batches(out)} batches"


# -- the rounds --------------------------------------------------------------------------------------------


class Results:
    """Seconds per scenario, round by round, printed as they come."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def add(self, scenario: str, seconds: float, note: str = "") -> None:
        self.times.setdefault(scenario, []).append(seconds)
        print(f"  {scenario.strip()}, round {len(self.times[scenario])}: {seconds:.1f} s  {note} "
              f"[{load()}]", flush=True)

    def table(self, rounds: int) -> None:
        heads = "".join(f"{'round ' + str(i + 1):>9}" for i in range(rounds))
        print(f"\n{'wall seconds':<54}{heads}{'median':>9}")
        for scenario in (A, B, C, C_QUEUED, C_STEPS, D_EMBEDDED, D_CONNECT):
            times = self.times.get(scenario)
            if times:
                cells = "".join(f"{t:>9.1f}" for t in times) + " " * 9 * (rounds - len(times))
                print(f"{scenario:<54}{cells}{statistics.median(times):>9.1f}")


def mesh_rounds(project: Path, model: Path, rounds: int, day: Iterator[dt.date], changes: Iterator[int],
                results: Results, run_label: str, plan_label: str, embedded: bool = False) -> None:
    """Per round: `mesh run` of the next day, then `plan dev` with the next change."""
    for _ in range(rounds):
        when = next(day)
        wall, out = mesh(project, "run", "--execution-time", when.isoformat(), embedded=embedded)
        results.add(run_label, wall, f"(execution time {when}, {batches(out)} batches)")
        wall, note = plan_dev(project, model, next(changes), when, embedded)
        results.add(plan_label, wall, f"({note})")


def dagster_rounds(project: Path, rounds: int, work: Path, results: Results) -> None:
    """Prod caught up to the day before yesterday (untimed), `mesh ui -e prod`, the daily schedule's
    request at today's midnight (yesterday's partition), launched `rounds` times."""
    today = dt.datetime.now(dt.UTC).date()
    yesterday = today - dt.timedelta(days=1)
    wall, out = mesh(project, "run", "--execution-time", yesterday.isoformat())
    print(f"prod caught up to {yesterday - dt.timedelta(days=1)} (mesh run, not timed): {wall:.1f} s, "
          f"{batches(out)} batches", flush=True)
    ui = DagsterUI(MESH, project, "prod", work / "mesh_ui.log", mesh_env())
    try:
        print(f"mesh ui ready (code location loaded, daemons healthy) in {ui.wait_ready():.1f} s", flush=True)
        for i in range(rounds):
            others = ui.wait_idle(SENSOR_INTERVAL_S if i == 0 else 10)
            if others:
                print(f"  waited for {len(others)} other runs to end: {', '.join(sorted(set(others)))}", flush=True)
            if i == 0:
                request = one_day(ui.scheduled_request(SCHEDULE, midnight(today)), yesterday)
            launched = time.perf_counter()
            run_id = ui.launch(request)
            done = ui.finish(run_id, launched)
            if done.status != "SUCCESS":
                raise SystemExit(f"run {run_id} ended {done.status}; see {ui.log} and the UI's run page")
            results.add(C, done.wall_s, f"(partition {yesterday}, {len(request.assets)} assets, run {run_id[:8]})")
            results.times.setdefault(C_QUEUED, []).append(done.queued_s)
            results.times.setdefault(C_STEPS, []).append(done.executing_s)
            print(f"    {C_QUEUED.strip()} {done.queued_s:.1f} s, {C_STEPS.strip()} {done.executing_s:.1f} s",
                  flush=True)
    finally:
        ui.stop()
    if dt.datetime.now(dt.UTC).date() != today:
        print("warning: the UTC day changed during (c): its runs' FULL models were built up to another day")


def midnight(day: dt.date) -> float:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp()


def one_day(requests: list[Request], day: dt.date) -> Request:
    """The schedule's one request, for `day`'s partition alone (else this is no steady state)."""
    if len(requests) != 1:
        raise SystemExit(f"{SCHEDULE} requests {len(requests)} runs, not one: {requests}")
    (request,) = requests
    first, last = (request.tags.get(f"dagster/asset_partition_range_{e}") for e in ("start", "end"))
    if first != last or first != day.isoformat():
        raise SystemExit(f"{SCHEDULE} requests partitions {first}..{last}, not {day} alone")
    return request


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each scenario (default 3)")
    parser.add_argument("--concurrent-tasks", type=int, help="the connection's concurrent_tasks (default: its own)")
    parser.add_argument("--warmup-rounds", type=int, default=3, help="rounds of throwaway statements on the server")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--no-dagster", action="store_true", help="leave out (c)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_steady_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        project = generate(work / "mesh_project", "mesh", concurrent_tasks=args.concurrent_tasks).resolve()
        model = mid_chain_full(project)
        print(f"project {project} (concurrent_tasks {args.concurrent_tasks or 'default'}, changed model "
              f"{model.name}, {load()})", flush=True)
        first = FIRST_EXECUTION.isoformat()
        wall, _ = mesh(project, "plan", "--auto-apply", "--skip-tests", "--execution-time", first, embedded=True)
        print(f"first apply (embedded): {wall:.1f} s", flush=True)
        wall, _ = mesh(project, "plan", DEV, "--auto-apply", "--include-unmodified", "--execution-time", first,
                       embedded=True)
        print(f"dev created (plan {DEV} --include-unmodified): {wall:.1f} s", flush=True)
        results, day, changes = Results(), days(), iter(range(1, 2 * args.rounds + 1))
        mesh_rounds(project, model, args.rounds, day, changes, results, A, D_EMBEDDED, embedded=True)
        with served(project, args.warmup_rounds) as server:
            print(f"the project's Connect server: `mesh spark start` {server.start_s:.1f} s, "
                  f"warm-up {server.warm_s:.1f} s", flush=True)
            mesh_rounds(project, model, args.rounds, day, changes, results, B, D_CONNECT)
            if not args.no_dagster:
                dagster_rounds(project, args.rounds, work, results)
        results.table(args.rounds)
    print(f"\nbenchmark took {time.perf_counter() - began:.1f} s ({load()})")


if __name__ == "__main__":
    main()
