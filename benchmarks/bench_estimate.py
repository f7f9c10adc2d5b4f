"""A plan's backfill estimate against what the apply then took, on the example project (issue 38,
point 9): per model and in total, as `mesh plan` prints them.

    python benchmarks/bench_estimate.py [--keep DIR]

A fresh copy of example_project/ is applied to prod (`mesh plan --auto-apply`: nothing timed yet,
so nothing is estimated; its batches are timed), then two plans of dev are made and applied, each
estimated from the timings recorded before it:
1. a breaking change of incremental_model (its new version has no batches of its own: estimated
   from its earlier version's), and full_model recomputed with it;
2. a new model reading full_model (no history at all: estimated from its parent's batches).
Each line: model, estimate (with how sure), the seconds its batches took in the apply (summed over
its batches, as the estimate counts: work, not wall time). Read from the CLI's own output: the
plan tree's `~Ns` and the apply's per-batch lines.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]
BREAKING = ("  item_id,\n", "  item_id + 0 AS item_id,\n")
NEW_MODEL = """MODEL (
  name sqlmesh_example.orders_per_item,
  kind FULL,
  cron '@daily'
);

SELECT item_id, num_orders * 2 AS doubled FROM sqlmesh_example.full_model
"""
SECONDS = r"(\d+(?:\.\d+)?)(ms|s|m|h)"


def mesh(project: Path, *args: str) -> str:
    done = subprocess.run([*MESH, "-p", str(project), *args], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"mesh {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def seconds(amount: str, unit: str) -> float:
    return float(amount) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]


def estimates(out: str) -> dict[str, str]:
    """Model -> `~12s` as the plan tree ends its backfill line."""
    return {m.group(1): m.group(2) for m in re.finditer(r"([\w.]+): \[[^\n]*?(~\S+)\s*$", out, re.M)}


def took(out: str) -> dict[str, float]:
    """Model -> seconds its batches took, from the apply's `[i/n] model [..] 1.23s` lines."""
    found: dict[str, float] = {}
    for m in re.finditer(r"\[\d+/\d+\]\s+(\S+)\s+\[.*\]\s+(\d+\.\d+)s\s*$", out, re.M):
        found[m.group(1)] = found.get(m.group(1), 0.0) + float(m.group(2))
    return found


def report(title: str, out: str) -> None:
    print(f"\n{title}")
    guessed, actual = estimates(out), took(out)
    for name in sorted(set(guessed) | set(actual)):
        print(f"  {name:<45} estimated {guessed.get(name, '-'):>8}   took {actual.get(name, 0.0):6.2f}s")
    for line in out.splitlines():
        if line.startswith(("Estimated backfill", "Backfill took")):
            print(f"  {line.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="keep the project in DIR (default: a temporary folder)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="mesh_estimate_"))
    project = work / "project"
    shutil.copytree(ROOT / "example_project", project, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    try:
        first = mesh(project, "plan", "--auto-apply", "--no-prompts")
        said = "an estimate (unexpected)" if "Estimated backfill" in first else "no estimate (nothing timed yet)"
        print(f"prod applied: {sum(took(first).values()):.1f}s of batches timed; its plan said {said}")
        inc = project / "models" / "incremental_model.sql"
        inc.write_text(inc.read_text().replace(*BREAKING))
        report("dev, a breaking change of incremental_model:", mesh(project, "plan", "dev", "--auto-apply",
                                                                    "--no-prompts"))
        (project / "models" / "orders_per_item.sql").write_text(NEW_MODEL)
        report("dev, a new model reading full_model:", mesh(project, "plan", "dev", "--auto-apply", "--no-prompts"))
    finally:
        subprocess.run([*MESH, "-p", str(project), "spark", "stop"], capture_output=True, timeout=120)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
