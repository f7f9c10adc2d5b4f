"""Plan records in the state store (`mesh_plans`, `mesh_plan_events`): plans recorded for review
in a protected environment, and every event of their life (approved, applied, cancelled, …).

A record's status changes only by `transition_plan`, which checks the status it expects in the same
transaction that records the event, so two people deciding at once cannot both win.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import Connection, insert, or_, select, update

from mesh_dagster.core.plan.data_diff import DataDiff
from mesh_dagster.core.plan.review import PlanEvent, PlanRecord, PlanSummary
from mesh_dagster.state import schema
from mesh_dagster.state.connection import Database
from mesh_dagster.state.locks import Lease, hold

# How many of the latest plan records a plan looks in for data diffs of its new tables
# (`records_mentioning`): a development plan's diff is reused by a prod plan made soon after it.
RECENT_PLANS = 500


class PlanRecords:
    """The plan records of one state store (`StateStore.plans`)."""

    def __init__(self, db: Database):
        self._db = db

    def save_plan_record(self, record: PlanRecord) -> None:
        """Store a new plan record with its events so far (a plan id is never reused)."""
        row = {"plan_id": record.plan_id, "environment": record.environment, "status": record.status.value,
               "payload": record.summary.model_dump_json(), "author": record.author, "git_commit": record.git_commit,
               "git_branch": record.git_branch, "created_ts": record.created_ts, "updated_ts": record.updated_ts}
        with self._db.write() as conn:
            conn.execute(insert(schema.plans).values(**row))
            if record.events:
                conn.execute(insert(schema.plan_events), [_event_row(record.plan_id, e) for e in record.events])

    def get_plan_record(self, plan_id: str) -> PlanRecord | None:
        with self._db.read() as conn:
            found = _plan_records(conn, schema.plans.c.plan_id == plan_id)
        return found[0] if found else None

    def plan_ids_starting(self, prefix: str, limit: int = 5) -> list[str]:
        """Ids of the plans starting with `prefix` (how people type a plan id)."""
        table = schema.plans
        with self._db.read() as conn:
            rows = conn.execute(select(table.c.plan_id).where(table.c.plan_id.startswith(prefix, autoescape=True))
                                .order_by(table.c.plan_id).limit(limit)).all()
        return [r.plan_id for r in rows]

    def list_plan_records(self, environment: str | None = None, statuses: Iterable[str] | None = None,
                          limit: int = 50) -> list[PlanRecord]:
        """The latest plans, newest first."""
        table = schema.plans
        where = [table.c.environment == environment] if environment else []
        if statuses is not None:
            where.append(table.c.status.in_(list(statuses)))
        with self._db.read() as conn:
            return _plan_records(conn, *where, limit=limit)

    def records_mentioning(self, texts: Collection[str], recent: int = RECENT_PLANS) -> list[PlanRecord]:
        """Among the `recent` latest plan records, those whose stored summary contains one of `texts`
        (newest first): how a plan finds the data diffs other plans computed of its new tables (a
        physical table's name holds its version: it names one table). Bounded and cheap: the
        database scans at most `recent` rows' payloads (a substring match, no index needed and no
        schema change), and only the records that match are loaded."""
        table = schema.plans
        if not texts:
            return []
        latest = select(table.c.plan_id).order_by(table.c.created_ts.desc(), table.c.plan_id).limit(recent)
        mentions = or_(*(table.c.payload.contains(t, autoescape=True) for t in texts))
        with self._db.read() as conn:
            return _plan_records(conn, table.c.plan_id.in_(latest), mentions)

    def attach_data_diffs(self, plan_id: str, diffs: dict[str, DataDiff]) -> PlanRecord | None:
        """Store the data diffs computed once the plan's apply built its tables into the record's
        summary (the `payload` JSON: no schema change), replacing earlier ones of the same models
        (a resumed apply computes them again). Its status and `updated_ts` are left alone: this is
        not a decision (plan_status sensors look for those). None when there is no such plan."""
        table = schema.plans
        with self._db.write() as conn:
            row = conn.execute(select(table.c.payload).where(table.c.plan_id == plan_id)).first()
            if row is None:
                return None
            summary = PlanSummary.model_validate_json(row.payload)
            summary.data_diffs = {**summary.data_diffs, **diffs}
            conn.execute(update(table).where(table.c.plan_id == plan_id).values(payload=summary.model_dump_json()))
            return _plan_records(conn, table.c.plan_id == plan_id)[0]

    def transition_plan(self, plan_id: str, allowed: Iterable[str], event: PlanEvent,
                        lease: Lease | None = None) -> PlanRecord | None:
        """Move a plan to `event.status` if it is in one of the `allowed` statuses, recording the
        event in the same transaction; the updated record, or None when its status was not allowed
        (someone else decided first: two approvers, an approval racing a cancel). With `lease`,
        only while that lock is held (an apply that lost its environment's lock to a resumed one
        does not decide the record's outcome any more)."""
        table = schema.plans
        with self._db.write() as conn:
            if lease is not None:
                hold(conn, lease)
            result = conn.execute(update(table).where(table.c.plan_id == plan_id, table.c.status.in_(list(allowed)))
                                  .values(status=event.status.value, updated_ts=event.ts))
            if result.rowcount != 1:
                return None
            conn.execute(insert(schema.plan_events).values(**_event_row(plan_id, event)))
            return _plan_records(conn, table.c.plan_id == plan_id)[0]


def _plan_records(conn: Connection, *where: Any, limit: int | None = None) -> list[PlanRecord]:
    table, events = schema.plans, schema.plan_events
    query = select(table).where(*where).order_by(table.c.created_ts.desc(), table.c.plan_id)
    rows = conn.execute(query.limit(limit) if limit else query).all()
    if not rows:
        return []
    by_plan: dict[str, list[PlanEvent]] = {r.plan_id: [] for r in rows}
    for e in conn.execute(select(events).where(events.c.plan_id.in_(list(by_plan))).order_by(events.c.id)):
        by_plan[e.plan_id].append(PlanEvent(action=e.action, actor=e.actor, ts=e.ts, status=e.status, note=e.note))
    return [PlanRecord(plan_id=r.plan_id, environment=r.environment, author=r.author or "unknown",
                       status=r.status, git_commit=r.git_commit, git_branch=r.git_branch,
                       created_ts=r.created_ts, updated_ts=r.updated_ts,
                       summary=PlanSummary.model_validate_json(r.payload), events=by_plan[r.plan_id])
            for r in rows]


def _event_row(plan_id: str, event: PlanEvent) -> dict[str, Any]:
    return {"plan_id": plan_id, "action": event.action, "actor": event.actor, "status": event.status.value,
            "note": event.note, "ts": event.ts}
