"""The physical layer checked before anything is written: interrupted swaps finished, missing tables found.

Two things leave a snapshot's table absent while the state store records intervals of it. A process
killed in the middle of a swap (engine/swaps.py: the table dropped, its rows staged under another
name and journaled) is finished from the journal (`finish_swaps`). A table dropped by hand (or by an
older mesh_dagster killed in its unjournaled copy) cannot be: creating it empty and writing the next
interval would record new data beside a history that is gone, while the state store goes on
claiming it. So every front door checks before it writes (`missing_tables`):

- an apply forgets the recorded intervals of a missing table and backfills them (`rebuild_missing`,
  execution/apply/apply.py), saying so: applying a plan rebuilds what its environment serves;
- `mesh run` and Dagster materializations refuse (`MissingTableError`), naming the model, the table
  and the command that rebuilds it (a restatement: a plan, which any environment, protected or not,
  applies). Rebuilding a history is a decision for a person, in a plan they read: it may be years
  of batches, and a history some kinds keep (an SCD type 2 table's versions of a source, appended
  rows) may not come back as it was;
- `mesh plan` lists them before its prompt (Context.missing_tables) when Spark is at hand.

Why not in plan computation: a plan is built from the project and the state store alone, never
Spark (Dagster's code server, sensors, the `plan_<env>` job and `mesh plan` on a protected
environment record plans without it), and whether a table exists is the catalog's answer. Applies
and runs have Spark anyway. `mesh plan` asks the catalog, in a step of its own once the plan is
built, only where that starts no JVM (its unit tests ran on Spark, the project's shared server
runs, or a remote Spark Connect server); otherwise the apply after the prompt says what it rebuilds.
The answer costs one listing per physical schema, and none when no snapshot has recorded intervals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.backfills import ALL_TIME, Backfill
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.intervals import Interval, expand_range, format_interval_range, merge_intervals
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.locking import table_lock
from mesh_dagster.execution.ports import Engine, State

SWAP = "swap"  # the journal's operation for a table swapped for a new one (engine/swaps.py)


class MissingTableError(PlanError):
    """A write refused: the table it would write is gone, while the state store records its history."""


@dataclass(frozen=True)
class MissingTable:
    """A snapshot's physical table that does not exist although intervals of it are recorded."""

    snapshot: Snapshot
    intervals: list[Interval]

    @property
    def recorded(self) -> str:
        """What the state store records of it: `3 intervals (2020-01-01 - 2020-01-03)`, or `a build`."""
        if self.intervals == [ALL_TIME]:
            return "a build"
        unit = self.snapshot.model.interval_unit
        count = sum(len(expand_range(unit, start, end)) for start, end in self.intervals)
        return f"{count} interval{'s' if count != 1 else ''} ({format_interval_range(self.intervals, unit)})"

    def rebuilt(self, view: str) -> str:
        """What `mesh plan` and an apply say of it."""
        what = "it" if self.intervals == [ALL_TIME] else self.recorded
        return f"The physical table {self.snapshot.table_name} of {view} is missing: {what} will be rebuilt"

    def refusal(self, view: str, environment: str) -> MissingTableError:
        return MissingTableError(
            f"Cannot write {view}: its physical table {self.snapshot.table_name} is missing (dropped outside mesh?) "
            f"while the state store records {self.recorded} of it. Nothing was written: rebuild it with "
            f"`mesh plan {environment} --restate-model {self.snapshot.name}` (or restore the table)")


