"""Reviewed plans: what a plan record holds, who may decide what, and what applying may run.

A plan is recorded when it is made (CLI or Dagster), with the summary a reviewer reads and the
fingerprints it covers. On a protected environment it waits for an approver; applying it later
rebuilds the plan from the project *as it is then*, with the recorded options and execution
time, and runs it only if it is the same plan: the same snapshot identifiers, the same base
environment record, and no interval outside the reviewed backfill. Anything else supersedes the
record and runs nothing — an approval covers exactly what was reviewed.
"""

from __future__ import annotations

from enum import Enum
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_serializer, field_validator

from mesh_dagster.core.config.display import markdown_code, markdown_fence, printable, printable_line
from mesh_dagster.core.config.names import PROD, EnvironmentNameError, normalize_environment
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.data_diff import DataDiff, diff_title
from mesh_dagster.core.plan.data_diff import markdown as data_diff_markdown
from mesh_dagster.core.plan.estimate import BackfillEstimate
from mesh_dagster.core.plan.lint_outcome import LintOutcome
from mesh_dagster.core.plan.options import FROM_COMMIT, PlanOptions
from mesh_dagster.core.snapshots.snapshot import ChangeCategory
from mesh_dagster.core.snapshots.statements import EnvironmentStatements
from mesh_dagster.core.time.intervals import subtract_intervals

if TYPE_CHECKING:  # the state store reads records without loading the plan builder
    from mesh_dagster.core.plan.plan import Plan


class PlanStatus(str, Enum):
    PENDING = "pending"
    APPROVED = "approved"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"


S = PlanStatus
# action -> (statuses it may start from, status it leads to). A failed plan may be applied again
# (it resumes from the missing intervals); finished, rejected, cancelled and superseded ones are final.
# A running plan whose apply is gone (killed: nobody live holds its environment's lock) may be
# resumed, cancelled or superseded like a failed one; execution/plans/records.py checks that it is gone.
TRANSITIONS: dict[str, tuple[frozenset[PlanStatus], PlanStatus]] = {
    "approve": (frozenset({S.PENDING}), S.APPROVED),
    "reject": (frozenset({S.PENDING, S.APPROVED}), S.REJECTED),
    "cancel": (frozenset({S.PENDING, S.APPROVED, S.FAILED, S.RUNNING}), S.CANCELLED),
    "start": (frozenset({S.PENDING, S.APPROVED, S.FAILED}), S.RUNNING),
    "resume": (frozenset({S.RUNNING}), S.RUNNING),
    "complete": (frozenset({S.RUNNING}), S.COMPLETED),
    "fail": (frozenset({S.RUNNING}), S.FAILED),
    "supersede": (frozenset({S.PENDING, S.APPROVED, S.FAILED, S.RUNNING}), S.SUPERSEDED),
}


class PlanEvent(BaseModel):
    """A decision or a step of a plan's life, with who took it."""

    action: str
    actor: str
    ts: int
    status: PlanStatus  # the status it led to
    note: str | None = None


class Change(BaseModel):
    name: str
    change: str  # added, removed, directly modified, indirectly modified, metadata
    category: ChangeCategory | None = None  # stored (and shown) as its `words`

    @field_validator("category", mode="before")
    @classmethod
    def _read_category(cls, value: object) -> object:
        """A stored record names the category by its words (`indirect non breaking`)."""
        return ChangeCategory.from_words(value) if isinstance(value, str) else value

    @field_serializer("category")
    def _write_category(self, category: ChangeCategory | None) -> str | None:
        return category.words if category is not None else None

    @property
    def category_words(self) -> str:
        """The category as a review shows it (empty: a removed model has none)."""
        return self.category.words if self.category is not None else ""


