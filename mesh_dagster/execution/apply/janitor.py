"""The janitor: removes expired environments and the physical tables nothing references.

It must never touch what a plan uses, so it runs under the exclusive lock (`janitor_lock`): it
waits for running applies and promotions to finish, and none starts until it is done. A plan
built before the janitor ran and applied after it is refused by the apply's own check
(`apply.check_snapshots_kept`) if the janitor deleted a snapshot it reuses.

What counts as used: every snapshot an environment references, plus, for an environment whose
last apply stopped before it was finalized, the snapshots of the records it replaced (its views
may still read their tables). A table is dropped only when no snapshot that survives this run
uses it — two snapshots of one version share one table and one interval history.

Order: state first, then the warehouse. Snapshot records and the interval history of the tables
about to go are deleted in one transaction, then the tables are dropped. A crash in between leaves
an unreferenced table (wasted space), never a record pointing at a table that is gone.

The journal of writes (state/journal.py) is honoured: a staging table a pending write still needs
is never dropped (a resumed apply finishes the write from it), and the generations rewrites
switched away from are deleted here, unless a table points at one again or a pending write needs it
— no run reads them while the janitor holds its lock.
"""

from __future__ import annotations

from collections.abc import Callable

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.names import TEMP_PREFIX, physical_table, view_name, view_schema
from mesh_dagster.core.snapshots.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.snapshots.snapshot import PREVIEW_SUFFIX, Snapshot
from mesh_dagster.core.time.dates import now_ms, parse_ttl
from mesh_dagster.execution.locking import janitor_lock
from mesh_dagster.execution.ports import Engine, State
from mesh_dagster.state.store import Lease


def run_janitor(config: ProjectConfig, state: State, engine_factory: Callable[[], Engine], ignore_ttl: bool = False,
                timeout_s: float = 600) -> dict[str, list[str]]:
    """Delete expired environments, then unreferenced snapshots past their TTL and their tables.

    Only the configuration is needed (no model is read): a broken model file never blocks it."""
    with janitor_lock(state, timeout_s=timeout_s) as lease:
        removed_envs = _remove_expired_environments(state, engine_factory, lease)
        ttl = 0 if ignore_ttl else parse_ttl(config.snapshot_ttl)
        doomed, live_tables = _expired_snapshots(state, now_ms() - ttl)
        dropped = _remove_snapshots(state, engine_factory, doomed, live_tables, lease)
        known = {*live_tables, *dropped, *(s.table_name for s in doomed if _has_table(s))}
        dropped += _drop_leftovers(state, engine_factory, live_tables, known, lease)
        _delete_retired_generations(state, engine_factory, lease)
    return {"environments": removed_envs, "tables": dropped}


def _remove_expired_environments(state: State, engine_factory: Callable[[], Engine], lease: Lease) -> list[str]:
    removed = []
    for env in state.environments.expired_environments(now_ms()):
        lease.check()
        replaced = state.environments.replaced_environment(env.name)
        _drop_environment_views(engine_factory(), env, replaced)
        state.environments.delete_environment(env.name)
        removed.append(env.name)
    return removed


def _drop_environment_views(engine: Engine, env: Environment, replaced: Environment | None) -> None:
    shown = sorted({*env.promoted, *(replaced.promoted if replaced else [])})
    for name in shown:
        engine.catalog.drop_view(view_name(name, env.name))
    for schema in sorted({view_schema(n.rpartition(".")[0] or "default", env.name) for n in shown}):
        if not engine.catalog.list_objects(schema):
            engine.catalog.drop_schema(schema, cascade=False)


def _in_use(state: State) -> list[EnvironmentSnapshot]:
    """Snapshots some environment uses: its record's, and while it is unfinalized, the replaced
    records' too (its views may still point at their tables)."""
    used: list[EnvironmentSnapshot] = []
    for env in state.environments.get_environments():
        replaced = state.environments.replaced_environment(env.name) if env.finalized_ts is None else None
        used += env.snapshots + (replaced.snapshots if replaced else [])
    return used


