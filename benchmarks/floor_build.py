"""Dagster's own floor: the graph floor_dump.py described, built and resolved by Dagster alone.

    python benchmarks/floor_build.py DESCRIPTION.json [--bare]

Prints one JSON line with the same fields as bench_definitions.py's measurement (imports, then
`definitions` = building the assets, jobs, schedules, sensors and the `Definitions`, then
`validate` = `get_repository_def()`, `resolve_asset_graph()` and the serialized `RepositorySnap`),
plus `describe`: reading the description (JSON, metadata decoded with Dagster's serdes), which is
no part of the floor and is printed only so nothing is hidden.

The floor is what any integration showing these models in Dagster must pay: one one-spec
`multi_asset` per model (one step per model, as ours), with the same keys, deps, partitions
definitions, checks, backfill policies and (unless `--bare`) the same descriptions, metadata, tags,
kinds and owners; the same op jobs with the same config fields, the same asset jobs behind the
schedule and the sensor, the same resource config and the in-process executor. Its step functions
share one function with a precomputed signature (Dagster inspects a step function's signature many
times while building an asset; a closure per asset costs more, and that is no floor). `--bare`
leaves out everything the UI only shows (descriptions, metadata, tags, kinds, owners): the floor
of the graph alone. mesh_dagster is never imported (checked).
"""

import gc
import inspect
import json
import sys
import time
from datetime import datetime
from typing import Any

clock = lambda: (time.perf_counter(), time.process_time())  # noqa: E731 - as bench_definitions.py's
t0 = clock()
import dagster as dg  # noqa: E402
from dagster._core.remote_representation.external_data import RepositorySnap  # noqa: E402
from dagster_shared.serdes import deserialize_value, serialize_value  # noqa: E402

SCALARS: dict[str, Any] = {"String": str, "Bool": bool, "Int": int, "Float": float, "StringSourceType": dg.StringSource,
                           "BoolSourceType": dg.BoolSource, "IntSourceType": dg.IntSource}


def config_type(name: str) -> Any:
    """A config type from its dumped key (`Noneable.Map.String.StringSourceType`, `Array.String`)."""
    head, _, rest = name.partition(".")
    if head == "Noneable":
        return dg.Noneable(config_type(rest))
    if head == "Array":
        return [config_type(rest)]
    if head == "Map":
        key, _, value = rest.partition(".")
        return dg.Map(SCALARS[key], config_type(value))
    return SCALARS[name]


def config_schema(fields: dict[str, list[Any]]) -> dict[str, dg.Field] | None:
    return {name: dg.Field(config_type(kind), is_required=required) for name, (kind, required) in fields.items()} \
        or None


def _step(context: dg.AssetExecutionContext):
    """Every floor asset's step: never run while loading."""
    yield from ()


_step.__signature__ = inspect.signature(_step)  # type: ignore[attr-defined]


def spec(s: dict[str, Any], bare: bool, partitions: dg.PartitionsDefinition | None = None) -> dg.AssetSpec:
    if bare:
        return dg.AssetSpec(key=s["key"], deps=s["deps"], group_name=s["group_name"], code_version=s["code_version"],
                            skippable=s["skippable"])
    return dg.AssetSpec(key=s["key"], deps=s["deps"], description=s["description"], metadata=s["metadata"],
                        group_name=s["group_name"], code_version=s["code_version"], skippable=s["skippable"],
                        owners=s["owners"] or None, tags=s["tags"], kinds=set(s["kinds"]))


def asset(a: dict[str, Any], partitions: list[dg.TimeWindowPartitionsDefinition], bare: bool) -> dg.AssetsDefinition:
    partitions_def = partitions[a["partitions"]] if a["partitions"] is not None else None
    checks = [dg.AssetCheckSpec(c["name"], asset=c["asset"], blocking=c["blocking"],
                                description=None if bare else c["description"],
                                metadata=None if bare else c["metadata"],
                                partitions_def=partitions_def if c["partitioned"] else None) for c in a["checks"]]
    return dg.multi_asset(
        name=a["op"], specs=[spec(s, bare) for s in a["specs"]], check_specs=checks or None, can_subset=a["can_subset"],
        partitions_def=partitions_def, backfill_policy=dg.BackfillPolicy.single_run() if a["single_run"] else None,
        required_resource_keys=set(a["resources"]), op_tags=None if bare else a["op_tags"],
        description=None if bare else a["op_description"])(_step)


