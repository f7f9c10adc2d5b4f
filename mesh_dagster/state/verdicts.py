"""Audit verdicts in the state store (`mesh_audit_verdicts`, schema v5): what each audit said about
the data it judged — a model version over an interval, by one definition of the audit.

The store's `verdicts` part, over its shared connection (`Database`: its read and write transactions);
every method is one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import and_, insert, or_, select

from mesh_dagster.core.models.audit_sample import AuditSample
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database


@dataclass(frozen=True)
class Verdict:
    """One audit's result over one interval of one version of a model."""

    name: str
    version: str
    identifier: str
    audit: str
    digest: str
    blocking: bool
    start: int
    end: int
    failing_rows: int
    source: str  # apply | run | materialize
    created_ts: int = 0
    sample: AuditSample | None = None  # some of the failing rows

    @property
    def passed(self) -> bool:
        return self.failing_rows == 0


class AuditVerdicts:
    """The verdicts table of one state store."""

    def __init__(self, db: Database):
        self._db = db

    def record(self, verdicts: Iterable[Verdict], now_ms: int) -> None:
        rows = [dict(name=v.name, version=v.version, identifier=v.identifier, audit=v.audit, digest=v.digest,
                     blocking=v.blocking, start_ts=v.start, end_ts=v.end, failing_rows=v.failing_rows,
                     source=v.source, created_ts=v.created_ts or now_ms,
                     sample=v.sample.to_json() if v.sample is not None else None) for v in verdicts]
        if not rows:
            return
        with self._db.write("record audit verdicts in") as conn:
            conn.execute(insert(schema.audit_verdicts), rows)

    def history(self, keys: Iterable[tuple[str, str]]) -> list[Verdict]:
        """Every verdict recorded for the `(name, version)` keys, oldest first."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        table = schema.audit_verdicts
        condition = or_(*(and_(table.c.name == n, table.c.version == v) for n, v in wanted))
        with self._db.read() as conn:
            rows = conn.execute(select(table).where(condition).order_by(table.c.id)).all()
        return [Verdict(r.name, r.version, r.identifier, r.audit, r.digest, bool(r.blocking), r.start_ts, r.end_ts,
                        r.failing_rows, r.source, r.created_ts, AuditSample.from_json(r.sample)) for r in rows]
