"""Environments in the state store (`mesh_environments`): which snapshots each one serves.

Environments use optimistic concurrency: a plan remembers the `plan_id` it was computed against
(`previous_plan_id`) and may only replace an environment still at that plan. Until an apply is
finalized (its views swapped), the record remembers what the views may still show
(`replaced_payload`), so a crash is repaired from it and the janitor keeps those tables.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from mesh_dagster.core.errors import ConflictingPlanError, StateError
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database, or_now
from mesh_dagster.state.connection import now_ms as clock_ms
from mesh_dagster.state.locks import Lease, hold


class Environments:
    """The environments of one state store (`StateStore.environments`)."""

    def __init__(self, db: Database):
        self._db = db

    def get_environment(self, name: str) -> Environment | None:
        table = schema.environments
        with self._db.read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        return _to_environment(row) if row else None

    def get_environments(self) -> list[Environment]:
        table = schema.environments
        with self._db.read() as conn:
            return [_to_environment(r) for r in conn.execute(select(table).order_by(table.c.name))]

    def promote_environment(self, env: Environment, lease: Lease | None = None) -> None:
        """Record `env` (unfinalized) as the environment, unless another plan got there first.

        Re-promoting the plan that is already current is allowed, so a retried apply is a no-op.
        With `lease`, the record is only written if that lock is still held, in the same
        transaction. The records whose views may still be live until `env` is finalized are kept
        (`replaced_environment`): a crash before the views moved is repaired from them, and the
        janitor keeps their tables.
        """
        table = schema.environments
        with self._db.write() as conn:
            self._db.serialize(conn, f"environment:{env.name}")
            if lease is not None:
                hold(conn, lease)
            current = conn.execute(select(table).where(table.c.name == env.name).with_for_update()).first()
            if current is None and env.previous_plan_id is not None:
                raise ConflictingPlanError(
                    f"Environment '{env.name}' was removed while this plan ({env.plan_id}) was in "
                    f"progress. Re-run `mesh plan {env.name}`."
                )
            if current is not None and current.plan_id not in (env.previous_plan_id, env.plan_id):
                raise _conflict(env.name, current.plan_id, env.plan_id)
            row = {**_environment_row(env), "replaced_payload": _replaced_payload(current, env.plan_id)}
            self._db.upsert(conn, table, row, ["name"])

    def finalize_environment(self, name: str, plan_id: str, now_ms: int | None = None,
                             lease: Lease | None = None) -> None:
        """Mark the environment complete (views swapped) — only if `plan_id` is still current
        (and, with `lease`, the lock still held)."""
        table = schema.environments
        with self._db.write() as conn:
            self._db.serialize(conn, f"environment:{name}")
            if lease is not None:
                hold(conn, lease)
            current = conn.execute(select(table.c.plan_id).where(table.c.name == name).with_for_update()).scalar()
            if current is None:
                raise ConflictingPlanError(
                    f"Environment '{name}' was removed while this plan ({plan_id}) was in progress. "
                    f"Re-run `mesh plan {name}`."
                )
            if current != plan_id:
                raise _conflict(name, current, plan_id)
            conn.execute(
                update(table).where(table.c.name == name).values(finalized_ts=or_now(now_ms), replaced_payload=None)
            )

    def replaced_environment(self, name: str) -> Environment | None:
        """While `name` is unfinalized: what its views may still show besides its record (the
        records it replaced since it was last finalized, merged). None once finalized."""
        table = schema.environments
        with self._db.read() as conn:
            row = conn.execute(
                select(table.c.replaced_payload, table.c.finalized_ts).where(table.c.name == name)
            ).first()
        if row is None or row.finalized_ts is not None:
            return None
        return _replaced(row)

    def served_environment(self, name: str) -> Environment | None:
        """What the environment serves: its record once finalized; while an apply is unfinished,
        the last finalized record (None when it never had one). `mesh run` evaluates these
        snapshots, never those of a plan whose apply did not finish."""
        table = schema.environments
        with self._db.read() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).first()
        if row is None:
            return None
        return _to_environment(row) if row.finalized_ts is not None else _last_finalized(_replaced(row))

    def revert_environment(self, name: str, plan_id: str, *, views_restored: bool = False,
                           lease: Lease | None = None) -> bool:
        """Take back the unfinished apply of `plan_id`: the record becomes the last finalized one
        again. With `views_restored` (the caller put every view back) it is finalized, and a new
        environment's record goes away; otherwise it stays unfinalized, keeping what the views may
        still show, so the next apply re-creates them (a new environment keeps an empty record).
        False, changing nothing, unless `plan_id` is the current unfinalized record."""
        table = schema.environments
        with self._db.write() as conn:
            self._db.serialize(conn, f"environment:{name}")
            if lease is not None:
                hold(conn, lease)
            current = conn.execute(select(table).where(table.c.name == name).with_for_update()).first()
            if current is None or current.plan_id != plan_id or current.finalized_ts is not None:
                return False
            replaced = _replaced(current)
            served = _last_finalized(replaced)
            if views_restored and served is None:
                conn.execute(delete(table).where(table.c.name == name))
                return True
            if views_restored and served is not None:
                record = served.model_copy(update={"finalized_ts": served.finalized_ts or clock_ms()})
                self._db.upsert(conn, table, {**_environment_row(record), "replaced_payload": None}, ["name"])
                return True
            undone = _to_environment(current)
            shown = _merge_environments(replaced, undone) if replaced is not None else undone
            shown = shown.model_copy(update={"last_finalized": served})
            record = (served or Environment(name=name, plan_id=plan_id)).model_copy(update={"finalized_ts": None})
            self._db.upsert(conn, table, {**_environment_row(record), "replaced_payload": shown.model_dump_json()},
                         ["name"])
            return True

    def invalidate_environment(self, name: str, now_ms: int | None = None) -> None:
        """Let the janitor remove the environment from `now_ms` on."""
        table = schema.environments
        with self._db.write() as conn:
            result = conn.execute(update(table).where(table.c.name == name).values(expiration_ts=or_now(now_ms)))
            if result.rowcount == 0:
                raise StateError(f"Environment '{name}' does not exist.")

    def delete_environment(self, name: str) -> None:
        table = schema.environments
        with self._db.write() as conn:
            conn.execute(delete(table).where(table.c.name == name))

    def expired_environments(self, now_ms: int | None = None) -> list[Environment]:
        table = schema.environments
        query = (
            select(table)
            .where(table.c.expiration_ts.is_not(None), table.c.expiration_ts <= or_now(now_ms))
            .order_by(table.c.name)
        )
        with self._db.read() as conn:
            return [_to_environment(r) for r in conn.execute(query)]


def _environment_row(env: Environment) -> dict[str, Any]:
    return {
        "name": env.name,
        "payload": env.model_dump_json(),
        "plan_id": env.plan_id,
        "previous_plan_id": env.previous_plan_id,
        "expiration_ts": env.expiration_ts,
        "finalized_ts": env.finalized_ts,
    }


def _to_environment(row: Any) -> Environment:
    """The columns are authoritative: finalize/invalidate update them, not the payload."""
    env = Environment.model_validate_json(row.payload)
    return env.model_copy(
        update={
            "plan_id": row.plan_id,
            "previous_plan_id": row.previous_plan_id,
            "expiration_ts": row.expiration_ts,
            "finalized_ts": row.finalized_ts,
        }
    )


def _replaced_payload(current: Any, plan_id: str) -> str | None:
    """What the views may still show once `plan_id` replaces the `current` row: the current
    record if it was finalized, else everything an unfinished apply may have left live."""
    if current is None:
        return None
    if current.plan_id == plan_id:  # a retry of the same plan replaces nothing new
        return current.replaced_payload
    record = _to_environment(current)
    if current.finalized_ts is not None or current.replaced_payload is None:
        return record.model_dump_json()
    return _merge_environments(Environment.model_validate_json(current.replaced_payload), record).model_dump_json()


def _merge_environments(older: Environment, newer: Environment) -> Environment:
    """Everything either record's views may show; it remembers the last finalized record."""
    snapshots = {s.snapshot_id: s for s in [*older.snapshots, *newer.snapshots]}
    return newer.model_copy(update={"snapshots": list(snapshots.values()),
                                    "promoted": sorted({*older.promoted, *newer.promoted}),
                                    "last_finalized": _last_finalized(older)})


def _replaced(row: Any) -> Environment | None:
    return Environment.model_validate_json(row.replaced_payload) if row.replaced_payload is not None else None


def _last_finalized(replaced: Environment | None) -> Environment | None:
    """The last finalized record among what an unfinished apply replaced: the replaced record
    itself if it was finalized, else the one a merge of several remembers (None: a new
    environment, or a merge stored before merges remembered it)."""
    if replaced is None:
        return None
    if replaced.finalized_ts is not None:
        return replaced.model_copy(update={"last_finalized": None})
    return replaced.last_finalized



def _conflict(environment: str, current: str, plan_id: str) -> ConflictingPlanError:
    return ConflictingPlanError(
        f"Another plan ({current}) was applied to environment '{environment}' while this plan "
        f"({plan_id}) was in progress. Re-run `mesh plan {environment}`."
    )

