"""Cost of keeping Dagster in step with the state store: the re-stamp sensor and its runs.

    python benchmarks/bench_restamp.py [--models 1000] [--start 2026-01-01]

After `mesh plan` applied prod outside Dagster (the generated project, recorded without Spark),
every partition holding data must be stamped once. Measured, each in this process, on a local
SQLite Dagster instance in a temp dir:
  - the first sensor tick (no cursor: every model is a suspect),
  - the ranged re-stamp runs it requests (one per interval unit, model set and contiguous range;
    each a run of the model assets tagged mesh/restamp=true), run one after the other here, and
    their rate in events per second (with Dagster's planned events per asset, as `mesh ui` sets),
  - the next tick (cursor set): what the sensor costs every tick.
Spark never starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_project import generate  # noqa: E402
from run_bench import record_prod  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--start", default="2026-01-01", help="first day of the project's partitions")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mesh_bench_restamp_"))
    project = generate(work / "project", args.models)
    config = project / "config.yaml"
    config.write_text(re.sub(r"start: \d{4}-\d{2}-\d{2}", f"start: {args.start}", config.read_text()))
    record_prod(project)

    import dagster as dg

    from mesh_dagster.dagster import definitions
    from mesh_dagster.dagster.ui.workspace import PLANNED_EVENTS_PER_RUN

    os.environ.update(PLANNED_EVENTS_PER_RUN)

    (work / "dagster_home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(work / "dagster_home"))
    defs = definitions(project, shared_spark=False)
    sensor = defs.resolve_sensor_def("restamp_prod_sensor")
    partitions = len(defs.resolve_asset_graph().get(next(iter(defs.resolve_asset_graph().materializable_asset_keys)))
                     .partitions_def.get_partition_keys())
    print(f"# Re-stamping a {args.models}-model project, {partitions} daily partitions from {args.start} ({project})")

    began = time.perf_counter()
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        first = sensor(context)
        cursor = context.cursor
    print(f"first sensor tick (no cursor)        {time.perf_counter() - began:7.2f} s  -> {type(first).__name__}")

    began = time.perf_counter()
    requests = [] if isinstance(first, dg.SkipReason) else first.run_requests
    job = defs.resolve_implicit_global_asset_job_def()
    events = 0
    for request in requests:
        result = job.execute_in_process(instance=instance, tags=request.tags, asset_selection=request.asset_selection,
                                        run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}})
        events += len(result.get_asset_materialization_events())
    seconds = time.perf_counter() - began
    print(f"{len(requests)} ranged re-stamp run(s)          {seconds:7.2f} s  -> {events} events, "
          f"{events / seconds:,.0f} events/s; all partitions: {args.models * partitions:,} events")

    began = time.perf_counter()
    with dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor) as context:
        sensor(context)
        cursor = context.cursor
    with dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor) as context:
        began = time.perf_counter()
        steady = sensor(context)
    print(f"next tick (cursor set)               {time.perf_counter() - began:7.2f} s  -> {type(steady).__name__}")
    assert not (project / ".mesh" / "metastore_db").exists(), "re-stamping started Spark"
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
