"""Audit verdicts that hold: kept with the data they judged, read by promotion and by Dagster.

An audit's verdict is about one version of a model (its physical table) over an interval, by one
definition of the audit — its `digest` covers the audit's query, defaults, arguments and blocking
flag, so editing an audit (a metadata change: the version and its data stay) needs a new verdict,
while a change elsewhere that keeps the version keeps the verdicts. For each point in time, the
verdict that holds is the latest one recorded over an interval containing it.

Every run of an audit records its verdicts (`record`): a Dagster materialization, a plan apply,
`mesh run`. No view moves onto a version whose blocking audit's holding verdict is a failure:
promotion refuses before it plans an apply (`refuse_failed_audits`), and every apply — the CLI's,
`apply_plan_<env>`, a promotion's, a git deploy's — checks the versions it is about to serve
right before it records the environment (`refuse_serving_failed_audits`, execution/apply/apply.py), after
its backfill, whose audits have just recorded newer verdicts on what it recomputed. Dagster shows
the holding verdicts as check results on each partition, whatever re-stamps the partition meanwhile.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Audit, AuditRef
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.project.audits import is_blocking
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.core.time.intervals import Interval, format_interval_range, subtract_intervals
from mesh_dagster.execution.evaluate.evaluator import AuditResult, SnapshotEvaluator
from mesh_dagster.execution.ports import State
from mesh_dagster.state.verdicts import Verdict


def audit_digest(ref: AuditRef, audits: Mapping[str, Audit]) -> str:
    """What decides an audit's verdict on given rows: its query (or built-in name), defaults,
    arguments and whether it blocks."""
    audit = audits.get(ref.name)
    definition = [ref.name, sorted(ref.args.items()), is_blocking(ref, dict(audits)),
                  audit.query if audit is not None else "built-in", sorted(audit.defaults.items()) if audit else []]
    return hashlib.sha1(json.dumps(definition).encode()).hexdigest()[:16]


def snapshot_audits(snapshot: Snapshot, project_audits: Mapping[str, Audit]) -> dict[str, Audit]:
    """The audit definitions a snapshot runs: those it captured, else the project's."""
    return dict(snapshot.capture.audits) if snapshot.capture is not None else dict(project_audits)


def record(state: State, snapshot: Snapshot, project_audits: Mapping[str, Audit],
           batches: Iterable[tuple[Interval, list[AuditResult]]], source: str) -> None:
    """Keep the verdicts of `batches` (each batch's interval and its audits' results, in the order
    of the model's audits)."""
    if snapshot.version is None:
        return
    audits = snapshot_audits(snapshot, project_audits)
    refs = snapshot.model.audits
    state.verdicts.record([Verdict(snapshot.name, snapshot.version, snapshot.identifier, ref.name,
                                   audit_digest(ref, audits), result.blocking, interval[0], interval[1], result.count,
                                   source, sample=result.sample)
                           for interval, results in batches for ref, result in zip(refs, results)], now_ms())


class RecordingEvaluator(SnapshotEvaluator):
    """The evaluator that keeps every audit verdict it computes (`source`: who ran it). An audit of
    the whole table (no interval) judges all of its time."""

    def __init__(self, *args, state: State, source: str, **kwargs):
        super().__init__(*args, stored_content=state.snapshots.get_blob, shapes=state.shapes, **kwargs)
        self._state = state
        self._source = source

    def audit(self, snapshot: Snapshot, start: int | None, end: int | None, execution_time: int) -> list[AuditResult]:
        results = super().audit(snapshot, start, end, execution_time)
        interval = (start, end) if start is not None and end is not None else ALL_TIME
        record(self._state, snapshot, self.project.audits, [(interval, results)], self._source)
        return results


@dataclass(frozen=True)
class Holding:
    """The verdict that holds over `interval` for one audit definition of one model version."""

    interval: Interval
    verdict: Verdict


VerdictKey = tuple[str, str, str]  # (model, version, audit digest)


@dataclass(frozen=True)
class HeldVerdicts:
    """The verdicts that hold for one audit definition on one model version, by interval, oldest
    interval first: what promotion, an apply and Dagster's checks all read."""

    holdings: tuple[Holding, ...]

    @property
    def latest(self) -> Holding:
        return self.holdings[-1]

    def failing(self) -> list[Holding]:
        return [h for h in self.holdings if not h.verdict.passed]

    def covering(self, window: Interval) -> Holding | None:
        """The verdict over an interval holding all of `window` (a partition's), if one does."""
        return next((h for h in reversed(self.holdings) if h.interval[0] <= window[0] and window[1] <= h.interval[1]),
                    None)


