"""Recorded plans for Context: recording, the protection decision, applying (a plan made now, a
recorded one, a pushed commit's), promotion, and the plans git pushes make.

The one place that decides "a protected environment records the plan for review instead of
applying it" is `ProjectConfig.protection` (core/config/config.py): the CLI's `plan`, Dagster's
plan job and the git sensor all ask it. The records' life itself is execution/plans/records.py. A pushed
commit is planned in a git worker, a process of its own (execution/plans/git_worker.py): `plan_git_commit`
starts it and settles what it came to, `plan_pushed_commit` is what it runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Protocol

from mesh_dagster.core.config.config import GitWatchConfig, ProjectConfig, ProtectedEnvironment
from mesh_dagster.core.config.connections import MESH_DIR
from mesh_dagster.core.config.names import PROD, normalize_environment
from mesh_dagster.core.errors import ConfigError, MeshError, PlanError
from mesh_dagster.core.plan.data_diff import diff_candidates
from mesh_dagster.core.plan.identity import git_branch, git_commit
from mesh_dagster.core.plan.options import PlanOptions
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.plan.review import TRANSITIONS, PlanEvent, PlanRecord, PlanStatus, environment_for_branch
from mesh_dagster.core.project.linter import LintReport
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.execution.apply.apply import apply_plan, environment_held
from mesh_dagster.execution.apply.promote import promote_environment, refuse_unreviewed
from mesh_dagster.execution.evaluate.verdicts import AuditsFailed, refuse_failed_audits
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.parts import Parts
from mesh_dagster.execution.plans.data_diffs import plan_data_diffs
from mesh_dagster.execution.plans.git_repo import branch_heads, commit_author, export_commit
from mesh_dagster.execution.plans.git_worker import GitPlanRequest, RecordedApply, run_worker, worker_environment
from mesh_dagster.execution.plans.planning import Planning
from mesh_dagster.execution.plans.records import PlanReviews, PlanSupersededError
from mesh_dagster.state.store import Lease

# What a git plan's outcome notifies (execution/plans/records.py's events), once its worker has ended.
# A pushed commit changing no model of a protected environment is no plan to review: recorded done, with this.
NOTHING_TO_APPLY = "no model changes: nothing to review or apply"
_OUTCOMES = {PlanStatus.PENDING: "plan_pending", PlanStatus.COMPLETED: "plan_applied", PlanStatus.FAILED: "plan_failed",
             PlanStatus.CANCELLED: "plan_cancelled", PlanStatus.SUPERSEDED: "plan_superseded"}


class CommitParts(Parts, Protocol):
    """The parts of one pushed commit's files (a Context over them), how it plans and lints."""

    plans: Planning

    def lint_gate(self, skip: str | None = None) -> LintReport: ...


# Opens the parts of the files at a path, sharing this project's state store, warehouse and Spark.
OpenCommit = Callable[[Path], AbstractContextManager[CommitParts]]


