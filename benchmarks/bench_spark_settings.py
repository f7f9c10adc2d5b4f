"""Spark settings of the embedded default (issue 23), each measured alone: the first apply and the
daily run of the issue-9 project (benchmarks/gen_first_apply.py: a seed, 15 INCREMENTAL_BY_TIME_RANGE,
8 FULL and 6 VIEW models) on local Spark, and the files each leaves in the warehouse.

Why: a setting that saves nothing is one more thing to explain; each one is kept only if it pays.

    flock /tmp/bench.lock python benchmarks/bench_spark_settings.py [--rounds 2] [--concurrent-tasks N]
                                                                     [--only NAME ...] [--keep DIR]
    flock /tmp/bench.lock python benchmarks/bench_spark_settings.py --shuffle-probe [ROWS]

Each variant is passed through the generated project's connection `config:` (the user's config wins
over the session's own settings), so every variant but `defaults` states all it depends on:

- `baseline`: the settings before issue 23: 4 shuffle partitions, `_SUCCESS` markers, `.crc` files;
- `no _SUCCESS`, `cores partitions`, `2x cores partitions`, `no .crc`: the baseline with that one
  setting changed (shuffle partitions = the CPUs, or twice that: 4 on a 2-CPU machine, the baseline);
- `kept, as config`: the settings kept (2x cores partitions, no `_SUCCESS`), stated in `config:`;
- `defaults`: no `config:` at all, i.e. whatever `local_session_config` sets today.

Every round runs every variant once, in an order reversed from one round to the next (so a slow
minute of the machine does not fall on one variant), each from a fresh project (fresh `.mesh`,
metastore and warehouse): `plan --auto-apply --skip-tests --execution-time 2024-01-31`, then
`run --execution-time 2024-02-01`. The table shows medians over rounds: wall seconds of each
command and the files in the warehouse after each (data files, markers, checksums: all of them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_first_apply import DAILY_FIRST, DAILY_NEXT, MESH, run
from gen_first_apply import generate

FIRST_APPLY = ["plan", "--auto-apply", "--skip-tests", "--execution-time", DAILY_FIRST]
DAILY_RUN = ["run", "--execution-time", DAILY_NEXT]
SUCCESS = "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs"
PARTITIONS = "spark.sql.shuffle.partitions"
FILE_IMPL = "spark.hadoop.fs.file.impl"


def cores() -> int:
    """What `local[*]` runs at once: the CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


BASELINE = {PARTITIONS: "4", SUCCESS: "true"}
VARIANTS: dict[str, dict[str, str] | None] = {
    "baseline": BASELINE,
    "no _SUCCESS": {**BASELINE, SUCCESS: "false"},
    "cores partitions": {**BASELINE, PARTITIONS: str(cores())},
    "2x cores partitions": {**BASELINE, PARTITIONS: str(2 * cores())},
    "no .crc": {**BASELINE, FILE_IMPL: "org.apache.hadoop.fs.RawLocalFileSystem"},
    "kept, as config": {PARTITIONS: str(2 * cores()), SUCCESS: "false"},
    "defaults": None,  # no `config:`: the session's own settings
}


@dataclass(frozen=True)
class Sample:
    """One round of one variant."""

    first_apply: float
    daily_run: float
    files_after_apply: int
    files_after_run: int


def project_for(work: Path, settings: dict[str, str] | None, concurrent_tasks: int | None) -> Path:
    """The generated project, with `settings` as its connection's `config:`."""
    project = generate(work, "mesh", concurrent_tasks=concurrent_tasks).resolve()
    if settings:
        config = project / "config.yaml"
        block = "      config:\n" + "".join(f"        {k}: '{v}'\n" for k, v in settings.items())
        text = config.read_text()
        anchor = "      master: local[*]\n"
        if anchor not in text:
            raise SystemExit(f"{config} has no `{anchor.strip()}` line to put the settings under")
        config.write_text(text.replace(anchor, anchor + block))
    return project


def warehouse_files(project: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(project / ".mesh" / "warehouse"))


