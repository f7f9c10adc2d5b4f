"""What per-partition check results cost a ranged run, on a Dagster instance in a temporary
directory (SQLite, the embedded default), without Spark: only Dagster's event writes are timed.

    python benchmarks/bench_check_events.py [--partitions 365] [--checks 1]

One multi-asset like ours (daily partitions, `BackfillPolicy.single_run`, a partitioned check per
audit) materializes one model over the whole range, then reports its checks as a ranged run does:
  - none: the materialization only (one event per partition);
  - one result: one `AssetCheckResult` per check (Dagster's ranged-run behaviour: the partitions of
    the check end SKIPPED);
  - per partition: what outcomes.check_results does (an output per check, then an
    `AssetCheckEvaluation` per partition pointing at its materialization).
Prints seconds per run and the extra seconds per partition and check.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402

from mesh_dagster.dagster.mapping.outcomes import _latest_materializations  # noqa: E402


def build(partitions: int, checks: int, mode: str) -> dg.Definitions:
    first = date(2020, 1, 1)
    pdef = dg.DailyPartitionsDefinition(start_date=str(first), end_date=str(first + timedelta(days=partitions)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        specs = [dg.AssetCheckSpec(f"audit_{i}", asset="model", partitions_def=pdef) for i in range(checks)]

    @dg.multi_asset(specs=[dg.AssetSpec("model", skippable=True)], check_specs=specs, can_subset=True,
                    partitions_def=pdef, backfill_policy=dg.BackfillPolicy.single_run())
    def step(context):  # no annotation: with postponed annotations Dagster cannot read it
        yield dg.MaterializeResult(asset_key="model")
        outputs = {spec.key: name for name, spec in context.assets_def.check_specs_by_output_name.items()}
        keys = context.partition_keys
        targets = _latest_materializations(context.instance, dg.AssetKey("model"), keys) if mode == "per" else {}
        for spec in specs:
            if mode == "one":
                yield dg.AssetCheckResult(asset_key="model", check_name=spec.name, passed=True)
            elif mode == "per":
                yield dg.Output(None, output_name=outputs[spec.key])
                for key in keys:
                    yield dg.AssetCheckEvaluation(asset_key=dg.AssetKey("model"), check_name=spec.name, passed=True,
                                                  partition=key, target_materialization_data=targets.get(key))
            else:
                yield dg.Output(None, output_name=outputs[spec.key])

    return dg.Definitions(assets=[step])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=365)
    parser.add_argument("--checks", type=int, default=1)
    args = parser.parse_args()
    tags = {"dagster/asset_partition_range_start": "2020-01-01",
            "dagster/asset_partition_range_end": str(date(2020, 1, 1) + timedelta(days=args.partitions - 1))}
    seconds = {}
    for mode in ("none", "one", "per"):
        with tempfile.TemporaryDirectory() as home:
            instance = dg.DagsterInstance.local_temp(home)
            job = build(args.partitions, args.checks, mode).resolve_implicit_global_asset_job_def()
            began = time.perf_counter()
            result = job.execute_in_process(instance=instance, tags=tags)
            seconds[mode] = time.perf_counter() - began
            assert result.success
            print(f"{mode:>5}: {seconds[mode]:6.2f} s for {args.partitions} partitions, {args.checks} check(s), "
                  f"{len(result.get_asset_check_evaluations())} check evaluation(s)")
    extra = (seconds["per"] - seconds["one"]) / (args.partitions * args.checks)
    print(f"per-partition checks: {1000 * extra:.2f} ms per partition and check over one result per check")


if __name__ == "__main__":
    main()
