"""`StateStore`: snapshots, environments, intervals, plans and locks in one SQL database.

The store is its parts, one module per concern, all writing through one shared `Database`
(state/connection.py: the engine, the schema, one transaction per write, the Postgres advisory
locks that serialise decisions):

    store.snapshots      Snapshots      state/snapshots.py     immutable snapshots and captured content
    store.environments   Environments   state/environments.py  promote / finalize / revert, optimistic
    store.intervals      Intervals      state/intervals.py     the append-only interval log
    store.plans          PlanRecords    state/plans.py         plans recorded for review, their events
    store.locks          Locks          state/locks.py         named locks held as leases
    store.journal        Journal        state/journal.py       writes under way, retired generations
    store.statement_runs StatementRuns  state/statement_runs.py  before_all / after_all of each Dagster run

    store.verdicts       AuditVerdicts  state/verdicts.py      what each audit said about the data it judged
    store.shapes         TableShapes    state/shapes.py        tables' columns, their queries' last analyses
    store.timings        BatchTimings   state/timings.py       how long each batch written took

Callers reach each concern through its part (`store.environments.get_environment("dev")`), the one
way to reach it; `StateStore` itself only opens, migrates and closes the database the parts share.
`execution/` sees the store through the Protocols of its ports, which describe the same parts.
"""

from __future__ import annotations

from collections.abc import Mapping

from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database
from mesh_dagster.state.environments import Environments
from mesh_dagster.state.intervals import Intervals
from mesh_dagster.state.journal import Journal
from mesh_dagster.state.locks import EXCLUSIVE_LOCK, Lease, LockInfo, LockLostError, Locks
from mesh_dagster.state.migrations import MIGRATIONS, Migration
from mesh_dagster.state.plans import PlanRecords
from mesh_dagster.state.shapes import TableShapes
from mesh_dagster.state.snapshots import Snapshots
from mesh_dagster.state.statement_runs import StatementRuns
from mesh_dagster.state.timings import BatchTimings
from mesh_dagster.state.verdicts import AuditVerdicts

# Imported from here by the rest of the package (execution/, context.py) and by tests.
__all__ = ["EXCLUSIVE_LOCK", "Lease", "LockInfo", "LockLostError", "StateStore"]


class StateStore:
    """The only object that reads or writes persisted state. Safe to share between threads."""

    def __init__(self, url: str, *, check_version: bool = True):
        """Connect, create the tables of an empty database, and check the schema version.

        `check_version=False` is for `mesh migrate`, which must open an out-of-date store.
        """
        self.db = Database(url, check_version=check_version)
        self.url = self.db.url
        self.schema_version = self.db.schema_version
        self.snapshots = Snapshots(self.db)
        self.environments = Environments(self.db)
        self.intervals = Intervals(self.db)
        self.plans = PlanRecords(self.db)
        self.locks = Locks(self.db)
        self.journal = Journal(self.db)
        self.statement_runs = StatementRuns(self.db)
        self.verdicts = AuditVerdicts(self.db)
        self.shapes = TableShapes(self.db)
        self.timings = BatchTimings(self.db)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({self.url!r})"

    def migrate(
        self, target: int = schema.SCHEMA_VERSION, migrations: Mapping[int, Migration] = MIGRATIONS
    ) -> list[int]:
        """Upgrade the tables to `target` in one transaction; returns the versions applied."""
        applied = self.db.migrate(target, migrations)
        self.schema_version = self.db.schema_version
        return applied