class PlanSummary(BaseModel):
    """What a reviewer reads and what an apply must match."""

    base_environment: str | None  # the environment compared with (the target, or the one it starts from)
    base_plan_id: str | None  # the target's record when the plan was made (None: a new environment)
    execution_time: int
    start: int
    end: int
    # What rebuilds the plan: its PlanOptions as JSON (`PlanOptions.recorded`; `PlanRecord.plan_options`).
    options: dict[str, Any] = Field(default_factory=dict)
    fingerprints: dict[str, str] = Field(default_factory=dict)  # model -> snapshot identifier
    changes: list[Change] = Field(default_factory=list)
    diffs: dict[str, str] = Field(default_factory=dict)
    backfills: dict[str, list[tuple[int, int]]] = Field(default_factory=dict)
    backfill_text: dict[str, str] = Field(default_factory=dict)  # model -> "[2020-01-01 - 2020-01-03]"
    restated: list[str] = Field(default_factory=list)
    standalone_audits: list[str] = Field(default_factory=list)  # nodes with no view (nor Dagster asset)
    # The data diffs of a development plan (core/plan/data_diff.py): pending until its apply has
    # built the new tables, then attached to the record (state/plans.py `attach_data_diffs`).
    data_diff_pending: list[str] = Field(default_factory=list)
    data_diffs: dict[str, DataDiff] = Field(default_factory=dict)
    # A plan whose apply computes no diff (prod's) holds the diffs development plans computed of
    # the same comparison (copied into `data_diffs` when it is recorded), and lists the models
    # none has computed yet: its review says how to get one (core/plan/data_diff.py).
    data_diff_missing: list[str] = Field(default_factory=list)
    # The `before_all` / `after_all` its apply runs, as captured (None: recorded before plans captured
    # them), and their diff from what the environment ran when the plan was made (empty: unchanged).
    statements: EnvironmentStatements | None = None
    statements_diff: str = ""
    linter: LintOutcome | None = None  # what the linter did before the plan (None: no lint gate recorded)
    estimate: BackfillEstimate | None = None  # what its backfill would take (core/plan/estimate.py)

    def data_diff_markdown(self) -> str:
        """The data diffs alone (Dagster's `data_diff_details`): tables, column counts, sample rows."""
        return "\n".join(data_diff_markdown(self.data_diffs, self.data_diff_pending, self.data_diff_missing)).strip()

    def data_diff_title(self) -> str:
        return diff_title(self.data_diffs)

    def markdown(self, environment: str, data: bool = True) -> str:
        """The summary a reviewer reads (Dagster, `mesh plans show`). User text (names, diffs) is
        shown, never obeyed: control characters as escapes, diffs in a fence they cannot close."""
        lines = [f"### Plan for {markdown_code(environment)}", ""]
        if self.changes:
            lines += ["| Model | Change | Category |", "|---|---|---|"]
            lines += [f"| {_cell(c.name)} | {c.change} | {c.category_words} |" for c in self.changes]
        else:
            lines.append("No model changes.")
        if self.backfills:
            lines += ["", "**Backfill**", ""] + [f"- {markdown_code(n)} {printable_line(t)}"
                                                 f"{self.estimate.suffix(n, sureness=True) if self.estimate else ''}"
                                                 for n, t in self.backfill_text.items()]
            lines += ["", self.estimate.line()] if self.estimate is not None else []
        for name, diff in self.diffs.items():
            lines += ["", f"**Diff of {markdown_code(name)}**", "", markdown_block(diff, "diff")]
        statements = self.statements_markdown()
        lines += ["", statements] if statements else []
        # `mesh plans show` (data=False) draws the diffs as tables of its own; what none covers shows here
        lines += data_diff_markdown(self.data_diffs if data else {}, self.data_diff_pending if data else [],
                                    self.data_diff_missing)
        lines += ["", self.linter_line()] if self.linter else []
        return "\n".join(lines)

    def statements_markdown(self) -> str:
        """The environment's `before_all` / `after_all` as its apply runs them: their diff from what
        the environment runs now when they change, else their text (empty: none)."""
        if self.statements_diff:
            return "\n".join(["**Environment statements** (`before_all` / `after_all`: changed)", "",
                              markdown_block(self.statements_diff, "diff")])
        if self.statements is None or self.statements.is_empty:
            return ""
        return "\n".join(["**Environment statements** (`before_all` / `after_all`: unchanged)", "",
                          markdown_block(self.statements.text())])

    def linter_line(self) -> str:
        """What the linter did before the plan was made (empty: not recorded)."""
        return printable_line(self.linter.describe(from_commit=bool(self.options.get(FROM_COMMIT)))) \
            if self.linter else ""


