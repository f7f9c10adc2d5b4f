"""What a backfill launched from the Dagster UI costs beyond its Spark work (issue 38, point 4).

    python benchmarks/bench_backfill.py [--days 31] [--no-change]

The example project moved to the last `--days` days (as the Dagster tests move it:
tests/dagster/project_copies.py), prod applied by `mesh plan --auto-apply` (every interval computed),
then a non-breaking change to incremental_model (a new column: its new version has nothing
computed; `--no-change` backfills what is computed, which computes nothing), `mesh ui -e prod`,
and a backfill of incremental_model and its FULL child full_model over the last `--days`
partitions, launched as the UI's "Materialize" dialog launches it (GraphQL
`launchPartitionBackfill`). Prints, in seconds from the launch: the backfill's completion, and
for each of its runs when the backfill daemon created it, its queue (the run queue's dequeue, the
run worker's start and code load) and execution, and each step's own time, which is the Spark
work and its bookkeeping. The overhead is the backfill's wall time less its steps' time.

Then the same work as one run, for comparison: a second change to incremental_model, the code
location reloaded, and one run of the asset job over the same range (the partition range tags, as
the cron schedules launch it), timed from launchRun to its end.

Dagster makes a backfill of assets with different partitioning two runs at least (one per
partitions definition: the ranged run of the incremental model, then the FULL model's own run,
launched by the backfill daemon once the first ended); the numbers say what that costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dagster_ui import DagsterUI, Request

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "dagster"))
from project_copies import recent_example  # noqa: E402 - the tests' copy of the example, moved to recent days

MESH = [sys.executable, "-m", "mesh_dagster.cli.main"]
MODELS = ("incremental_model", "full_model")
PARTITIONS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  partitionKeysByDimension { partitionKeys } } } }"""
BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) { __typename
  ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }"""
RELOAD = """mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) { __typename } }"""
RUNS = """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
  ... on Runs { results { runId status creationTime startTime endTime
    stepStats { stepKey startTime endTime } } } } }"""
DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def _changed(project: Path, column: str) -> None:
    """A non-breaking change to incremental_model: one more column (its new version has nothing computed)."""
    model = project / "models" / "incremental_model.sql"
    model.write_text(model.read_text().replace("  item_id,\n", f"  item_id,\n  'z' AS {column},\n", 1))


def _one_run(ui: DagsterUI, days: int) -> None:
    """The same models over the same range as one run of the asset job."""
    _changed(ui.project, "other_column")
    ui.query(RELOAD, name=ui.location)
    ui.wait_ready()
    key = {"path": ["sqlmesh_example", MODELS[0]]}
    keys = ui.query(PARTITIONS, key=key)["assetNodeOrError"]["partitionKeysByDimension"][0]["partitionKeys"][-days:]
    request = Request("__ASSET_JOB", {"dagster/asset_partition_range_start": keys[0],
                                      "dagster/asset_partition_range_end": keys[-1]},
                      [["sqlmesh_example", m] for m in MODELS])
    began = time.perf_counter()
    finished = ui.finish(ui.launch(request), began)
    print(f"one run of both: {finished.status} in {finished.wall_s:.1f} s from launch "
          f"(queued {finished.queued_s:.1f} s, executing {finished.executing_s:.1f} s)")


def _prepared(work: Path, days: int, change: bool) -> Path:
    project = recent_example(work / "project", days)
    began = time.perf_counter()
    applied = subprocess.run([*MESH, "-p", str(project), "plan", "--auto-apply"], capture_output=True, text=True)
    if applied.returncode != 0:
        raise SystemExit(f"mesh plan --auto-apply failed:\n{applied.stdout[-2000:]}\n{applied.stderr[-2000:]}")
    print(f"prod applied in {time.perf_counter() - began:.1f} s")
    if change:
        _changed(project, "new_column")
    return project


def _backfill(ui: DagsterUI, days: int) -> tuple[str, float, float, list[dict]]:
    """Launch the backfill over the last `days` partitions; (status, wall seconds, the launch's
    Unix time, its runs)."""
    key = {"path": ["sqlmesh_example", MODELS[0]]}
    keys = ui.query(PARTITIONS, key=key)["assetNodeOrError"]["partitionKeysByDimension"][0]["partitionKeys"]
    params = {"partitionNames": keys[-days:], "assetSelection": [{"path": ["sqlmesh_example", m]} for m in MODELS]}
    began, at = time.perf_counter(), time.time()
    launched = ui.query(BACKFILL, p=params)["launchPartitionBackfill"]
    if launched["__typename"] != "LaunchBackfillSuccess":
        raise SystemExit(f"launchPartitionBackfill failed: {launched}")
    backfill_id = launched["backfillId"]
    while True:
        status = ui.query(STATUS, id=backfill_id)["partitionBackfillOrError"]["status"]
        if status in DONE:
            wall = time.perf_counter() - began
            break
        if time.perf_counter() - began > 1800:
            raise SystemExit(f"backfill {backfill_id} still {status} after 30 min")
        time.sleep(0.5)
    runs = ui.query(RUNS, id=backfill_id)["runsOrError"]["results"]
    return status, wall, at, sorted(runs, key=lambda r: r["creationTime"])


def _report(status: str, wall: float, at: float, runs: list[dict]) -> None:
    steps_s = 0.0
    print(f"backfill {status}: {wall:.1f} s from launch, {len(runs)} run(s)")
    for run in runs:
        queued = (run["startTime"] or run["creationTime"]) - run["creationTime"]
        executing = (run["endTime"] or run["startTime"] or 0) - (run["startTime"] or 0)
        print(f"  run {run['runId'][:8]} {run['status']}: created at {run['creationTime'] - at:.1f} s, "
              f"queued {queued:.1f} s, executing {executing:.1f} s")
        for step in run["stepStats"]:
            took = (step["endTime"] or 0) - (step["startTime"] or 0)
            steps_s += took
            print(f"    step {step['stepKey']}: {took:.1f} s")
    print(f"steps {steps_s:.1f} s; overhead (wall - steps) {wall - steps_s:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=31, help="partitions to backfill (the last ones)")
    parser.add_argument("--no-change", action="store_true", help="backfill the applied version (nothing to compute)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mesh_bench_backfill_") as tmp:
        work = Path(tmp)
        project = _prepared(work, args.days, not args.no_change)
        ui = DagsterUI(MESH, project, "prod", work / "ui.log", dict(os.environ))
        try:
            print(f"mesh ui ready in {ui.wait_ready():.1f} s")
            print(f"settled after re-stamps: {ui.wait_idle(15)}")
            _report(*_backfill(ui, args.days))
            if not args.no_change:
                _one_run(ui, args.days)
        finally:
            ui.stop()
            subprocess.run([*MESH, "-p", str(project), "spark", "stop"], capture_output=True)


if __name__ == "__main__":
    main()
