"""Spark settings of the embedded default (issue 23), each measured alone: the first apply and the
daily run of the issue-9 project (benchmarks/gen_first_apply.py: a seed, 15 INCREMENTAL_BY_TIME_RANGE,
8 FULL and 6 VIEW models) on local Spark, and the files each leaves in the warehouse.

Why: a setting that saves nothing is one more thing to explain; each one is kept only if it pays.

    flock /tmp/bench.lock python benchmarks/bench_spark_settings.py [--rounds 2] [--concurrent-tasks N]
                                                                     [--only NAME ...] [--keep DIR]

Each variant is passed through the generated project's connection `config:` (the user's config wins
over the session's own settings), so every variant but `defaults` states all it depends on:

- `baseline`: the settings before issue 23: 4 shuffle partitions, `_SUCCESS` markers, `.crc` files;
- `no _SUCCESS`, `cores partitions`, `no .crc`: the baseline with that one setting changed;
- `kept, as config`: the settings kept (cores partitions, no `_SUCCESS`), stated in `config:`;
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
    "no .crc": {**BASELINE, FILE_IMPL: "org.apache.hadoop.fs.RawLocalFileSystem"},
    "kept, as config": {PARTITIONS: str(cores()), SUCCESS: "false"},
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
    env = {k: v for k, v in os.environ.items() if k not in ("MESH_SPARK_SHARED", "MESH_SQL_TRACE")}
    first, _ = run([*MESH, "-p", str(project), *FIRST_APPLY], project.parent, env)
    after_apply = warehouse_files(project)
    daily, _ = run([*MESH, "-p", str(project), *DAILY_RUN], project.parent, env)
    return Sample(first, daily, after_apply, warehouse_files(project))


def report(samples: dict[str, list[Sample]]) -> None:
    print(f"\n{'variant':<18}{'first apply s':>14}{'daily run s':>13}{'files (apply)':>15}{'files (run)':>13}"
          f"  rounds")
    for name, taken in samples.items():
        first, daily, files_apply, files_run = (statistics.median(column) for column in zip(
            *((s.first_apply, s.daily_run, s.files_after_apply, s.files_after_run) for s in taken)))
        print(f"{name:<18}{first:>14.1f}{daily:>13.1f}{files_apply:>15.0f}{files_run:>13.0f}  "
              + ", ".join(f"{s.first_apply:.1f}/{s.daily_run:.1f}" for s in taken))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs every variant once")
    parser.add_argument("--concurrent-tasks", type=int, help="the connection's concurrent_tasks (default: ours, 4)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="these variants only")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()
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
