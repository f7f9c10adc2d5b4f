"""Time to build the Dagster `Definitions` of a generated N-model project (target: under 5 s).

    python benchmarks/bench_definitions.py [--models 1000]

Each measurement runs in a fresh process and times `definitions(project)` plus Dagster's own
validation of the result (`get_repository_def()`, what a code server does when it loads), after
the imports (printed separately), and the snapshot of the repository a code server sends to
the webserver (`RepositorySnap.from_def`). Cases:
  - empty state, cold project cache (first load ever)
  - empty state, warm cache
  - prod in state and one upstream model changed (categories against prod), warm cache
Spark must never start (checked).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_project import generate  # noqa: E402
from run_bench import add_column, drop_cache, record_prod  # noqa: E402

MEASURE = """
import json, sys, time
t0 = time.perf_counter()
from mesh_dagster.dagster import definitions
t1 = time.perf_counter()
defs = definitions(sys.argv[1])
t2 = time.perf_counter()
repo = defs.get_repository_def()
graph = defs.resolve_asset_graph()
from dagster._core.remote_representation.external_data import RepositorySnap
RepositorySnap.from_def(repo)
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "definitions": t2 - t1, "validate": t3 - t2,
                  "assets": len(graph.materializable_asset_keys), "checks": len(list(graph.asset_check_keys)),
                  "jobs": len(repo.get_all_jobs())}))
"""


def measure(project: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(project)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(label: str, r: dict) -> None:
    total = r["definitions"] + r["validate"]
    print(f"{label:<44} {total:6.2f} s  (definitions {r['definitions']:.2f} "
          f"+ validation + snapshot {r['validate']:.2f}; "
          f"imports {r['imports']:.2f}; {r['assets']} assets, {r['checks']} checks, {r['jobs']} jobs)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_bench_defs_"))
    project = generate(work / "project", args.models)
    print(f"# Definitions of a {args.models}-model project ({project})")
    drop_cache(project)
    report("empty state, cold cache", measure(project))
    report("empty state, warm cache", measure(project))
    record_prod(project)
    changed = add_column(project)
    measure(project)  # warms the cache for the changed file
    report(f"prod in state, 1 change ({changed}), warm", measure(project))
    assert not (project / ".mesh" / "metastore_db").exists(), "building Definitions started Spark"
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
