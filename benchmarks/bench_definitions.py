"""Time to build the Dagster `Definitions` of a generated N-model project (targets: 1,000 models
in 2 s, 5,000 in 10 s, first load ever).

    python benchmarks/bench_definitions.py [--models 1000] [--translator]

Each measurement runs in a fresh process and times `definitions(project)` plus Dagster's own
validation of the result (`get_repository_def()`, what a code server does when it loads), after
the imports (printed separately), and the snapshot of the repository a code server sends to
the webserver (`RepositorySnap.from_def`, serialized). Wall-clock seconds, and in brackets the
process's CPU seconds (what the wall time would be on an idle machine: the benchmark machine is
shared). `--translator` adds a run through a `MeshTranslator` subclass overriding group, tags and
owners, to show what a Python translator costs. Cases:
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
clock = lambda: (time.perf_counter(), time.process_time())
t0 = clock()
from mesh_dagster.dagster import definitions
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value
options = {}
if sys.argv[2] == "custom":
    from mesh_dagster.dagster.mapping.translator import MeshTranslator

    class TeamTranslator(MeshTranslator):
        def get_group_name(self, asset):
            return asset.model.schema_name
        def get_tags(self, asset):
            return {**super().get_tags(asset), "team": "analytics"}
        def get_owners(self, asset):
            return ["team:data"]

    options["translator"] = TeamTranslator()
t1 = clock()
defs = definitions(sys.argv[1], **options)
t2 = clock()
repo = defs.get_repository_def()
graph = defs.resolve_asset_graph()
serialize_value(RepositorySnap.from_def(repo))
t3 = clock()
print(json.dumps({"imports": t1[0] - t0[0], "definitions": t2[0] - t1[0], "validate": t3[0] - t2[0],
                  "definitions_cpu": t2[1] - t1[1], "validate_cpu": t3[1] - t2[1],
                  "assets": len(graph.materializable_asset_keys), "checks": len(list(graph.asset_check_keys)),
                  "jobs": len(repo.get_all_jobs())}))
"""


def measure(project: Path, translator: str = "default") -> dict:
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(project), translator], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(label: str, r: dict) -> None:
    total = r["definitions"] + r["validate"]
    cpu = r["definitions_cpu"] + r["validate_cpu"]
    print(f"{label:<44} {total:6.2f} s [{cpu:.2f}]  (definitions {r['definitions']:.2f} [{r['definitions_cpu']:.2f}] "
          f"+ validation + snapshot {r['validate']:.2f} [{r['validate_cpu']:.2f}]; "
          f"imports {r['imports']:.2f}; {r['assets']} assets, {r['checks']} checks, {r['jobs']} jobs)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--translator", action="store_true", help="also time a MeshTranslator subclass")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_bench_defs_"))
    project = generate(work / "project", args.models)
    print(f"# Definitions of a {args.models}-model project ({project})")
    drop_cache(project)
    report("empty state, cold cache", measure(project))
    report("empty state, warm cache", measure(project))
    if args.translator:
        report("empty state, warm cache, Python translator", measure(project, "custom"))
    record_prod(project)
    changed = add_column(project)
    measure(project)  # warms the cache for the changed file
    report(f"prod in state, 1 change ({changed}), warm", measure(project))
    assert not (project / ".mesh" / "metastore_db").exists(), "building Definitions started Spark"
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
