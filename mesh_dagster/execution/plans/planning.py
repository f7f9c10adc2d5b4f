"""Making plans for Context: plans, restatements, the project's own snapshots, a recorded plan
rebuilt, and what applying one would do.

Nothing here starts Spark: a plan reads the project and the state store only (`mesh plan` stays
light). The options a plan is made with are one typed `PlanOptions` (core/plan/options.py), the
same object its review record is rebuilt from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.diff_samples import check_no_samples
from mesh_dagster.core.plan.estimate import BackfillEstimate, backfill_work, estimate
from mesh_dagster.core.plan.explanation import Gap, environment_gaps, explain
from mesh_dagster.core.plan.manual_categories import needs_choice, parse_choice
from mesh_dagster.core.plan.options import PlanOptions
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.plan.restatement import build_restatement
from mesh_dagster.core.plan.review import PlanRecord
from mesh_dagster.core.plan.selectors import ModelIndex, select_models
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot
from mesh_dagster.core.time.dates import now_ms, to_end_ms, to_ms
from mesh_dagster.execution.parts import Parts


def select(project: Project, selectors: Sequence[str], flag: str) -> set[str]:
    """The project's models `selectors` choose (core/plan/selectors.py); errors name `flag`."""
    if not selectors:
        return set()
    return select_models(list(selectors), ModelIndex.of_models(project.models, project.dag), flag=flag)


class Planning:
    """Plans of one project against its state store."""

    explain = staticmethod(explain)

    def __init__(self, parts: Parts):
        self.parts = parts

    def plan(self, environment: str = PROD, options: PlanOptions | None = None, **keywords: Any) -> Plan:
        """A plan of `environment` as `options` ask (or its fields as keywords: an unknown one is a
        TypeError); the plan keeps them, and its review record is rebuilt from them."""
        options = PlanOptions.of(options, **keywords)
        project = self.parts.project
        check_no_samples(project.config, ModelIndex.of_models(project.models, project.dag))
        plan = build_plan(project, self.parts.state, environment, options)
        plan.linter = self.parts.linted  # what the front door's lint gate did, for the review
        plan.estimate = self.estimate(plan)
        return plan

    def estimate(self, plan: Plan) -> BackfillEstimate | None:
        """What the plan's backfill would take, from the batches timed so far (None: nothing to backfill)."""
        if not plan.requires_backfill:
            return None
        work = backfill_work(plan.snapshots, plan.backfills)
        names = {w.name for w in work} | {p for w in work for p in w.parents}
        return estimate(work, self.parts.state.timings.history(names))

    def categorized(self, environment: str, options: PlanOptions, texts: Sequence[str]) -> Plan:
        """A plan with the categories `texts` give (`--categorize MODEL=CATEGORY`, the plan job's
        `categorize`) to its directly modified models; naming any other model is refused."""
        choices = self.parse_categories(texts)
        plan = self.plan(environment, options, choices=choices)
        unknown = sorted(set(choices) - set(plan.directly_modified))
        if unknown:
            raise PlanError(f"--categorize names {', '.join(unknown)}, which this plan does not directly modify "
                            f"(directly modified: {', '.join(plan.directly_modified) or 'none'})")
        return plan

    def restate(self, environment: str, models: Sequence[str], *, start: str | None = None,
                end: str | None = None, execution_time: str | int | None = None) -> Plan:
        """A plan recomputing `models` (and everything below them) over `[start, end]` in the
        environment, as the environment has them: local changes are not part of it."""
        execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
        plan = build_restatement(self.parts.state, environment, list(models), start_ms=to_ms(start) if start else None,
                                 end_ms=to_end_ms(end) if end else None, execution_ms=execution_ms)
        plan.options = PlanOptions(restate=tuple(models), start=start, end=end)
        recorded = {s.name: s.identifier for s in plan.snapshots.values()}
        local = self.local_snapshots()
        _capture_restated(plan, local)
        edited = sorted(n for n, s in local.items() if recorded.get(n, s.identifier) != s.identifier)
        if edited:
            plan.warnings.append(f"Local changes to {', '.join(edited[:5])}{'...' if len(edited) > 5 else ''} are not "
                                 f"part of this restatement: it recomputes what '{plan.environment}' has")
        return plan

    def rebuild(self, record: PlanRecord) -> Plan:
        """The recorded plan, built again from the project and state as they are now, from the
        options it was recorded with (at its recorded execution time)."""
        options = record.plan_options
        when = record.summary.execution_time
        if options.restate:
            return self.restate(record.environment, options.restate, start=options.start, end=options.end,
                                execution_time=when)
        return self.plan(record.environment, options.rebuilding(when))

    def local_snapshots(self) -> dict[str, Snapshot]:
        """The project's snapshots, categorised against prod (or fresh) so they have versions."""
        if self.parts.state.environments.get_environment(PROD) is not None:
            return self.plan(PROD, PlanOptions(allow_empty=True)).snapshots
        snaps = build_snapshots(self.parts.project)
        for s in snaps.values():
            s.categorize(ChangeCategory.BREAKING, None)
        return snaps

    def parse_categories(self, texts: Sequence[str]) -> dict[str, ChangeCategory]:
        """`--categorize MODEL=CATEGORY` values, by model name."""
        return {self.parts.project.model_name(name): category for name, category in map(parse_choice, texts)}

    def categories_to_choose(self, plan: Plan, ask_all: bool = False) -> list[str]:
        """Directly modified models whose category the user chooses (see core/plan/manual_categories.py)."""
        return needs_choice(plan, self.parts.project.config.plan.auto_categorize_changes, ask_all=ask_all)

    def gaps(self, environment: str) -> list[Gap]:
        """Intervals the environment's current snapshots still miss (what promotion waits for)."""
        return environment_gaps(self.plan(environment, PlanOptions(allow_empty=True)))


def _capture_restated(plan: Plan, local: dict[str, Snapshot]) -> None:
    """A restatement evaluates stored snapshots from what they captured. One stored before captures
    existed is captured from the project only while the project still defines it exactly (same
    fingerprint); otherwise restating it would run code nobody planned, so it is refused."""
    for name in plan.backfills:
        stored, mine = plan.snapshots[name], local.get(name)
        if stored.capture is not None:
            continue
        if mine is None or mine.identifier != stored.identifier or mine.capture is None:
            raise PlanError(f"Cannot restate {name}: '{plan.environment}' holds it as planned by an earlier "
                            f"mesh_dagster, which did not capture its macros, variables and seed content, and the "
                            f"project defines it differently now. Run `mesh plan {plan.environment}` first (it "
                            "captures them), then restate.")
        plan.snapshots[name] = stored.model_copy(update={"capture": mine.capture})
        plan.recaptured.append(plan.snapshots[name])
