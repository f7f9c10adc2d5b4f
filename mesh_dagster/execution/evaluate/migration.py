"""Migrating the schema of a kept table to what its query now outputs.

A forward-only change keeps its model's table; so does any history-keeping model written after
someone changed its table by hand. Before the first write of an apply or run into such a table,
its real columns (exact types) are compared with the query's, and the model's policies decide:
additive changes become `ALTER TABLE ADD COLUMNS` (widened types a copy with casts, which Parquet
tables need), destructive ones a copy without the dropped columns, each only where the policy
allows it; `ignore` leaves the table as it is and the writes fit the query to it. The copy is a
kill-safe swap (engine/swaps.py): the table keeps its rows until the copy is complete.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.schema_evolution import SchemaDiff, diff_schemas, judge
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.execution.ports import Engine, Journal, State
from mesh_dagster.state.journal import PendingWrite
from mesh_dagster.state.store import Lease

logger = logging.getLogger(__name__)


class SchemaChangeError(PlanError):
    """A write refused because it would change a kept table in a way its model's policy refuses."""


@dataclass(frozen=True)
class Migration:
    """What was done to one table, and what the writes must fill in (`padding`: columns the table
    keeps but the query no longer outputs, under `on_destructive_change ignore`)."""

    diff: SchemaDiff
    warnings: list[str]
    padding: dict[str, str]
    columns: dict[str, str]  # the table's, now


def wanted_columns(engine: Engine, snapshot: Snapshot, query_sql: str,
                   output: Mapping[str, str] | None = None) -> dict[str, str]:
    """The columns the snapshot's table should have: declared, or `query_sql`'s (`output`, when the
    caller knows them, else analysed), and those its kind adds (SCD type 2's validity columns), in
    Spark's spelling."""
    model = snapshot.model
    if model.columns:
        wanted = engine.catalog.canonical_types(model.columns)
    else:
        wanted = dict(output) if output is not None else engine.catalog.query_columns(query_sql)
    wanted.update(engine.catalog.canonical_types(model.kind.added_columns()))
    return wanted


def migrate_table(engine: Engine, snapshot: Snapshot, query_sql: str, *, allow_destructive: bool = False,
                  allow_additive: bool = False, current: dict[str, str] | None = None,
                  journal: Journal | None = None, wanted: dict[str, str] | None = None,
                  changing: Callable[[], None] | None = None) -> Migration | None:
    """Fit the snapshot's existing table (whose columns are `current`, when the caller has just
    read them) to `query_sql`'s output (`wanted`, when the caller knows it: `wanted_columns`), as its
    policies allow; None when they already match. Raises SchemaChangeError (naming the model and
    columns) when refused. `changing` is called right before the table changes. A copy with casts is
    journaled (`journal`) before the table is replaced: a killed process leaves it to be finished."""
    table, model = snapshot.table_name, snapshot.model
    current = engine.catalog.columns(table) if current is None else current
    wanted = dict(wanted) if wanted is not None else wanted_columns(engine, snapshot, query_sql)
    diff = diff_schemas(current, wanted)
    if diff.is_empty:
        return None
    destructive, additive = model.schema_change_policies
    verdict = judge(model.name, diff, destructive, additive, allow_destructive=allow_destructive,
                    allow_additive=allow_additive)
    if verdict.errors:
        raise SchemaChangeError(f"Cannot write {table}: " + "; ".join(verdict.errors))
    for warning in verdict.warnings:
        logger.warning(warning)
    target = _target_columns(current, wanted, diff, verdict.apply_additive, verdict.apply_destructive)
    if target != current:
        if changing is not None:
            changing()
        if _only_additions(current, target):
            engine.catalog.add_columns(table, {c: t for c, t in target.items() if c not in current})
        else:
            engine.writes.retype_table(table, target, journal=journal)
    padding = {c: t for c, t in target.items() if c.lower() not in {w.lower() for w in wanted}}
    return Migration(diff, verdict.warnings, padding, target)


class MigrationJournal:
    """The journal of a schema migration made outside a batch (an apply migrates the tables that
    forward-only changes keep before any batch runs), while the table's lock is held (`lease`).
    Its entry is for the whole table, no interval: finishing it (engine/swaps.py) completes the
    migration and records nothing. `close` ends the entry once the migration is done."""

    def __init__(self, state: State, snapshot: Snapshot, lease: Lease) -> None:
        self.state, self.snapshot, self.lease = state, snapshot, lease
        self.journaled = False

    def __call__(self, payload: dict[str, Any]) -> None:
        snap = self.snapshot
        self.state.journal.journal_write(PendingWrite(
            table=snap.table_name, operation=payload["operation"], name=snap.name, version=snap.version or "",
            start=ALL_TIME[0], end=ALL_TIME[1], payload=payload, owner=self.lease.owner), lease=self.lease)
        self.journaled = True

    def close(self) -> None:
        if self.journaled:
            self.state.journal.finish_write(self.snapshot.table_name, None, lease=self.lease)


def _target_columns(current: Mapping[str, str], wanted: Mapping[str, str], diff: SchemaDiff, additive: bool,
                    destructive: bool) -> dict[str, str]:
    """The table's columns once the allowed parts of `diff` are applied (current order first)."""
    dropped = {c.lower() for c in diff.dropped} if destructive else set()
    retyped = {**(diff.widened if additive else {}), **(diff.narrowed if destructive else {})}
    target = {c: (retyped[c][1] if c in retyped else t) for c, t in current.items() if c.lower() not in dropped}
    if additive:
        target.update({c: wanted[c] for c in diff.added})
    return target


def _only_additions(current: Mapping[str, str], target: Mapping[str, str]) -> bool:
    return all(target.get(c) == t for c, t in current.items()) and list(target)[: len(current)] == list(current)
