"""The life of a recorded plan: record → (approve | reject | cancel) → apply → completed | failed.

Every plan a front door makes is recorded (core/plan/review.py holds what a record is). On a protected
environment only an approved record may be applied; elsewhere a pending one may. Applying a
record rebuilds the plan from the project and the state as they are now, with the options and the
execution time it was reviewed with, and refuses — marking the record superseded, running
nothing — unless it is the plan that was reviewed, and its approvals still count under the
environment's approvers as config.yaml lists them now. Each step is a compare-and-set on the
record's status with its event in the same transaction, so two approvers, or an approval racing a
cancel, cannot both win.

A record's run (start, apply, complete or fail) happens under its environment's lock, so a
`running` record whose environment no live process holds (execution/locking.py: the holder's pid
is gone, or its lease ran out) is one whose apply was killed: it may be resumed (`apply`: the
apply picks up from the missing intervals, like a retry of a failed plan) or cancelled. One whose
apply is really running is refused, naming the process that runs it. The next run of another plan
of the environment settles such records as failed, with a note, so none stays running forever.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.errors import MeshError, PlanError
from mesh_dagster.core.plan.data_diff import diff_candidates
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.plan.review import (
    TRANSITIONS,
    PlanEvent,
    PlanRecord,
    PlanStatus,
    PlanSummary,
    ProtectionError,
    check_approvals,
    check_approver,
    check_transition,
    differences,
    reviewed_statements,
    summarize,
)
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.execution.apply.apply import environment_held
from mesh_dagster.execution.locking import environment_lock_name, holder_is_dead
from mesh_dagster.execution.notify import Notifier
from mesh_dagster.execution.plans.data_diffs import reused_data_diffs
from mesh_dagster.execution.ports import State
from mesh_dagster.state.store import Lease

logger = logging.getLogger(__name__)

# Plan ids are long; people type a prefix of at least this many characters.
MIN_ID_PREFIX = 6
# How many interrupted runs of an environment one run settles (a few at most exist: each is a kill).
INTERRUPTED_SETTLED = 50


SUPERSEDED_AT_ONCE = 200  # waiting plans of one environment looked at when another is applied


class PlanSupersededError(PlanError):
    """The project or the environment moved on since the plan was reviewed: nothing ran."""


class PlanReviews:
    """The recorded plans of one state store under one project's rules (protection, notifications)."""

    def __init__(self, state: State, config: ProjectConfig, notifier: Notifier | None = None):
        self.state = state
        self.config = config
        self.notifier = notifier

    def record(self, plan: Plan, *, author: str, git_commit: str | None = None,
               git_branch: str | None = None, data_diffs: bool = False) -> PlanRecord:
        """Store `plan` (pending) with the options it was built with (`plan.options`): applying the
        record rebuilds it from them. `data_diffs`: its data diffs will be attached once applied, and
        those its apply will not compute (a prod plan's) are taken from the development plans that
        computed them, if any (execution/plans/data_diffs.py `reused_data_diffs`: state only)."""
        ts = now_ms()
        summary = summarize(plan)
        if data_diffs:
            summary.data_diff_pending = diff_candidates(plan)
            summary.data_diffs, summary.data_diff_missing = reused_data_diffs(plan, self.state.plans,
                                                                              self.config.plan.data_diff)
        record = PlanRecord(plan_id=plan.plan_id, environment=plan.environment, author=author, git_commit=git_commit,
                            git_branch=git_branch, created_ts=ts, updated_ts=ts,
                            summary=summary,
                            events=[PlanEvent(action="create", actor=author, ts=ts, status=PlanStatus.PENDING)])
        self.state.plans.save_plan_record(record)
        if self.config.protection(plan.environment) is not None:  # someone has to act on it
            self.notify("plan_pending", record)
        return record

    def record_failure(self, environment: str, error: str, *, author: str, git_commit: str | None = None,
                       git_branch: str | None = None) -> PlanRecord:
        """A plan that could not even be made (the commit's project does not load): recorded as
        failed with the error, so the push has a visible outcome; nothing is applied."""
        ts = now_ms()
        record = PlanRecord(plan_id=uuid.uuid4().hex, environment=environment, author=author, git_commit=git_commit,
                            git_branch=git_branch, created_ts=ts, updated_ts=ts, status=PlanStatus.FAILED,
                            summary=PlanSummary(base_environment=None, base_plan_id=None, execution_time=ts, start=ts,
                                                end=ts),
                            events=[PlanEvent(action="create", actor=author, ts=ts, status=PlanStatus.PENDING),
                                    PlanEvent(action="fail", actor=author, ts=ts, status=PlanStatus.FAILED,
                                              note=error)])
        self.state.plans.save_plan_record(record)
        self.notify("plan_failed", record)
        return record

    def find(self, plan_id: str) -> PlanRecord:
        """The record `plan_id` (or a unique prefix of it) names, or an error saying what exists."""
        record = self.state.plans.get_plan_record(plan_id)
        if record is not None:
            return record
        if len(plan_id) >= MIN_ID_PREFIX:
            ids = self.state.plans.plan_ids_starting(plan_id)
            if len(ids) == 1:
                found = self.state.plans.get_plan_record(ids[0])
                assert found is not None
                return found
            if ids:
                raise MeshError(f"Plan id '{plan_id}' is ambiguous: {', '.join(ids)}")
        raise MeshError(f"No plan '{plan_id}' (see `mesh plans list`)")

    def decide(self, plan_id: str, action: str, actor: str, note: str | None = None) -> PlanRecord:
        """approve, reject or cancel a recorded plan, as `actor`."""
        record = self.find(plan_id)
        if action == "cancel" and record.status == PlanStatus.RUNNING:
            return self._cancel_running(record, actor, note)
        check_transition(record, action)
        protection = self.config.protection(record.environment)
        if action in ("approve", "reject"):
            if protection is None:
                raise ProtectionError(f"'{record.environment}' is not a protected environment: its plans need no "
                                      f"{'approval' if action == 'approve' else 'review'} (apply it with "
                                      f"`mesh plans apply {record.plan_id[:8]}`, or cancel it)")
            check_approver(record, actor, protection.approvers,
                           protection.allow_self_approval or action == "reject")
        return self._move(record, action, actor, note)

    def apply(self, plan_id: str, actor: str, rebuild: Callable[[PlanRecord], Plan],
              apply: Callable[[Plan], None], outdated: str | None = None) -> PlanRecord:
        """Apply a recorded plan if it may be applied and is still the plan that was reviewed
        (`outdated`: a reason the caller knows it is not, e.g. its branch moved on)."""
        record = self.find(plan_id)
        self._check_runnable(record, locked=False)  # before waiting for the lock: a live apply is refused at once
        with environment_held(self.state, record.environment) as lease:
            record = self.find(record.plan_id)  # as it is now that no other apply of it runs
            self._check_runnable(record, locked=True)
            plan = rebuild(record)
            reasons = ([outdated] if outdated else []) + differences(record.summary, plan, record.plan_id)
            if reasons:
                self._move(record, "supersede", actor, "; ".join(reasons), lease=lease)
                raise PlanSupersededError(f"Plan {record.plan_id} was not applied and is now superseded: "
                                          f"{'; '.join(reasons)}. Make a new plan.")
            plan.plan_id = record.plan_id  # the environment records which reviewed plan it came from
            plan.statements = reviewed_statements(record.summary, plan)
            return self.run(record, plan, actor, apply)

    def _check_runnable(self, record: PlanRecord, *, locked: bool) -> None:
        """The record may be applied now: its status allows it (a running one only once its apply
        is gone: `locked`, the caller holds its environment), and on a protected environment it is
        approved by someone who still may."""
        if record.status != PlanStatus.RUNNING:
            check_transition(record, "start")
        elif not locked:
            self._refuse_live_apply(record, "applied")
        protection = self.config.protection(record.environment)
        if protection is None:
            return
        approved = record.status == PlanStatus.APPROVED or (
            record.status in (PlanStatus.FAILED, PlanStatus.RUNNING) and record.approvers)
        if not approved:
            approvers = ", ".join(protection.approvers) or "its approvers"
            raise ProtectionError(f"'{record.environment}' is protected: plan {record.plan_id} is "
                                  f"{record.status.value} and needs an approval first (`mesh plans approve "
                                  f"{record.plan_id[:8]}` by one of {approvers})")
        check_approvals(record, protection.approvers, protection.allow_self_approval)

    def close_empty(self, record: PlanRecord, actor: str, note: str) -> PlanRecord:
        """A recorded plan with nothing to apply, done at once (started and completed, saying why):
        the environment, and the plans waiting for it, are left as they are."""
        return self._move(self._move(record, "start", actor, note), "complete", actor)

    def run(self, record: PlanRecord, plan: Plan, actor: str, apply: Callable[[Plan], None]) -> PlanRecord:
        """Apply `plan` as the run of `record`, under its environment's lock: running (resumed, for
        a running record whose apply is gone), then completed or failed (with the error)."""
        with environment_held(self.state, record.environment) as lease:
            resumed = record.status == PlanStatus.RUNNING
            self._settle_interrupted(record, actor, lease)
            running = self._move(record, "resume" if resumed else "start", actor,
                                 "its earlier apply is gone (killed): resumed" if resumed else None, lease=lease)
            try:
                apply(plan)
            except BaseException as e:
                self._settle(running, actor, str(e) or type(e).__name__, lease)
                raise
            done = self._move(running, "complete", actor, lease=lease)
            self.supersede_waiting(done.environment, lambda r: r.plan_id != done.plan_id, actor,
                                   f"'{done.environment}' now serves plan {done.plan_id[:8]}, applied after it "
                                   "was made", lease)
            return done

    def supersede_waiting(self, environment: str, outdated: Callable[[PlanRecord], bool], actor: str, note: str,
                          lease: Lease | None = None) -> list[PlanRecord]:
        """Supersede the plans of `environment` waiting for a review or an apply (pending, approved)
        that `outdated` says can no longer be applied as reviewed: they would be at their apply
        (README, "Reviewed plans"); left waiting, they would ask a reviewer for a decision that
        cannot matter."""
        waiting = self.state.plans.list_plan_records(environment, [PlanStatus.PENDING.value,
                                                                   PlanStatus.APPROVED.value], limit=SUPERSEDED_AT_ONCE)
        done = []
        for record in (r for r in waiting if outdated(r)):
            try:
                done.append(self._move(record, "supersede", actor, note, lease=lease))
            except ProtectionError:  # decided meanwhile by someone else: what they decided stands
                continue
        return done

    def _settle_interrupted(self, starting: PlanRecord, actor: str, lease: Lease) -> None:
        """The other `running` records of the environment, whose lock this run holds, are runs whose
        process was killed: they become failed (retryable: a retry is superseded if the environment
        moved on), saying so, rather than stay running forever."""
        for other in self.state.plans.list_plan_records(starting.environment, [PlanStatus.RUNNING.value],
                                                        limit=INTERRUPTED_SETTLED):
            if other.plan_id != starting.plan_id:
                self._move(other, "fail", actor, f"interrupted: its apply ended without an outcome (its process was "
                           f"killed); plan {starting.plan_id[:8]} ran after it", lease=lease)

    def _settle(self, running: PlanRecord, actor: str, error: str, lease: Lease) -> None:
        """Record a failed run, unless the lock was lost meanwhile: whoever took it over decides."""
        try:
            self._move(running, "fail", actor, error, lease=lease)
        except MeshError as e:
            logger.warning("Plan %s failed (%s) but its record was left as it is: %s", running.plan_id, error, e)

    def _refuse_live_apply(self, record: PlanRecord, what: str) -> None:
        """A running record is only resumed or cancelled once no live process holds its environment
        (every run holds it from start to outcome): refuse, naming who holds it, otherwise."""
        holder = self.state.locks.lock_holder(environment_lock_name(record.environment))
        if holder is None or holder.expires_ts <= now_ms() or holder_is_dead(holder):
            return
        since = datetime.fromtimestamp(holder.acquired_ts / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        raise ProtectionError(f"Plan {record.plan_id} is running and cannot be {what}: {holder.owner} is applying to "
                              f"'{record.environment}' since {since}. Wait for it to end; a killed apply is resumed "
                              f"or cancelled once its process is gone (at once on this machine, else within a minute)")

    def _cancel_running(self, record: PlanRecord, actor: str, note: str | None) -> PlanRecord:
        """Cancel a running record whose apply was killed. If that apply had recorded the
        environment, the record returns to the last finalized one (its views are re-created by the
        next apply); if it had finished the environment, the plan was applied: it is not cancelled."""
        self._refuse_live_apply(record, "cancelled")
        with environment_held(self.state, record.environment) as lease:
            record = self.find(record.plan_id)
            check_transition(record, "cancel")
            env = self.state.environments.get_environment(record.environment)
            if env is not None and env.plan_id == record.plan_id and env.finalized_ts is not None:
                raise ProtectionError(f"Plan {record.plan_id} was applied to '{record.environment}' before its process "
                                      f"ended, so it cannot be cancelled: `mesh plans apply {record.plan_id[:8]}` "
                                      "records it as completed")
            if env is not None and env.plan_id == record.plan_id:
                self.state.environments.revert_environment(record.environment, record.plan_id, lease=lease)
            return self._move(record, "cancel", actor, note, lease=lease)

    def _move(self, record: PlanRecord, action: str, actor: str, note: str | None = None,
              lease: Lease | None = None) -> PlanRecord:
        allowed, target = TRANSITIONS[action]
        moved = self.state.plans.transition_plan(record.plan_id, [s.value for s in allowed],
                                           PlanEvent(action=action, actor=actor, ts=now_ms(), status=target, note=note),
                                           lease=lease)
        if moved is None:  # decided meanwhile by someone else
            check_transition(self.find(record.plan_id), action)  # says what it is now
            raise ProtectionError(f"Plan {record.plan_id} changed while {actor} was deciding; look again")
        event = _EVENTS.get(action)
        if event is not None:
            self.notify(event, moved)
        return moved

    def notify(self, event: str, record: PlanRecord) -> None:
        """`event` of `record` to the notification targets (also, once a git worker ended, its plan's outcome)."""
        if self.notifier is None:
            return
        last = record.events[-1]
        self.notifier.send(event, {"plan_id": record.plan_id, "environment": record.environment,
                                   "status": record.status.value, "author": record.author, "actor": last.actor,
                                   "note": last.note, "git_commit": record.git_commit,
                                   "changes": [c.name for c in record.summary.changes]})


# Transitions that notify (starting a run does not: its outcome will).
_EVENTS = {"approve": "plan_approved", "reject": "plan_rejected", "cancel": "plan_cancelled",
           "complete": "plan_applied", "fail": "plan_failed", "supersede": "plan_superseded"}