def with_tables(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    """The snapshots that own a physical object (EMBEDDED, EXTERNAL and standalone audits do not)."""
    return [s for s in snapshots if s.version and not s.model.kind.is_symbolic]


def finish_swaps(state: State, engine: Engine, snapshots: Iterable[Snapshot], listener: ApplyListener) -> None:
    """Finish the swaps a killed process left journaled for these snapshots' tables, each under its
    table's lock: the table gets its staged rows, whatever step the kill hit. What the swap was
    part of (a full rewrite's interval, the write after a migration) is computed again when its
    interval comes: that is exact."""
    tables = {s.table_name for s in with_tables(snapshots)}
    for write in state.journal.pending_writes():
        if write.operation != SWAP or write.table not in tables:
            continue
        with table_lock(state, write.table) as lease:
            pending = state.journal.pending_write(write.table)  # as it is now that nobody else writes it
            if pending is None or pending.operation != SWAP:
                continue
            state.shapes.forget([write.table])  # a swap lays the table out anew: its columns, once known, may not be
            engine.writes.finish(pending.payload)
            state.journal.finish_write(write.table, None, lease=lease)
            engine.writes.discard(pending.payload)
        listener.log(f"Finished the rewrite of {write.table} that an interrupted run left")


def missing_tables(state: State, catalog: Callable[[], Engine], snapshots: Iterable[Snapshot]) -> list[MissingTable]:
    """The snapshots' tables that do not exist although intervals of them are recorded; a table a
    journaled swap will bring back (`finish_swaps`) is not missing. Read only; `catalog` (Spark)
    is asked only when some snapshot has recorded intervals."""
    owning = {s.table_name: s for s in with_tables(snapshots)}
    recorded = state.intervals.get_intervals({s.interval_key for s in owning.values()})
    held = {table: recorded[s.interval_key] for table, s in owning.items() if recorded.get(s.interval_key)}
    if not held:
        return []
    existing = {f"{schema}.{name}".lower()
                for schema in sorted({owning[t].physical_schema for t in held})
                for name in catalog().catalog.table_names(schema)}
    # Read after the catalog: a swap under way journals itself before it drops the table.
    swapping = {w.table for w in state.journal.pending_writes() if w.operation == SWAP}
    return [MissingTable(owning[table], merge_intervals(intervals)) for table, intervals in held.items()
            if table.lower() not in existing and table not in swapping]


def check_tables(state: State, engine: Engine, snapshots: Iterable[Snapshot],
                 listener: ApplyListener) -> list[MissingTable]:
    """Before writing: finish the swaps a killed process left for these snapshots' tables, then the
    tables still missing."""
    snapshots = list(snapshots)
    finish_swaps(state, engine, snapshots, listener)
    return missing_tables(state, lambda: engine, snapshots)


def refuse_missing(state: State, engine: Engine, snapshots: Iterable[Snapshot], environment: str,
                   listener: ApplyListener, view: Callable[[str], str]) -> None:
    """`check_tables`, refusing (naming the first) a missing table: what `mesh run` does."""
    missing = check_tables(state, engine, snapshots, listener)
    if missing:
        raise missing[0].refusal(view(missing[0].snapshot.name), environment)


def rebuild_missing(plan: Plan, state: State, engine: Engine, listener: ApplyListener) -> Plan:
    """The plan, its backfill extended by the recorded history of every table it serves that is
    missing, whose intervals are forgotten first (each under its table's lock): a kill after that
    leaves them missing, for the next plan or run to compute, never recorded over an empty table.
    With --skip-backfill they are forgotten and nothing is computed."""
    missing = check_tables(state, engine, plan.snapshots.values(), listener)
    if not missing:
        return plan
    backfills = dict(plan.backfills)
    for table in missing:
        snap = table.snapshot
        listener.log(table.rebuilt(plan.view(snap.name)))
        with table_lock(state, snap.table_name):
            state.intervals.remove_intervals([(*snap.interval_key, start, end) for start, end in table.intervals])
        backfills[snap.name] = _rebuilding(snap, table.intervals, backfills.get(snap.name))
    return plan if plan.skip_backfill else dataclasses.replace(plan, backfills=backfills)


def _rebuilding(snapshot: Snapshot, history: list[Interval], planned: Backfill | None) -> Backfill:
    """A backfill of `history` besides what the plan already computes of the model."""
    intervals = merge_intervals([*history, *(planned.intervals if planned else [])])
    kind = snapshot.model.kind
    return Backfill(snapshot.name, intervals, not kind.is_incremental, planned.clear if planned else False)
