"""Dagster event throughput: a single-run backfill and a re-stamp, on SQLite and on Postgres.

    python benchmarks/bench_events.py [--assets 3] [--partitions 1000] [--pg-host 127.0.0.1 --pg-port 5432
                                      --pg-user postgres] [--only sqlite|postgres]
                                      [--variants per-partition,per-asset,op-stamps]

Pure Dagster (no Spark, no project): a multi-asset of `--assets` daily-partitioned assets in a
chain, shaped like mesh's per-unit multi-asset, run as ONE ranged run over `--partitions` days
(`dagster/asset_partition_range_start/end` run tags, `BackfillPolicy.single_run`). Its body
computes nothing and yields one `MaterializeResult(data_version=...)` per asset; Dagster writes
one materialization per partition per asset. Measured per instance:

  backfill   the ranged run, code version v1 (first materialization of every partition)
  re-stamp   the same run again under code version v2 yielding the SAME data version: what a
             re-stamp run of reused data does (Dagster writes the new code version and provenance)
  op stamps  the same number of events logged one by one from an op (`AssetMaterialization` with
             provenance tags): how mesh's `restamp_<env>` job wrote them before

and, for the ranged runs, with Dagster's per-partition "planned" events (its default: one per
partition per asset, written before the run starts, never batched) and with one planned event per
asset (`DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=true`). Postgres runs with
`DAGSTER_EVENT_BATCH_SIZE` (what `mesh ui` sets for a Postgres instance); SQLite's storage has no
batch write. Events/s counts the materializations only (what the UI needs), over the run's wall
time including its planned events. The Postgres database is a scratch one, dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg
import psycopg

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}  # no line per event on the terminal
PLANNED_SUBSET = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
BATCH = "DAGSTER_EVENT_BATCH_SIZE"


def chain_assets(count: int, days: dg.DailyPartitionsDefinition, code_version: str) -> dg.AssetsDefinition:
    keys = [dg.AssetKey(f"model_{i}") for i in range(count)]
    specs = [dg.AssetSpec(k, deps=keys[i - 1:i], code_version=code_version) for i, k in enumerate(keys)]

    @dg.multi_asset(specs=specs, partitions_def=days, backfill_policy=dg.BackfillPolicy.single_run(),
                    can_subset=True, name="models")
    def _models(context) -> Iterator[dg.MaterializeResult]:
        for key in keys:
            if key in context.selected_asset_keys:
                yield dg.MaterializeResult(asset_key=key, data_version=dg.DataVersion("physical_v1"),
                                           metadata={"mesh/outcome": "restamped", "mesh/version": "physical_v1"})

    return _models


def op_stamps_job(count: int, keys: list[str]) -> dg.JobDefinition:
    @dg.op(out={})
    def stamps(context) -> Iterator[dg.AssetMaterialization]:
        for i in range(count):
            key = dg.AssetKey(f"model_{i}")
            for partition in keys:
                yield dg.AssetMaterialization(asset_key=key, partition=partition,
                                              metadata={"mesh/outcome": "restamped"},
                                              tags={"dagster/code_version": "v3", "dagster/data_version": "physical_v1",
                                                    "dagster/data_version_is_user_provided": "true"})

    @dg.job(name="op_stamps")
    def _job() -> None:
        stamps()

    return _job


@contextmanager
def env(**values: str | None) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ranged_run(instance: dg.DagsterInstance, assets: dg.AssetsDefinition, keys: list[str]) -> tuple[int, float]:
    defs = dg.Definitions(assets=[assets])
    job = defs.resolve_implicit_global_asset_job_def()
    began = time.perf_counter()
    tags = {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}
    result = job.execute_in_process(instance=instance, run_config=QUIET, tags=tags)
    seconds = time.perf_counter() - began
    assert result.success
    return len(result.get_asset_materialization_events()), seconds


def measure(name: str, make_instance: Callable[[], dg.DagsterInstance], count: int, keys: list[str],
            batch: str | None, variants: tuple[str, ...]) -> None:
    days = dg.DailyPartitionsDefinition(start_date=keys[0], end_date=None)
    for planned in (v.replace("-", " ") for v in variants if v != "op-stamps"):
        with make_instance() as instance, env(**{BATCH: batch, PLANNED_SUBSET: "true" if planned == "per asset"
                                                 else None}):
            for label, version in (("backfill", "v1"), ("re-stamp", "v2")):
                events, seconds = ranged_run(instance, chain_assets(count, days, version), keys)
                print(f"{name:9} {label:9} planned {planned:13} {events:7,} events {seconds:8.2f} s "
                      f"{events / seconds:8,.0f} events/s")
    if "op-stamps" not in variants:
        return
    with make_instance() as instance, env(**{BATCH: batch}):
        began = time.perf_counter()
        result = op_stamps_job(count, keys).execute_in_process(instance=instance, run_config=QUIET)
        seconds = time.perf_counter() - began
        events = len(result.get_asset_materialization_events())
        print(f"{name:9} {'op stamps':9} {'':21} {events:7,} events {seconds:8.2f} s {events / seconds:8,.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assets", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--batch", default="1000", help="DAGSTER_EVENT_BATCH_SIZE on Postgres")
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument("--variants", default="per-partition,per-asset,op-stamps",
                        help="comma-separated: per-partition, per-asset (planned events), op-stamps")
    args = parser.parse_args()
    variants = tuple(v.strip() for v in args.variants.split(","))
    keys = dg.DailyPartitionsDefinition(start_date="2020-01-01").get_partition_keys()[:args.partitions]
    print(f"# {args.assets} assets x {len(keys)} daily partitions = {args.assets * len(keys):,} materializations "
          f"per run (dagster {dg.__version__})")

    work = tempfile.mkdtemp(prefix="mesh_bench_events_")
    try:
        if args.only in (None, "sqlite"):
            measure("sqlite", lambda: dg.DagsterInstance.local_temp(tempfile.mkdtemp(dir=work)), args.assets, keys,
                    None, variants)
        if args.only in (None, "postgres"):
            admin = {"host": args.pg_host, "port": args.pg_port, "user": args.pg_user, "dbname": "postgres"}
            created: list[str] = []

            def postgres_instance() -> dg.DagsterInstance:
                name = f"mesh_bench_events_{uuid.uuid4().hex[:8]}"
                with psycopg.connect(**admin, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                created.append(name)
                # what `mesh ui` writes for config.yaml `dagster.storage: {type: postgres, ...}`
                return dg.DagsterInstance.local_temp(tempfile.mkdtemp(dir=work), overrides={"storage": {"postgres": {
                    "postgres_db": {"hostname": args.pg_host, "port": args.pg_port, "username": args.pg_user,
                                    "db_name": name, "scheme": "postgresql+psycopg2"}}}})

            try:
                measure("postgres", postgres_instance, args.assets, keys, args.batch, variants)
            finally:
                with psycopg.connect(**admin, autocommit=True) as conn:
                    for name in created:
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
