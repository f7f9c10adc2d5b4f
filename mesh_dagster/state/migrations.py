"""Schema versions and the steps between them.

A fresh store is created straight from `schema.py` and stamped with `SCHEMA_VERSION`; the
steps here only ever upgrade an *existing* store. Step `n` turns a v`n-1` store into a v`n`
one. All steps of one `mesh migrate` run in a single transaction (DDL is transactional on both
SQLite and Postgres), so a failing step leaves the store exactly as it was — no backup tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import Connection, delete, func, insert, inspect, select, text

from mesh_dagster import __version__
from mesh_dagster.core.errors import StateError
from mesh_dagster.state.schema import (
    SCHEMA_VERSION,
    audit_verdicts,
    batch_timings,
    blobs,
    environments,
    metadata,
    pending_writes,
    plan_events,
    plans,
    statement_runs,
    table_shapes,
    versions,
)

Migration = Callable[[Connection], None]


def _v1_baseline(conn: Connection) -> None:
    """The first schema: create whatever tables are missing."""
    metadata.create_all(conn, checkfirst=True)


def _v2_replaced_views(conn: Connection) -> None:
    """Environments remember the records they replaced until finalized (crash repair, janitor)."""
    columns = {c["name"] for c in inspect(conn).get_columns(environments.name)}
    if "replaced_payload" not in columns:  # a v1 baseline run just now already created it
        conn.execute(text(f"ALTER TABLE {environments.name} ADD COLUMN replaced_payload TEXT"))


def _v3_plan_records(conn: Connection) -> None:
    """Plan records say which commit they were made from, and keep their decisions."""
    columns = {c["name"] for c in inspect(conn).get_columns(plans.name)}
    for column, sql_type in (("git_commit", "VARCHAR(64)"), ("git_branch", "VARCHAR(255)")):
        if column not in columns:
            conn.execute(text(f"ALTER TABLE {plans.name} ADD COLUMN {column} {sql_type}"))
    metadata.create_all(conn, tables=[plan_events], checkfirst=True)


def _v4_captured_content(conn: Connection) -> None:
    """Snapshots keep what they captured (seed content) in the store; writes under way are journaled."""
    metadata.create_all(conn, tables=[blobs, pending_writes], checkfirst=True)


def _v5_audit_verdicts(conn: Connection) -> None:
    """Audit verdicts are kept with the data they judged (promotion and Dagster's checks read them)."""
    metadata.create_all(conn, tables=[audit_verdicts], checkfirst=True)


def _v6_statement_runs(conn: Connection) -> None:
    """A Dagster run runs its environment's before_all / after_all once, whichever step gets there first."""
    metadata.create_all(conn, tables=[statement_runs], checkfirst=True)


def _v7_table_shapes(conn: Connection) -> None:
    """What each table's columns are and its query's last analysis said: a run analyses a query only
    when something it reads changed (issue 36). An upgraded store starts empty: every query is
    analysed once more, as before."""
    metadata.create_all(conn, tables=[table_shapes], checkfirst=True)


def _v8_samples_and_timings(conn: Connection) -> None:
    """A failed audit's verdict keeps some of its failing rows (a Dagster check shows them; verdicts
    recorded earlier have none: their checks show the count only, until the audit runs again), and
    each batch written is timed (plans estimate their backfill from it)."""
    columns = {c["name"] for c in inspect(conn).get_columns(audit_verdicts.name)}
    if "sample" not in columns:  # a v5 step run just now already created it
        conn.execute(text(f"ALTER TABLE {audit_verdicts.name} ADD COLUMN sample TEXT"))
    metadata.create_all(conn, tables=[batch_timings], checkfirst=True)


MIGRATIONS: dict[int, Migration] = {1: _v1_baseline, 2: _v2_replaced_views, 3: _v3_plan_records,
                                    4: _v4_captured_content, 5: _v5_audit_verdicts, 6: _v6_statement_runs,
                                    7: _v7_table_shapes, 8: _v8_samples_and_timings}


def stored_schema_version(conn: Connection) -> int | None:
    """The version the store was written with; None for an empty (never initialised) database."""
    if not inspect(conn).has_table(versions.name):
        return None
    return conn.execute(select(func.max(versions.c.schema_version))).scalar()


def stamp(conn: Connection, version: int) -> None:
    conn.execute(delete(versions))
    conn.execute(insert(versions).values(schema_version=version, mesh_version=__version__))


def check_compatible(stored: int, current: int = SCHEMA_VERSION) -> None:
    """Refuse to touch a store whose tables do not match what this code expects."""
    if stored > current:
        raise StateError(
            f"The state store was written by a newer mesh_dagster (schema v{stored}, this is "
            f"v{current}). Upgrade mesh_dagster."
        )
    if stored < current:
        raise StateError(
            f"The state store uses schema v{stored} but this mesh_dagster needs v{current}; "
            "run `mesh migrate`."
        )


def pending_migrations(
    stored: int, target: int = SCHEMA_VERSION, migrations: Mapping[int, Migration] = MIGRATIONS
) -> list[int]:
    if stored > target:
        check_compatible(stored, target)
    steps = list(range(stored + 1, target + 1))
    missing = [v for v in steps if v not in migrations]
    if missing:
        raise StateError(f"No migration to state schema v{missing[0]}; this mesh_dagster build is broken.")
    return steps


def apply_migrations(
    conn: Connection,
    stored: int,
    target: int = SCHEMA_VERSION,
    migrations: Mapping[int, Migration] = MIGRATIONS,
) -> list[int]:
    """Run the steps from `stored` to `target` on `conn` (the caller owns the transaction)."""
    steps = pending_migrations(stored, target, migrations)
    for version in steps:
        migrations[version](conn)
    if steps:
        stamp(conn, target)
    return steps