def markdown_block(text: str, language: str = "") -> str:
    """User text (an error quoting a model, a note, a diff) as a Markdown code block it cannot break out of."""
    shown = printable(text.rstrip())
    fence = markdown_fence(shown)
    return f"{fence}{language}\n{shown}\n{fence}"


def _cell(name: str) -> str:
    """A model name as a table cell: a `|` in it would start another cell."""
    return markdown_code(name).replace("|", "\\|")


class PlanRecord(BaseModel):
    """A plan as stored: the summary, who made it from which commit, and its life so far."""

    plan_id: str
    environment: str
    author: str
    status: PlanStatus = PlanStatus.PENDING
    git_commit: str | None = None
    git_branch: str | None = None
    created_ts: int
    updated_ts: int
    summary: PlanSummary
    events: list[PlanEvent] = Field(default_factory=list)

    @property
    def plan_options(self) -> PlanOptions:
        """The options the plan was made with, typed (records of earlier versions included)."""
        return PlanOptions.from_record(self.summary.options)

    @property
    def approvers(self) -> list[str]:
        return [e.actor for e in self.events if e.action == "approve"]


class ProtectionError(PlanError):
    """A decision the rules of a protected environment do not allow."""


def summarize(plan: Plan) -> PlanSummary:
    """The reviewable summary of `plan`, with the options it was built with (`recorded()` form)."""
    changes = [Change(name=n, change="added", category=plan.category(n)) for n in plan.added]
    changes += [Change(name=es.name, change="removed") for es in plan.removed]
    for name in plan.directly_modified:
        changes.append(Change(name=name, change="directly modified", category=plan.category(name)))
        changes += [Change(name=c, change="indirectly modified", category=plan.category(c))
                    for c in plan.indirectly_modified.get(name, [])]
    changes += [Change(name=n, change="metadata", category=plan.category(n)) for n in plan.metadata_updated]
    backfills = {} if plan.skip_backfill else plan.backfills
    return PlanSummary(
        base_environment=plan.base_environment.name if plan.base_environment else plan.create_from,
        base_plan_id=plan.base_environment.plan_id if plan.base_environment else None,
        execution_time=plan.execution_time,
        start=plan.start,
        end=plan.end,
        options=plan.options.recorded(),
        fingerprints={n: s.identifier for n, s in plan.snapshots.items()},
        changes=_unique(changes),
        diffs=dict(plan.diffs),
        backfills={n: list(bf.intervals) for n, bf in backfills.items()},
        backfill_text={n: bf.describe(plan.snapshots[n].model.interval_unit) for n, bf in backfills.items()},
        restated=list(plan.restated),
        standalone_audits=sorted(n for n, s in plan.snapshots.items() if s.model.kind.is_standalone_audit),
        statements=plan.statements,
        statements_diff=plan.statements.diff(plan.base_statements) if plan.statements_changed else "",
        linter=plan.linter,
        estimate=plan.estimate if backfills else None,
    )