def measure(work: Path, settings: dict[str, str] | None, concurrent_tasks: int | None) -> Sample:
    project = project_for(work, settings, concurrent_tasks)
    # Spark in the `mesh` process (the opt-out): each sample's settings start a JVM of their own.
    env = {**{k: v for k, v in os.environ.items() if k != "MESH_SQL_TRACE"}, "MESH_SPARK_SERVER": "0"}
    first, _ = run([*MESH, "-p", str(project), *FIRST_APPLY], project.parent, env)
    after_apply = warehouse_files(project)
    daily, _ = run([*MESH, "-p", str(project), *DAILY_RUN], project.parent, env)
    return Sample(first, daily, after_apply, warehouse_files(project))


def report(samples: dict[str, list[Sample]]) -> None:
    print(f"\n{'variant':<21}{'first apply s':>14}{'daily run s':>13}{'files (apply)':>15}{'files (run)':>13}"
          f"  rounds")
    for name, taken in samples.items():
        first, daily, files_apply, files_run = (statistics.median(column) for column in zip(
            *((s.first_apply, s.daily_run, s.files_after_apply, s.files_after_run) for s in taken)))
        print(f"{name:<21}{first:>14.1f}{daily:>13.1f}{files_apply:>15.0f}{files_run:>13.0f}  "
              + ", ".join(f"{s.first_apply:.1f}/{s.daily_run:.1f}" for s in taken))


def shuffle_probe(rounds: int, rows: int) -> None:
    """Why the partitions follow the cores: a query whose work is after its shuffle (a sort-merge
    join of two `rows`-row sides), on ONE embedded session, with 1, 1x, 2x (ours) and 4x the cores
    and 4 (the old value) shuffle partitions, alternated. Fewer partitions than cores leave cores
    idle (as a fixed 4 would on a machine with more than 4 cores); more cost only scheduling."""
    from mesh_dagster.core.config.connections import SparkConnectionConfig  # deliberately lazy: Spark
    from mesh_dagster.engine.session import build_session

    with tempfile.TemporaryDirectory(prefix="bench_shuffle_") as tmp:
        spark = build_session(SparkConnectionConfig(master="local[*]"), Path(tmp) / ".mesh")
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a shuffle join, not a broadcast
        side = f"SELECT id % {rows // 2} AS k, id AS v FROM range({rows})"
        sql = f"SELECT COUNT(*), SUM(a.v * b.v % 7) FROM ({side}) a JOIN ({side}) b ON a.k = b.k"
        counts = sorted({1, cores(), 2 * cores(), 4, 4 * cores()})
        times: dict[int, list[float]] = {n: [] for n in counts}
        for round_no in range(rounds + 1):  # round 0 warms the JVM up, untimed
            for n in counts if round_no % 2 else counts[::-1]:
                spark.conf.set(PARTITIONS, str(n))
                began = time.perf_counter()
                spark.sql(sql).collect()
                if round_no:
                    times[n].append(time.perf_counter() - began)
        spark.stop()
    print(f"\nshuffle join of 2 x {rows:,} rows, {cores()} CPUs, medians of {rounds} rounds:")
    for n in counts:
        print(f"  {n:>3} shuffle partitions: {statistics.median(times[n]):6.2f} s   "
              + ", ".join(f"{t:.2f}" for t in times[n]))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs every variant once")
    parser.add_argument("--concurrent-tasks", type=int, help="the connection's concurrent_tasks (default: ours, 4)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="these variants only")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--shuffle-probe", type=int, metavar="ROWS", nargs="?", const=4_000_000,
                        help="instead: time a shuffle join of ROWS rows a side with 1..4x cores partitions")
    args = parser.parse_args()
    if args.shuffle_probe:
        shuffle_probe(max(args.rounds, 3), args.shuffle_probe)
        return
    names = args.only or list(VARIANTS)
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    began = time.perf_counter()
    print(f"{cores()} CPUs; variants: " + "; ".join(f"{n} = {VARIANTS[n] or '(no config)'}" for n in names))
    with tempfile.TemporaryDirectory(prefix="bench_settings_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        for round_no in range(args.rounds):
            order = names if round_no % 2 == 0 else names[::-1]
            for name in order:
                sample = measure(work / f"r{round_no}_{name.replace(' ', '_').strip('._')}",
                                 VARIANTS[name], args.concurrent_tasks)
                samples[name].append(sample)
                print(f"round {round_no + 1} {name}: {sample}", flush=True)
    report(samples)
    print(f"\nbenchmark took {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
