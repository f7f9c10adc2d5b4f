"""Describe the Dagster graph of a mesh project as plain JSON, for the floor benchmark
(bench_dagster_floor.py) to rebuild with Dagster alone.

    python benchmarks/floor_dump.py PROJECT OUT.json

Why a dump: the floor must be the same graph as ours — the same asset keys, deps, partitions
definitions, checks, specs (description, metadata, tags, kinds, owners, group, code version),
op names, tags and backfill policies, the same jobs, schedules, sensors and resource config — built
by a process that never imports mesh_dagster. Reading it off our own `Definitions` (once, untimed)
keeps the two in step whatever the project or the translator produces. Metadata values are Dagster
serdes records, dumped with Dagster's own serializer.

The description holds only what Dagster validates or snapshots; the step functions, schedule and
sensor bodies are not described (they never run while a code location loads).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dagster import AssetsDefinition, AssetSpec, Definitions, JobDefinition
from dagster_shared.serdes import serialize_value

from mesh_dagster.dagster import definitions


def _partitions_index(defs: Definitions) -> list[Any]:
    """Every distinct partitions definition, in first-seen order (ours share one per unit)."""
    seen: list[Any] = []
    for item in defs.assets or []:
        if isinstance(item, AssetsDefinition) and item.partitions_def is not None and \
                all(p is not item.partitions_def for p in seen):
            seen.append(item.partitions_def)
    return seen


def _spec(spec: AssetSpec) -> dict[str, Any]:
    kinds = sorted(k.removeprefix("dagster/kind/") for k in spec.tags if k.startswith("dagster/kind/"))
    return {
        "key": list(spec.key.path),
        "deps": [list(d.asset_key.path) for d in spec.deps],
        "description": spec.description,
        "metadata": serialize_value(dict(spec.metadata)),
        "group_name": spec.group_name,
        "code_version": spec.code_version,
        "skippable": spec.skippable,
        "owners": list(spec.owners),
        "tags": {k: v for k, v in spec.tags.items() if not k.startswith("dagster/kind/")},
        "kinds": kinds,
    }


def _asset(item: AssetsDefinition, partitions: list[Any]) -> dict[str, Any]:
    index = next((i for i, p in enumerate(partitions) if p is item.partitions_def), None)
    return {
        "op": item.op.name,
        "op_tags": dict(item.op.tags),
        "op_description": item.op.description,
        "can_subset": item.can_subset,
        "single_run": item.backfill_policy is not None,
        "resources": sorted(k for k in item.required_resource_keys if k != "io_manager"),
        "partitions": index,
        "specs": [_spec(s) for s in item.specs],
        "checks": [{"name": c.name, "asset": list(c.asset_key.path), "blocking": c.blocking,
                    "description": c.description, "metadata": serialize_value(dict(c.metadata or {})),
                    "partitioned": c.partitions_def is not None} for c in item.check_specs],
    }


def _fields(config_schema: Any) -> dict[str, list[Any]]:
    """A config schema's top-level fields as [type name, required] (the scalars our jobs use)."""
    if config_schema is None:
        return {}
    fields = getattr(config_schema.config_type, "fields", {}) or {}
    return {name: [field.config_type.given_name or field.config_type.key, field.is_required]
            for name, field in fields.items()}


def _op_job(job: JobDefinition) -> dict[str, Any]:
    (node,) = job.graph.node_defs
    return {"name": job.name, "tags": dict(job.tags), "description": job.description, "op": node.name,
            "op_description": node.description, "config": _fields(node.config_schema),
            "resources": sorted(node.required_resource_keys)}


def _target_keys(sensor: Any, graph: Any) -> list[list[str]] | None:
    """The asset keys a sensor targets (an anonymous asset job Dagster builds), None without one."""
    for target in sensor.targets:
        selection = getattr(target.resolvable_to_job, "selection", None)
        if selection is not None:
            return sorted(list(k.path) for k in selection.resolve(graph))
    return None


def describe(project: str) -> dict[str, Any]:
    defs = definitions(project)
    graph = defs.resolve_asset_graph()
    partitions = _partitions_index(defs)
    assets = [a for a in defs.assets or [] if isinstance(a, AssetsDefinition)]
    external = [a for a in defs.assets or [] if isinstance(a, AssetSpec)]
    resource = (defs.resources or {})["mesh"]
    return {
        "partitions": [{"start": p.start.isoformat(), "cron": p.cron_schedule, "fmt": p.fmt, "tz": p.timezone}
                       for p in partitions],
        "assets": [_asset(a, partitions) for a in assets],
        "external": [_spec(s) for s in external],
        "op_jobs": [_op_job(j) for j in defs.jobs or [] if isinstance(j, JobDefinition)],
        "schedules": [{"name": s.name, "cron": s.cron_schedule, "tz": s.execution_timezone,
                       "description": s.description, "job": s.job.name, "job_description": s.job.description,
                       "keys": sorted(list(k.path) for k in s.job.selection.resolve(graph))}
                      for s in defs.schedules or []],
        "sensors": [{"name": s.name, "interval": s.minimum_interval_seconds, "description": s.description,
                     "keys": _target_keys(s, graph)} for s in defs.sensors or []],
        "resource": _fields(type(resource).to_config_schema()) if hasattr(resource, "to_config_schema") else {},
    }


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(describe(sys.argv[1])))