def op_job(j: dict[str, Any]) -> dg.JobDefinition:
    @dg.op(name=j["op"], out={}, config_schema=config_schema(j["config"]), required_resource_keys=set(j["resources"]),
           description=j["op_description"])
    def _op(context: dg.OpExecutionContext):
        pass

    @dg.job(name=j["name"], tags=j["tags"], description=j["description"])
    def _job():
        _op()

    return _job


def schedule(s: dict[str, Any]) -> dg.ScheduleDefinition:
    job = dg.define_asset_job(s["job"], selection=dg.AssetSelection.assets(*s["keys"]),
                              description=s["job_description"])

    @dg.schedule(name=s["name"], cron_schedule=s["cron"], job=job, execution_timezone=s["tz"],
                 description=s["description"])
    def _schedule(context: dg.ScheduleEvaluationContext):
        return dg.SkipReason("floor")

    return _schedule


def sensor(s: dict[str, Any]) -> dg.SensorDefinition:
    target = dg.AssetSelection.assets(*s["keys"]) if s["keys"] is not None else None

    @dg.sensor(name=s["name"], target=target, minimum_interval_seconds=s["interval"], description=s["description"])
    def _sensor(context: dg.SensorEvaluationContext):
        return dg.SkipReason("floor")

    return _sensor


SPENT = {"assets": 0.0}  # CPU seconds building the asset definitions (specs and multi_assets), for the report


def build(d: dict[str, Any], bare: bool) -> dg.Definitions:
    partitions = [dg.TimeWindowPartitionsDefinition(start=datetime.fromisoformat(p["start"]), cron_schedule=p["cron"],
                                                    fmt=p["fmt"], timezone=p["tz"]) for p in d["partitions"]]
    start = time.process_time()
    assets: list[Any] = [asset(a, partitions, bare) for a in d["assets"]]
    SPENT["assets"] = time.process_time() - start
    assets += [spec(s, bare) for s in d["external"]]
    resource = dg.ResourceDefinition(resource_fn=lambda _: None, config_schema=config_schema(d["resource"]))
    return dg.Definitions(assets=assets, jobs=[op_job(j) for j in d["op_jobs"]],
                          schedules=[schedule(s) for s in d["schedules"]], sensors=[sensor(s) for s in d["sensors"]],
                          resources={"mesh": resource}, executor=dg.in_process_executor)


def decoded(path: str) -> dict[str, Any]:
    """The description, its metadata decoded back into Dagster's metadata values."""
    with open(path) as f:
        d = json.load(f)
    for a in d["assets"]:
        for s in a["specs"]:
            s["metadata"] = deserialize_value(s["metadata"])
        for c in a["checks"]:
            c["metadata"] = deserialize_value(c["metadata"])
    for s in d["external"]:
        s["metadata"] = deserialize_value(s["metadata"])
    return d


def main() -> None:
    bare, tuned = "--bare" in sys.argv[2:], "--gc" in sys.argv[2:]
    t1 = clock()
    description = decoded(sys.argv[1])
    t2 = clock()
    if tuned:  # as mesh_dagster's `fewer_collections` (core/config/memory.py) does around its load
        gc.freeze()
        gc.set_threshold(max(gc.get_threshold()[0], 10_000), *gc.get_threshold()[1:])
    defs = build(description, bare)
    if tuned:
        gc.unfreeze()
    t3 = clock()
    repo = defs.get_repository_def()
    graph = defs.resolve_asset_graph()
    serialize_value(RepositorySnap.from_def(repo))
    t4 = clock()
    assert "mesh_dagster" not in sys.modules, "the floor imported mesh_dagster"
    print(json.dumps({"imports": t1[0] - t0[0], "describe": t2[0] - t1[0], "definitions": t3[0] - t2[0],
                      "validate": t4[0] - t3[0], "definitions_cpu": t3[1] - t2[1], "validate_cpu": t4[1] - t3[1],
                      "assets_cpu": SPENT["assets"],
                      "assets": len(graph.materializable_asset_keys), "checks": len(list(graph.asset_check_keys)),
                      "jobs": len(repo.get_all_jobs())}))


if __name__ == "__main__":
    main()
