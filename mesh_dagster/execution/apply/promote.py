"""Promoting an environment whose data is complete: a virtual update through the plan apply.

Promotion builds the plan `mesh plan <env>` would build and applies it with the same code, but
only when the plan has nothing left to compute — every model's current version already holds
every interval (filled by Dagster partition materializations, `mesh run` or an earlier apply) —
and no blocking audit's verdict on that data is a failure (execution/evaluate/verdicts.py: an audit edited
since the data was built must have run again, and passed). Otherwise it refuses, listing the gaps
or the failed audits, and nothing moves.
"""

from __future__ import annotations

from collections.abc import Callable

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.names import normalize_environment
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.explanation import Gap, environment_gaps
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.plan.review import ProtectionError
from mesh_dagster.core.project.project import Project
from mesh_dagster.execution.apply.apply import apply_locked, environment_held
from mesh_dagster.execution.evaluate.verdicts import refuse_failed_audits
from mesh_dagster.execution.events import ApplyListener
from mesh_dagster.execution.ports import Engine, State


class PromotionRefused(PlanError):
    """The environment still has missing intervals: promoting would show incomplete data."""

    def __init__(self, environment: str, gaps: list[Gap]):
        self.environment = environment
        self.gaps = gaps
        lines = "\n".join(f"  {g.view}: {g.describe()}" for g in gaps)
        super().__init__(
            f"Cannot promote '{environment}': {len(gaps)} model(s) miss intervals for their current version, "
            f"so nothing was changed.\n{lines}\n"
            f"Materialize these partitions (or run `mesh plan {environment}`), then promote again."
        )


Track = Callable[[Plan, Callable[[Plan], None]], object]


def promote_environment(project: Project, state: State, engine_factory: Callable[[], Engine], environment: str,
                        listener: ApplyListener | None = None, track: Track | None = None) -> Plan:
    """Swap `environment`'s views to the current snapshots if none of them has a gap.

    `track(plan, apply)` runs the apply as the run of a plan record (Context records every plan it
    applies). A protected environment is never promoted this way: it takes an approved plan.

    The plan is built while holding the environment's lock: a promotion that waited for another
    one to finish plans against what that one did, and finds nothing left to do instead of
    failing on a stale plan. An environment whose last apply stopped before it was finalized is
    re-applied even without changes, which repairs its views.
    """
    listener = listener or ApplyListener()
    with environment_held(state, normalize_environment(environment)) as lease:  # `track` runs under it too
        plan = build_plan(project, state, environment)
        # Audits with no table of their own (standalone audits, external models' audits) are no gap:
        # nothing materializes them (they are no Dagster asset); the apply below runs them.
        gaps = [g for g in environment_gaps(plan) if not plan.snapshots[g.name].model.kind.is_symbolic]
        if gaps:
            raise PromotionRefused(plan.environment, gaps)
        refuse_failed_audits(state, plan, project.audits, plan.snapshots, applying=False)
        if not plan.needs_apply:
            listener.log(f"Environment '{plan.environment}' is up to date: nothing to promote")
            return plan
        refuse_unreviewed(project.config, plan)
        (track or _untracked)(plan, lambda p: apply_locked(p, project, state, engine_factory(), listener, lease=lease))
    return plan


def _untracked(plan: Plan, apply: Callable[[Plan], None]) -> None:
    apply(plan)


def refuse_unreviewed(config: ProjectConfig, plan: Plan) -> None:
    """A plan for a protected environment is applied only as an approved record."""
    protection = config.protection(plan.environment)
    if protection is not None:
        raise ProtectionError(f"'{plan.environment}' is a protected environment: its plans are applied once approved "
                              f"(`mesh plans approve {plan.plan_id[:8]}` by one of "
                              f"{', '.join(protection.approvers) or 'its approvers'}, then "
                              f"`mesh plans apply {plan.plan_id[:8]}`)")
