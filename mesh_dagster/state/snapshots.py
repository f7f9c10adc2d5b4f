"""Snapshots in the state store (`mesh_snapshots`), and the content they captured (state/blobs.py).

Snapshots are immutable by identity: pushing one that is stored leaves it untouched; only the few
fields categorisation decides are rewritten (`update_snapshots`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, tuple_, update

from mesh_dagster.core.errors import StateError
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId
from mesh_dagster.state import schema
from mesh_dagster.state.blobs import blob_rows, read_blob
from mesh_dagster.state.connection import BATCH_SIZE, Database, chunks, now_ms

IntervalKey = tuple[str, str]


class Snapshots:
    """The snapshots of one state store (`StateStore.snapshots`)."""

    def __init__(self, db: Database):
        self._db = db

    def push_snapshots(self, snapshots: Iterable[Snapshot], recaptured: Iterable[Snapshot] = (),
                       content: Mapping[str, bytes] | None = None) -> None:
        """Record new snapshots; ones already stored are left untouched (they are immutable
        by identity — use `update_snapshots` for the few fields that may change). `recaptured`
        are stored snapshots made before captures existed, given the capture a plan just made
        for the same fingerprint (core/snapshots/capture.py): only that is added to them.
        `content`: digest -> the bytes they captured (`captured_content`), stored beside them."""
        ts = now_ms()
        snapshots, recaptured = list(snapshots), list(recaptured)
        rows = {s.snapshot_id: _snapshot_row(s, ts) for s in snapshots}
        if not rows and not recaptured:
            return
        table = schema.snapshots
        blobs = blob_rows(dict(content or {}), ts)  # in the same transaction
        with self._db.write() as conn:
            if blobs:
                conn.execute(self._db.insert(schema.blobs).on_conflict_do_nothing(), blobs)
            for chunk in chunks(list(rows.values()), BATCH_SIZE):
                conn.execute(self._db.insert(table).on_conflict_do_nothing(), chunk)
            for snap in recaptured:
                conn.execute(update(table).where(table.c.name == snap.name, table.c.identifier == snap.identifier)
                             .values(payload=snap.model_dump_json(), updated_ts=ts))

    def update_snapshots(self, snapshots: Iterable[Snapshot]) -> None:
        """Rewrite stored snapshots (e.g. after categorisation). All must exist already."""
        ts = now_ms()
        by_id = {s.snapshot_id: s for s in snapshots}
        if not by_id:
            return
        table = schema.snapshots
        stmt = (
            update(table)
            .where(table.c.name == bindparam("b_name"), table.c.identifier == bindparam("b_identifier"))
            .values(version=bindparam("b_version"), payload=bindparam("b_payload"), updated_ts=ts)
        )
        with self._db.write() as conn:
            missing = set(by_id) - _existing_snapshot_ids(conn, list(by_id))
            if missing:
                listed = ", ".join(f"{i.name}@{i.identifier}" for i in sorted(missing))
                raise StateError(f"Cannot update snapshots that are not in the state store: {listed}")
            params = [
                {
                    "b_name": i.name,
                    "b_identifier": i.identifier,
                    "b_version": s.version,
                    "b_payload": s.model_dump_json(),
                }
                for i, s in by_id.items()
            ]
            conn.execute(stmt, params)

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        """Snapshots by id; ids that are not stored are simply absent from the result."""
        wanted = _unique_ids(ids)
        table = schema.snapshots
        key = tuple_(table.c.name, table.c.identifier)
        found: dict[SnapshotId, Snapshot] = {}
        with self._db.read() as conn:
            for chunk in chunks(wanted, BATCH_SIZE):
                query = select(table.c.name, table.c.identifier, table.c.payload).where(key.in_(chunk))
                for name, identifier, payload in conn.execute(query):
                    found[SnapshotId(name, identifier)] = Snapshot.model_validate_json(payload)
        return found

    def get_blob(self, digest: str) -> bytes | None:
        """Content a snapshot captured (state/blobs.py), by digest; None when none is stored."""
        with self._db.read() as conn:
            return read_blob(conn, digest)

    def snapshots_exist(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        with self._db.read() as conn:
            return _existing_snapshot_ids(conn, _unique_ids(ids))

    def all_snapshot_ids(self) -> set[SnapshotId]:
        table = schema.snapshots
        with self._db.read() as conn:
            return {SnapshotId(n, i) for n, i in conn.execute(select(table.c.name, table.c.identifier))}

    def forget_snapshots(self, ids: Iterable[SnapshotId], interval_keys: Iterable[IntervalKey]) -> None:
        """Delete snapshots and the interval history of versions whose tables are about to be
        dropped, in one transaction: state never names a table that is gone, nor keeps half of a
        deletion (a crash afterwards leaves an unreferenced table behind, never a dangling record)."""
        snapshots, intervals = schema.snapshots, schema.intervals
        snapshot_key = tuple_(snapshots.c.name, snapshots.c.identifier)
        interval_key = tuple_(intervals.c.name, intervals.c.version)
        with self._db.write() as conn:
            for chunk in chunks(list(dict.fromkeys((n, v) for n, v in interval_keys)), BATCH_SIZE):
                conn.execute(delete(intervals).where(interval_key.in_(chunk)))
            for chunk in chunks(_unique_ids(ids), BATCH_SIZE):
                conn.execute(delete(snapshots).where(snapshot_key.in_(chunk)))


def _existing_snapshot_ids(conn: Connection, ids: Sequence[SnapshotId]) -> set[SnapshotId]:
    table = schema.snapshots
    key = tuple_(table.c.name, table.c.identifier)
    found: set[SnapshotId] = set()
    for chunk in chunks(ids, BATCH_SIZE):
        query = select(table.c.name, table.c.identifier).where(key.in_(chunk))
        found.update(SnapshotId(n, i) for n, i in conn.execute(query))
    return found


def _snapshot_row(snapshot: Snapshot, ts: int) -> dict[str, Any]:
    return {
        "name": snapshot.name,
        "identifier": snapshot.identifier,
        "version": snapshot.version,
        "payload": snapshot.model_dump_json(),
        "created_ts": ts,
        "updated_ts": ts,
    }


def _unique_ids(ids: Iterable[SnapshotId]) -> list[SnapshotId]:
    return list(dict.fromkeys(SnapshotId(*i) for i in ids))
