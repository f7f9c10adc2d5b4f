"""Spark calls of the warm path (issue 36), counted: the daily run and the dev loop of the issue-9
project (benchmarks/gen_first_apply.py: 30 models), one call per line of the engine's trace
(`MESH_SQL_TRACE`), by phase and by kind. Counts, not times: they are deterministic, and they do
not depend on what else the machine runs.

    python benchmarks/bench_warm_calls.py [--keep DIR] [--code CHECKOUT ...]

Steps, on a fresh project (`concurrent_tasks: 1`, the embedded Spark):

1. first apply: `plan --auto-apply --skip-tests --execution-time 2024-01-31`;
2. daily run: `run --execution-time 2024-02-01` (the first after the apply), and again for
   2024-02-02 (a day after a day: the steady state);
3. dev loop: one non-breaking edit of a mid-chain FULL model (`bench_b.model_15` gets a column),
   then `plan dev --auto-apply --skip-tests --execution-time 2024-02-02`.

`--code`: run the steps with other checkouts of mesh_dagster too (e.g. a `git worktree` of the
commit before issue 36), one column each, for a before/after table on the same project.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_floor import phase_of, read_trace  # noqa: E402 - sibling scripts, not a package
from gen_first_apply import generate  # noqa: E402

STEPS = [
    ("first apply", ["plan", "--auto-apply", "--skip-tests", "--execution-time", "2024-01-31"]),
    ("daily run", ["run", "--execution-time", "2024-02-01"]),
    ("next daily run", ["run", "--execution-time", "2024-02-02"]),
    ("dev loop", ["plan", "dev", "--auto-apply", "--skip-tests", "--execution-time", "2024-02-02"]),
]
PHASES = ["catalog", "ddl", "writes", "other"]
EDITED = ("models/model_15.sql", "COALESCE(p0.value, 0) + COALESCE(p1.value, 0) AS value",
          "COALESCE(p0.value, 0) + COALESCE(p1.value, 0) AS value,\n  1 AS extra")


def counts(code: Path, work: Path) -> dict[str, Counter]:
    """Each step's calls by phase and by kind, with the mesh_dagster of `code`."""
    project = generate(work / "project", "mesh", concurrent_tasks=1)
    env = {k: v for k, v in os.environ.items() if k != "MESH_SPARK_SHARED"}
    env["PYTHONPATH"] = str(code)
    out: dict[str, Counter] = {}
    for name, args in STEPS:
        if name == "dev loop":
            path, old, new = EDITED
            text = (project / path).read_text()
            assert old in text, f"{path} no longer holds the line the dev loop edits"
            (project / path).write_text(text.replace(old, new))
        trace = work / f"{name.replace(' ', '_')}.tsv"
        trace.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                              cwd=work, env={**env, "MESH_SQL_TRACE": str(trace)}, capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        calls = read_trace(trace)
        tally: Counter = Counter(phase_of(c.kind) for c in calls)
        tally.update(f"  {c.kind}" for c in calls)
        tally["total"] = len(calls)
        out[name] = tally
    return out


def table(columns: dict[str, dict[str, Counter]]) -> str:
    labels = list(columns)
    lines = []
    for step, _ in STEPS:
        kinds = sorted({k for c in columns.values() for k in c[step] if k.startswith("  ")})
        lines.append(f"{step:<46}" + "".join(f"{label[-14:]:>16}" for label in labels))
        for row in ["total", *PHASES, *kinds]:
            lines.append(f"{row[:46]:<46}" + "".join(f"{columns[label][step][row]:>16}" for label in labels))
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--code", type=Path, action="append", default=[], help="another checkout to count too")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    work = args.keep or Path(tempfile.mkdtemp(prefix="warm_calls_"))
    columns = {}
    for code in [*args.code, here]:
        columns[str(code)] = counts(code.resolve(), work / code.resolve().name)
    print(table(columns))


if __name__ == "__main__":
    main()
