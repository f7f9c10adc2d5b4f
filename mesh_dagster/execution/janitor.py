"""The janitor: removes expired environments and the physical tables nothing references."""

from __future__ import annotations

from typing import Callable

from mesh_dagster.core.dates import now_ms, parse_ttl
from mesh_dagster.core.environment import Environment
from mesh_dagster.core.project import Project
from mesh_dagster.core.snapshot import SnapshotId, view_name, view_schema


def _drop_environment_views(engine, env: Environment) -> None:
    for name in env.promoted:
        engine.drop_view(view_name(name, env.name))
    for schema in sorted({view_schema(n.rpartition(".")[0] or "default", env.name) for n in env.promoted}):
        if not engine.list_objects(schema):
            engine.drop_schema(schema, cascade=False)


def run_janitor(project: Project, state, engine_factory: Callable, ignore_ttl: bool = False) -> dict[str, list[str]]:
    """Delete expired environments, then unreferenced snapshots past their TTL and their tables."""
    now = now_ms()
    removed_envs, dropped_tables = [], []
    for env in state.expired_environments(now):
        _drop_environment_views(engine_factory(), env)
        state.delete_environment(env.name)
        removed_envs.append(env.name)

    referenced: set[SnapshotId] = set()
    live_tables: set[str] = set()
    for env in state.get_environments():
        for s in env.snapshots:
            referenced.add(s.snapshot_id)
            if s.table_name:
                live_tables.add(s.table_name)
    ttl = 0 if ignore_ttl else parse_ttl(project.config.snapshot_ttl)
    candidates = [sid for sid in state.all_snapshot_ids() if sid not in referenced]
    snapshots = state.get_snapshots(candidates)
    expired = [s for s in snapshots.values() if s.created_ts + ttl <= now]
    for snap in expired:
        if snap.version and not snap.model.kind.is_symbolic and snap.table_name not in live_tables:
            engine = engine_factory()
            if snap.model.kind.name.value == "VIEW":
                engine.drop_view(snap.table_name)
            else:
                engine.drop_table(snap.table_name)
            live_tables.add(snap.table_name)  # drop each table once
            dropped_tables.append(snap.table_name)
            state.delete_intervals([snap.interval_key])
    state.delete_snapshots([s.snapshot_id for s in expired])
    dropped_tables += _drop_leftover_staging(engine_factory, live_tables)
    return {"environments": removed_envs, "tables": dropped_tables}


def _drop_leftover_staging(engine_factory: Callable, live_tables: set[str]) -> list[str]:
    """Staging tables a crashed write left behind in the physical schemas."""
    from mesh_dagster.engine.adapter import TEMP_PREFIX

    dropped = []
    schemas = sorted({t.split(".")[0] for t in live_tables if "." in t})
    if not schemas:
        return dropped
    engine = engine_factory()
    for schema in schemas:
        for name, kind in engine.list_objects(schema).items():
            if name.startswith(TEMP_PREFIX) and kind == "table":
                engine.drop_table(f"{schema}.{name}")
                dropped.append(f"{schema}.{name}")
    return dropped