def _unique(changes: list[Change]) -> list[Change]:
    """An indirectly modified model below two changed parents is listed once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for c in changes:
        if (c.name, c.change) not in seen:
            seen.add((c.name, c.change))
            out.append(c)
    return out


def differences(reviewed: PlanSummary, now: Plan, plan_id: str | None = None) -> list[str]:
    """Why `now` (the plan rebuilt for an apply) is not the plan that was reviewed; empty if it is.

    An environment whose record is already plan `plan_id`'s own (an earlier attempt recorded it,
    then stopped) still counts as the reviewed base when that record follows it."""
    found = []
    base = now.base_environment
    own = base is not None and base.plan_id == plan_id and base.previous_plan_id == reviewed.base_plan_id
    if not own and (base.plan_id if base else None) != reviewed.base_plan_id:
        found.append(f"the environment changed since the review (its record is now "
                     f"{now.base_environment.plan_id if now.base_environment else 'gone'})")
    current = {n: s.identifier for n, s in now.snapshots.items()}
    moved = sorted(n for n in set(current) | set(reviewed.fingerprints)
                   if current.get(n) != reviewed.fingerprints.get(n))
    if moved:
        found.append(f"the project changed since the review: {', '.join(moved[:10])}"
                     f"{' ...' if len(moved) > 10 else ''}")
    extra = sorted(n for n, bf in now.backfills.items()
                   if not now.skip_backfill and subtract_intervals(bf.intervals, reviewed.backfills.get(n, [])))
    if extra:
        found.append(f"the backfill grew beyond what was reviewed: {', '.join(extra)}")
    if reviewed.statements is None and not now.statements.is_empty:
        found.append("config.yaml has before_all/after_all statements, and the plan was recorded before plans "
                     "captured them for review")
    return found


def reviewed_statements(reviewed: PlanSummary, now: Plan) -> EnvironmentStatements:
    """What the apply of a reviewed plan runs: the `before_all` / `after_all` the review showed,
    whatever config.yaml holds now (a record from before they were captured: the rebuilt plan's,
    which `differences` lets through only when there are none)."""
    return reviewed.statements if reviewed.statements is not None else now.statements


class BranchError(PlanError):
    """A branch whose name cannot become a development environment."""


def environment_for_branch(branch: str, protected_branches: list[str], protected_environments: list[str]) -> str:
    """The environment a push to `branch` plans: prod for a protected branch, else the branch name
    normalised (`feature/x` -> `feature_x`), never prod or another protected environment by accident."""
    if any(fnmatchcase(branch, p) for p in protected_branches):
        return PROD
    try:
        environment = normalize_environment(branch)
    except EnvironmentNameError as e:
        raise BranchError(f"Branch '{branch}' cannot be planned: {e}") from None
    if environment == PROD or environment in protected_environments:
        raise BranchError(f"Branch '{branch}' would plan the protected environment '{environment}': rename the "
                          "branch (only the protected branches plan it, and only through an approval)")
    return environment


def check_transition(record: PlanRecord, action: str) -> PlanStatus:
    """The status `action` leads to, or a ProtectionError saying why it cannot happen now."""
    allowed, target = TRANSITIONS[action]
    if record.status not in allowed:
        raise ProtectionError(f"Plan {record.plan_id} is {record.status.value}: it cannot be "
                              f"{_past(action)} (only a {' or '.join(sorted(s.value for s in allowed))} plan can)")
    return target


def _past(action: str) -> str:
    return {"approve": "approved", "reject": "rejected", "cancel": "cancelled", "start": "applied",
            "resume": "resumed", "complete": "completed", "fail": "failed", "supersede": "superseded"}[action]


def check_approver(record: PlanRecord, actor: str, approvers: list[str], allow_self_approval: bool) -> None:
    """Only a listed approver approves, and not their own plan unless the environment allows it."""
    if not _listed(actor, approvers):
        listed = ", ".join(approvers) or "nobody (set protected_environments.<env>.approvers)"
        raise ProtectionError(f"{actor} may not approve plans for '{record.environment}': its approvers are {listed}")
    if not allow_self_approval and same_person(actor, record.author):
        raise ProtectionError(f"{actor} made plan {record.plan_id} and may not approve it: another approver must "
                              f"(or set protected_environments.{record.environment}.allow_self_approval: true)")


def check_approvals(record: PlanRecord, approvers: list[str], allow_self_approval: bool) -> None:
    """At apply time, the record's approvals must still count under the environment's rules as
    they are now (config.yaml may have changed since): by a listed approver, not by the author
    unless self-approval is allowed. A ProtectionError names each approval that no longer counts."""
    void = []
    for actor in record.approvers:
        if not _listed(actor, approvers):
            void.append(f"{actor} is no longer one of its approvers")
        elif not allow_self_approval and same_person(actor, record.author):
            void.append(f"{actor} made the plan and self-approval is no longer allowed")
    if void and len(void) == len(record.approvers):
        listed = ", ".join(approvers) or "nobody"
        raise ProtectionError(
            f"Plan {record.plan_id} was not applied: its approval no longer counts ({'; '.join(void)} in "
            f"protected_environments.{record.environment} of config.yaml, whose approvers are {listed}). Make a new "
            f"plan for one of them to approve, and cancel this one (`mesh plans cancel {record.plan_id[:8]}`)")


def same_person(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def _listed(actor: str, approvers: list[str]) -> bool:
    return any(same_person(actor, a) for a in approvers)