class Reviews:
    """Records, reviews and applies one project's plans under its rules (config.yaml)."""

    def __init__(self, parts: Parts, planning: Planning, open_files: OpenCommit):
        self.parts = parts
        self.planning = planning
        self._open_files = open_files
        self._records: PlanReviews | None = None

    @property
    def records(self) -> PlanReviews:
        if self._records is None:
            self._records = PlanReviews(self.parts.state, self.parts.config, self.parts.notifier)
        return self._records

    def record(self, plan: Plan, author: str | None = None) -> PlanRecord:
        """Store `plan` for review (pending), with its author (by default this process's user) and the
        project's git commit."""
        path = self.parts.path
        return self.records.record(plan, author=author or self.parts.user, git_commit=git_commit(path),
                                   git_branch=git_branch(path),
                                   data_diffs=self.parts.config.plan.data_diff.enabled)

    def _run(self, record: PlanRecord, plan: Plan, actor: str, parts: Parts,
             listener: ApplyListener | None) -> PlanRecord:
        """Apply `plan` as `record`'s run, then attach its data diffs."""
        done = self.records.run(record, plan, actor, _applying(parts, listener))
        return self._attach_diffs(done, plan, parts, listener)

    def _attach_diffs(self, record: PlanRecord, plan: Plan, parts: Parts,
                      listener: ApplyListener | None) -> PlanRecord:
        """Once a plan's apply completed, the data diffs of its directly modified models in a
        development environment (their new tables exist now), stored with its record."""
        settings = self.parts.config.plan.data_diff  # this project's, also for a pushed commit's plan
        if not settings.enabled or not diff_candidates(plan):
            return record
        diffs = plan_data_diffs(plan, parts.engine, settings)
        if listener is not None:
            listener.log(f"Data diff of {', '.join(diffs)} attached to plan {record.plan_id[:8]} "
                         f"(`mesh plans show {record.plan_id[:8]}`)")
        return self.parts.state.plans.attach_data_diffs(record.plan_id, diffs) or record

    def hold_for_review(self, plan: Plan) -> ProtectedEnvironment | None:
        """Record `plan` for review when its environment requires one, returning its rules; None
        (and nothing recorded) when the plan may be applied now."""
        protection = self.parts.config.protection(plan.environment)
        if protection is not None:
            self.record(plan)
        return protection

    def apply(self, plan: Plan, listener: ApplyListener | None = None) -> None:
        """Apply a plan made just now, recording it (and its outcome) if it is not yet. A protected
        environment's plans are applied only as approved records (`apply_recorded`)."""
        refuse_unreviewed(self.parts.config, plan)
        record = self.parts.state.plans.get_plan_record(plan.plan_id) or self.record(plan)
        self._run(record, plan, self.parts.user, self.parts, listener)

    def apply_recorded(self, plan_id: str, listener: ApplyListener | None = None) -> PlanRecord:
        """Apply a recorded plan: approved (protected environments), and still the plan reviewed.
        A plan made from a pushed commit is rebuilt and applied from that commit's files, in a git
        worker (`apply_pushed` is its half)."""
        record = self.records.find(plan_id)
        if record.plan_options.from_commit is not None:
            return self._applied_in_worker(record, listener)
        applied: list[Plan] = []
        done = self.records.apply(record.plan_id, self.parts.user, self.planning.rebuild,
                                  _recording(self.parts, listener, applied))
        return self._attach_diffs(done, applied[0], self.parts, listener)

    def promote(self, environment: str, listener: ApplyListener | None = None) -> Plan:
        """Virtual update of `environment` to the current snapshots; refuses while any has gaps."""
        def track(plan: Plan, apply: Callable[[Plan], None]) -> object:
            return self.records.run(self.record(plan), plan, self.parts.user, apply)

        parts = self.parts
        return promote_environment(parts.project, parts.state, lambda: parts.engine, environment, listener,
                                   track=track)

    # -- git-driven plans (dagster/jobs/git_sensor.py) -------------------------------------------
    def git_heads(self) -> dict[str, str]:
        """{branch: sha} of the watched repository's branches that `git.branches` selects."""
        watch = self._git_watch()
        heads = branch_heads(watch.repo_path(self.parts.path), watch.tick_timeout_s)
        return {b: sha for b, sha in heads.items() if any(fnmatchcase(b, p) for p in watch.branches)}

    def plan_git_commit(self, branch: str, sha: str, listener: ApplyListener | None = None) -> PlanRecord:
        """Plan commit `sha` of `branch` from its own files in a git worker, a process of its own
        (execution/plans/git_worker.py; `plan_pushed_commit` is its half): the commit's code never runs
        in this one. What the worker came to is read from the state store: a record it left open
        (it was killed, timed out or crashed) is settled here, a worker that recorded nothing leaves
        a failed record saying why, and the notification goes out from here (the worker holds none
        of their credentials)."""
        request = self.git_request(branch, sha)
        since = now_ms()
        failure = self._in_worker(request, listener,
                                  lambda: self._outcome(request, since, "the git_plan run was stopped", None))
        return self._outcome(request, since, failure, listener)

    def git_request(self, branch: str, sha: str) -> GitPlanRequest:
        """What a git worker is asked to do with commit `sha` of `branch`: the environment it plans
        (a branch naming prod or a protected environment is refused here), the commit's author, and
        this project's rules: its git, protection and plan settings, nothing else of its config."""
        watch = self._git_watch()
        config = self.parts.config
        return GitPlanRequest(
            project_dir=self.parts.path, home=self.parts.home, gateway=self.parts.gateway,
            state_url=self.parts.state_url, branch=branch, sha=sha,
            rules=ProjectConfig(git=watch, protected_environments=config.protected_environments, plan=config.plan),
            environment=environment_for_branch(branch, watch.protected, list(config.protected_environments)),
            author=commit_author(watch.repo_path(self.parts.path), sha, watch.tick_timeout_s))

    def apply_request(self, record: PlanRecord) -> GitPlanRequest:
        """What a git worker is asked to apply `record`, a plan of a pushed commit, as this user:
        outdated when its branch moved on since (a newer push is what the branch holds now)."""
        sha, branch = record.plan_options.from_commit or "", record.git_branch or ""
        head = self.git_heads().get(branch)
        moved = None if head == sha else f"branch {branch} moved on to {head[:8] if head else 'nothing'}"
        task = RecordedApply(plan_id=record.plan_id, actor=self.parts.user, outdated=moved)
        return self.git_request(branch, sha).model_copy(update={"environment": record.environment, "apply": task})

    def work(self, request: GitPlanRequest, listener: ApplyListener | None = None) -> PlanRecord:
        """What a git worker does with `request`, in this process (cli/git_worker.py)."""
        if request.apply is None:
            return self.plan_pushed_commit(request, listener)
        return self.apply_pushed(request, request.apply, listener)

    def plan_pushed_commit(self, request: GitPlanRequest, listener: ApplyListener | None = None) -> PlanRecord:
        """The git worker's half of `plan_git_commit`, in this process: the commit's files (never
        this project's working tree) are linted and planned, the plan recorded, and outside a
        protected environment applied. A commit whose files cannot be exported or whose project does
        not load, whose linter finds an error (its own `linter:` and rules, as `mesh plan` in a
        checkout of it), or whose promotion would serve data a blocking audit failed on, is a failed
        record. The protection rules and approvers are the watching project's (`request.rules`),
        never the pushed commit's: a push cannot lift the protection it is subject to."""
        sha, environment, author = request.sha, request.environment, request.author

        def failed(error: object) -> PlanRecord:
            return self.records.record_failure(environment, f"commit {sha[:8]}: {error}", author=author,
                                               git_commit=sha, git_branch=request.branch)

        with ExitStack() as stack:
            try:
                commit = stack.enter_context(self._commit(sha))
                _warn(commit.lint_gate(), listener)
                plan = commit.plans.plan(environment, PlanOptions(allow_empty=True, from_commit=sha))
            except MeshError as e:
                return failed(e)
            protected = self.parts.config.protection(environment) is not None
            refused = None if protected else _failed_audits(commit, plan)  # what it would promote as it is
            if refused:
                return failed(refused)
            record = self.records.record(plan, author=author, git_commit=sha, git_branch=request.branch,
                                         data_diffs=self.parts.config.plan.data_diff.enabled)
            self.records.supersede_waiting(  # what the branch held before is no longer what it holds
                environment, lambda r: r.git_branch == request.branch and r.git_commit != sha, author,
                f"branch {request.branch} moved on to {sha[:8]}")
            if protected and not plan.needs_apply:  # nothing for a reviewer to decide
                return self.records.close_empty(record, author, NOTHING_TO_APPLY)
            return record if protected else self._run(record, plan, author, commit, listener)

    def apply_pushed(self, request: GitPlanRequest, task: RecordedApply,
                     listener: ApplyListener | None = None) -> PlanRecord:
        """The git worker's half of `apply_recorded` for a pushed commit's plan: rebuilt from the
        commit's files and applied as reviewed, or superseded (execution/plans/records.py)."""
        applied: list[Plan] = []
        with self._commit(request.sha) as commit:
            done = self.records.apply(task.plan_id, task.actor, commit.plans.rebuild,
                                      _recording(commit, listener, applied), outdated=task.outdated)
            return self._attach_diffs(done, applied[0], commit, listener)

    def _in_worker(self, request: GitPlanRequest, listener: ApplyListener | None,
                   stopped: Callable[[], object]) -> str | None:
        """Run `request` in a git worker: None once it ended well, else the one line saying how it
        ended. Should this process be stopped meanwhile (Dagster's terminate), the worker is, and
        `stopped` settles what it left."""
        watch = self._git_watch()
        log = self.parts.home / MESH_DIR / "logs" / f"git-worker-{request.sha[:12]}-{now_ms()}.log"
        env = worker_environment(watch.worker_env, [t.url for t in self.parts.config.notification_targets])
        try:
            return run_worker(request, listener, env, watch.plan_timeout_s, log)
        except BaseException:
            stopped()
            raise

    def _outcome(self, request: GitPlanRequest, since: int, failure: str | None,
                 listener: ApplyListener | None) -> PlanRecord:
        """The record the worker made of `request` (since `since`), settled and notified."""
        made = [r for r in self.parts.state.plans.list_plan_records(request.environment)
                if (r.git_commit, r.git_branch) == (request.sha, request.branch) and r.created_ts >= since]
        if not made:  # nothing recorded: the worker died first, or pushed code ended it
            return self.records.record_failure(
                request.environment, f"commit {request.sha[:8]}: {failure or 'the git worker recorded no plan'}",
                author=request.author, git_commit=request.sha, git_branch=request.branch)
        record = made[0]
        if record.status == PlanStatus.RUNNING or (
                record.status == PlanStatus.PENDING and self.parts.config.protection(record.environment) is None):
            record = self._settle(record, failure or "the git worker ended before the plan's outcome was recorded")
        elif failure is not None and record.status != PlanStatus.FAILED and listener is not None:
            listener.log(f"The git worker failed after plan {record.plan_id[:8]} was {record.status.value}: {failure}")
        return self._notified(record)

    def _applied_in_worker(self, record: PlanRecord, listener: ApplyListener | None) -> PlanRecord:
        """`apply_recorded` of a pushed commit's plan, in a git worker; a refusal or a failure there
        is raised here as its one line (superseded: a PlanSupersededError, as the state store says)."""
        failure = self._in_worker(self.apply_request(record), listener,
                                  lambda: self._after_apply(record, "the run applying it was stopped"))
        done = self._after_apply(record, failure)
        if failure is not None:
            raise (PlanSupersededError if done.status == PlanStatus.SUPERSEDED else PlanError)(failure)
        return done

    def _after_apply(self, record: PlanRecord, failure: str | None) -> PlanRecord:
        """What the worker's apply of `record` came to: settled when it started a run it did not end
        (one that was running before, by a live apply, is not its own), notified when it moved."""
        done = self.records.find(record.plan_id)
        if len(done.events) == len(record.events):
            return done  # refused before deciding anything
        if done.status == PlanStatus.RUNNING and done.events[-1].action in ("start", "resume"):
            done = self._settle(done, failure or "the git worker ended before the apply's outcome was recorded")
        return self._notified(done)

    def _notified(self, record: PlanRecord) -> PlanRecord:
        """`record`, its outcome sent to the notification targets (none when the record is somewhere
        in between: someone decided meanwhile, and was notified)."""
        event = _OUTCOMES.get(record.status)
        if event is not None:
            self.records.notify(event, record)
        return record

    def _settle(self, record: PlanRecord, reason: str) -> PlanRecord:
        """Close a record its git worker left open. Running: completed when its apply had finished
        the environment, else failed (applying it again resumes from the missing intervals; the
        journal covers a table it was writing). Pending, outside a protected environment (its apply
        never started): cancelled."""
        if record.status == PlanStatus.PENDING:
            return self._close(record, "cancel", reason, None)
        state = self.parts.state
        with environment_held(state, record.environment) as lease:  # the dead worker's lock, taken over
            env = state.environments.get_environment(record.environment)
            applied = env is not None and env.plan_id == record.plan_id and env.finalized_ts is not None
            return self._close(record, "complete" if applied else "fail", None if applied else reason, lease)

    def _close(self, record: PlanRecord, action: str, note: str | None, lease: Lease | None) -> PlanRecord:
        allowed, status = TRANSITIONS[action]
        # The actor is who its worker acted for: the author planning, or who applied an approved plan.
        event = PlanEvent(action=action, actor=record.events[-1].actor, ts=now_ms(), status=status, note=note)
        moved = self.parts.state.plans.transition_plan(record.plan_id, [s.value for s in allowed], event, lease=lease)
        return moved or self.records.find(record.plan_id)  # decided meanwhile by someone else: as it is now

    def git_branch_deleted(self, branch: str) -> str | None:
        """Invalidate the environment of a deleted branch (the janitor removes it); its name, if any."""
        watch = self._git_watch()
        environment = environment_for_branch(branch, watch.protected, list(self.parts.config.protected_environments))
        state = self.parts.state
        if environment == PROD or state.environments.get_environment(normalize_environment(environment)) is None:
            return None
        state.environments.invalidate_environment(environment, now_ms())
        return environment

    @contextmanager
    def _commit(self, sha: str) -> Iterator[CommitParts]:
        """The parts of the files of commit `sha` of the watched repository."""
        watch = self._git_watch()
        with tempfile.TemporaryDirectory(prefix="mesh_git_") as tmp:
            files = export_commit(watch.repo_path(self.parts.path), sha, Path(tmp) / "commit", watch.tick_timeout_s * 4)
            with self._open_files(files / watch.project_path) as commit:
                yield commit

    def _git_watch(self) -> GitWatchConfig:
        git = self.parts.config.git
        if git is None:
            raise ConfigError("No `git:` section in config.yaml: nothing to watch (see the README's Reviewed plans)")
        return git


def _applying(parts: Parts, listener: ApplyListener | None) -> Callable[[Plan], None]:
    """Applies a plan with these parts' project, state store and (lazily started) engine."""
    return lambda plan: apply_plan(plan, parts.project, parts.state, parts.engine, listener)


def _recording(parts: Parts, listener: ApplyListener | None, applied: list[Plan]) -> Callable[[Plan], None]:
    """`_applying`, keeping the plan it applied in `applied` (its data diffs are attached after)."""
    def run(plan: Plan) -> None:
        _applying(parts, listener)(plan)
        applied.append(plan)
    return run


def _warn(report: LintReport, listener: ApplyListener | None) -> None:
    """The linter's warnings, in the log of the run that plans."""
    if listener is None:
        return
    for finding in report.warnings:
        listener.log(f"Linter warning: {finding}")


def _failed_audits(parts: Parts, plan: Plan) -> str | None:
    """Why promoting `plan` as it is would serve data a blocking audit failed on (the models it
    recomputes run their audits again), or None."""
    try:
        refuse_failed_audits(parts.state, plan, parts.project.audits, set(plan.snapshots) - set(plan.backfills),
                             applying=False)
    except AuditsFailed as e:
        return str(e)
    return None
