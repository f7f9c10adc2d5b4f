"""Planning speed on a generated 1,000-model project, and the quickstart's first apply on Spark.

    python benchmarks/run_bench.py [--models 1000] [--skip-spark]

Prints, for N models:
  - project load time (in a fresh process, cold cache and warm cache)
  - `mesh plan --explain` on empty state (cold and warm)
  - `mesh plan dev --explain` after one upstream model gained a column, with prod's previous
    version already in state (cold and warm); Spark must not start (checked)
  - the wall time of the quickstart's first `mesh plan --auto-apply` on local Spark
The state for the dev plan is put in place directly (snapshots + environment record), which is
the fastest way; the timed commands are the real CLI.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_project import generate  # noqa: E402

MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]


def timed(cmd: list[str], cwd: Path | None = None, input: str | None = None) -> tuple[float, str]:
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, input=input)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def drop_cache(project: Path) -> None:
    shutil.rmtree(project / ".mesh" / "cache", ignore_errors=True)


def record_prod(project: Path) -> None:
    """Put prod's state in place without Spark: snapshots, intervals and the environment record."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / 'tests')!r})
from project_builder import record_plan
from mesh_dagster.context import Context
ctx = Context({str(project)!r})
record_plan(ctx.plans.plan('prod'), ctx.state)
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def add_column(project: Path) -> str:
    """Add a column to an upstream (early, non-seed) model with many descendants."""
    for path in sorted((project / "models").glob("*.sql")):
        text = path.read_text()
        if "kind SEED" not in text and "kind FULL" in text:
            path.write_text(text.replace("AS value\n", "AS value,\n  1 AS new_column\n", 1))
            return path.name
    raise SystemExit("no FULL model found")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--skip-spark", action="store_true", help="skip the quickstart apply on Spark")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_bench_"))
    project = generate(work / "project", args.models)
    print(f"# {args.models}-model project in {project}")

    load = [sys.executable, "-c", f"import time; t=time.perf_counter(); from mesh_dagster.core.project.project import "
                                  f"load_project; load_project({str(project)!r}); print(time.perf_counter()-t)"]
    drop_cache(project)
    _, out = timed(load)
    print(f"project load (in process, cold cache):     {float(out):6.2f} s")
    _, out = timed(load)
    print(f"project load (in process, warm cache):     {float(out):6.2f} s")

    drop_cache(project)
    t, _ = timed([*MESH, "-p", str(project), "plan", "--explain"])
    print(f"mesh plan --explain, empty state (cold):   {t:6.2f} s")
    t, _ = timed([*MESH, "-p", str(project), "plan", "--explain"])
    print(f"mesh plan --explain, empty state (warm):   {t:6.2f} s")

    record_prod(project)
    changed = add_column(project)
    drop_cache(project)
    t, out = timed([*MESH, "-p", str(project), "plan", "dev", "--explain"])
    assert "Non-breaking" in out, out[-2000:]
    print(f"mesh plan dev --explain, 1 change (cold):  {t:6.2f} s   ({changed})")
    t, out = timed([*MESH, "-p", str(project), "plan", "dev", "--explain"])
    print(f"mesh plan dev --explain, 1 change (warm):  {t:6.2f} s")
    assert not (project / ".mesh" / "metastore_db").exists(), "planning started Spark"

    if not args.skip_spark:
        qs = work / "quickstart"
        qs.mkdir()
        timed([*MESH, "-p", str(qs), "init", "spark"])
        t, _ = timed([*MESH, "-p", str(qs), "plan", "--auto-apply"])
        print(f"quickstart first mesh plan --auto-apply:   {t:6.2f} s   (local Spark, includes the unit test)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