def _expired_snapshots(state: State, created_before_ms: int) -> tuple[list[Snapshot], set[str]]:
    """(unreferenced snapshots created at or before the cut-off, the tables every other one uses)."""
    used = _in_use(state)
    referenced = {s.snapshot_id for s in used}
    live_tables = {s.table_name for s in used if s.table_name}
    doomed = []
    for snap in state.snapshots.get_snapshots(state.snapshots.all_snapshot_ids() - referenced).values():
        if snap.created_ts <= created_before_ms:
            doomed.append(snap)
        elif _has_table(snap):
            live_tables.add(snap.table_name)
    return doomed, live_tables


def _has_table(snapshot: Snapshot) -> bool:
    return bool(snapshot.version) and not snapshot.model.kind.is_symbolic


def _remove_snapshots(state: State, engine_factory: Callable[[], Engine], doomed: list[Snapshot], live_tables: set[str],
                      lease: Lease) -> list[str]:
    """Forget `doomed` (with the intervals of tables no survivor uses), then drop those tables."""
    if not doomed:
        return []
    tables: dict[str, Snapshot] = {}
    for snap in doomed:
        if _has_table(snap) and snap.table_name not in live_tables:
            tables.setdefault(snap.table_name, snap)
    lease.check()
    state.snapshots.forget_snapshots([s.snapshot_id for s in doomed], [s.interval_key for s in tables.values()])
    state.shapes.forget(tables)  # what was known of their columns goes with them
    pending = {w.table: w for w in state.journal.pending_writes()}
    for table, snap in tables.items():
        lease.check()
        engine = engine_factory()
        if snap.model.kind.is_view:
            engine.catalog.drop_view(table)
            continue
        engine.catalog.drop_table(table)
        if table in pending:  # nothing is left to finish
            state.journal.finish_write(table, None)
            engine.writes.discard(pending[table].payload)
    return list(tables)


def _drop_leftovers(state: State, engine_factory: Callable[[], Engine], live_tables: set[str], known: set[str],
                    lease: Lease) -> list[str]:
    """Tables nothing references any more that no snapshot record names: staging tables a crashed
    write left behind, and previews (`..__dev`) no environment reads — with their intervals, so a
    preview built again later starts empty rather than claiming rows it no longer holds."""

    schemas = sorted({t.split(".")[0] for t in known if "." in t})
    dropped: list[str] = []
    if not schemas:
        return dropped
    prefixes = {physical_table(sid.name, ""): sid.name for sid in state.snapshots.all_snapshot_ids()}
    needed = {staging for write in state.journal.pending_writes() for staging in write.payload.get("staging", [])}
    engine = engine_factory()
    for schema in schemas:
        for name, kind in engine.catalog.list_objects(schema).items():
            table = f"{schema}.{name}"
            if kind != "table" or table in live_tables or table in needed:
                continue
            if name.startswith(TEMP_PREFIX):
                lease.check()
                engine.catalog.drop_table(table)
                dropped.append(table)
            elif name.endswith(PREVIEW_SUFFIX) and (key := _preview_key(table, prefixes)) is not None:
                lease.check()
                state.snapshots.forget_snapshots([], [key])
                state.shapes.forget([table])
                engine.catalog.drop_table(table)
                dropped.append(table)
    return dropped


def _preview_key(table: str, prefixes: dict[str, str]) -> tuple[str, str] | None:
    """The interval key of a preview table, from the model whose physical name prefixes it."""
    matches = [p for p in prefixes if table.startswith(p)]
    if not matches:
        return None
    prefix = max(matches, key=len)
    return prefixes[prefix], table[len(prefix):]


def _delete_retired_generations(state: State, engine_factory: Callable[[], Engine], lease: Lease) -> None:
    """Delete the generations rewrites switched away from: no run reads them any more (the
    janitor's lock excludes them all). A pending write's generation stays; one a table points at
    again (recreated at its first location) is only forgotten: its next switch retires it anew."""
    retired = state.journal.retired_locations()
    if not retired:
        return
    engine = engine_factory()
    needed = {write.payload.get("location") for write in state.journal.pending_writes()}
    current = {table: engine.catalog.table_location(table) for table in {t for t, _ in retired}}
    doomed = [location for table, location in retired
              if location not in needed and not _same_location(current[table], location)]
    lease.check()
    engine.catalog.drop_locations(doomed)
    state.journal.forget_retired([(t, loc) for t, loc in retired if loc not in needed])


def _same_location(current: str | None, location: str) -> bool:
    return current is not None and current.rstrip("/") == location.rstrip("/")