def holding(verdicts: Iterable[Verdict]) -> dict[VerdictKey, HeldVerdicts]:
    """The verdicts that hold, by audit definition of a model version (a later verdict replaces an
    earlier one where their intervals overlap). `verdicts` oldest first."""
    out: dict[VerdictKey, list[Holding]] = {}
    for verdict in verdicts:
        key = (verdict.name, verdict.version, verdict.digest)
        new = (verdict.start, verdict.end)
        kept = [Holding(piece, h.verdict)
                for h in out.get(key, []) for piece in subtract_intervals([h.interval], [new])]
        out[key] = sorted([*kept, Holding(new, verdict)], key=lambda h: h.interval)
    return {key: HeldVerdicts(tuple(holdings)) for key, holdings in out.items()}


@dataclass(frozen=True)
class FailedAudit:
    """A blocking audit whose holding verdict on a version an environment would serve failed."""

    model: str
    audit: str
    intervals: list[Interval]
    failing_rows: int
    snapshot: Snapshot

    def describe(self, environment: str) -> str:
        unit = self.snapshot.model.interval_unit
        judged = "the whole table" if ALL_TIME in self.intervals else format_interval_range(self.intervals, unit)
        return (f"{view_name(self.model, environment)}: blocking audit '{self.audit}' failed for {judged} "
                f"({self.failing_rows} row(s))")


class AuditsFailed(PlanError):
    """Promotion refused: the data an environment would serve failed a blocking audit."""

    def __init__(self, environment: str, failed: list[FailedAudit], message: str | None = None):
        self.environment = environment
        self.failed = failed
        lines = "\n".join(f"  {f.describe(environment)}" for f in failed)
        super().__init__(message or (
            f"Cannot promote '{environment}': {len(failed)} blocking audit(s) failed on the data it would serve, so "
            f"nothing was changed.\n{lines}\nFix the model or the audit and materialize these partitions again "
            f"(their audits run again), then promote."))


class ApplyAuditsFailed(AuditsFailed):
    """An apply refused before any view moved: a version it would serve failed a blocking audit.
    One line (a Dagster step's failure, a CLI error and a plan record's note all show it whole),
    naming each model and audit, and what to do; the plan record stays retryable (failed)."""

    def __init__(self, plan_id: str, environment: str, failed: list[FailedAudit]):
        self.plan_id = plan_id
        what = "; ".join(f.describe(environment) for f in failed)
        super().__init__(environment, failed, (
            f"Cannot apply plan {plan_id[:8]} to '{environment}', so no view was moved: {what}. Fix the data or "
            f"the audit, materialize it again (its audits run again), then apply again: `mesh plans apply "
            f"{plan_id[:8]}` (apply_plan_{environment} in Dagster), or a new `mesh plan {environment}` after a "
            f"change."))


def failed_audits(state: State, snapshots: Mapping[str, Snapshot],
                  project_audits: Mapping[str, Audit]) -> list[FailedAudit]:
    """The blocking audits whose holding verdict fails on these snapshots' versions."""
    wanted = {s.name: s for s in snapshots.values() if s.version and s.model.audits}
    if not wanted:
        return []
    held = holding(state.verdicts.history((s.name, s.version or "") for s in wanted.values()))
    out: list[FailedAudit] = []
    for name, snap in sorted(wanted.items()):
        audits = snapshot_audits(snap, project_audits)
        for ref in snap.model.audits:
            if not is_blocking(ref, audits):
                continue
            found = held.get((name, snap.version or "", audit_digest(ref, audits)))
            failing = found.failing() if found is not None else []
            if failing:
                out.append(FailedAudit(name, ref.name, [h.interval for h in failing],
                                       max(h.verdict.failing_rows for h in failing), snap))
    return out


def refuse_failed_audits(state: State, plan: Plan, project_audits: Mapping[str, Audit], judged: Iterable[str], *,
                         applying: bool) -> None:
    """Refuse to let `plan`'s environment serve the versions of the `judged` models whose holding
    blocking verdict failed, whoever recorded it (a Dagster materialization, `mesh run`, an earlier
    apply): the one verdict check of a promotion (`applying=False`: nothing was asked of a plan
    record yet) and of an apply (its record stays retryable)."""
    failed = failed_audits(state, {n: plan.snapshots[n] for n in judged if n in plan.snapshots}, project_audits)
    if failed and applying:
        raise ApplyAuditsFailed(plan.plan_id, plan.environment, failed)
    if failed:
        raise AuditsFailed(plan.environment, failed)
