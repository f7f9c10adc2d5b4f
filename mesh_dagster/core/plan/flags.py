"""The plan options as the front doors take them: one description of each, from which the CLI's
`mesh plan` flags (cli/main.py) and the config of Dagster's `plan_<env>` job (dagster/jobs/reviews.py)
are both built, and one reading of their values into `PlanOptions` (`plan_options`).

A flag a Dagster plan job cannot honour (it shows output, asks a question, or applies: the plan
job only records a plan for review) says why in `cli_only`; it is no field of the job's config, so
Dagster refuses it there by name instead of taking it and ignoring it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.config.names import PROD, EnvironmentNameError, normalize_environment
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.time.dates import DateError, to_ms

if TYPE_CHECKING:
    from mesh_dagster.core.plan.options import PlanOptions


class FlagValue(Enum):
    """What a flag takes, which decides its CLI type and its config field."""

    TIME = "time"  # a date or time (`2020-01-01`, `1 week ago`)
    ENVIRONMENT = "environment"  # an environment name
    SWITCH = "switch"  # on or off
    SELECTORS = "selectors"  # model selectors, repeatable
    CATEGORIES = "categories"  # MODEL=CATEGORY, repeatable
    COUNT = "count"  # a whole number, 0 or more


@dataclass(frozen=True)
class PlanFlag:
    """One plan option: its name (the CLI parameter's and the config field's), its CLI spellings,
    what it takes and its help text; `cli_only` says why a Dagster plan job cannot honour it;
    `about_changes`: it shapes the changes a plan makes, so a restatement (which changes no
    model) refuses it."""

    name: str
    spellings: tuple[str, ...]
    value: FlagValue
    help: str
    default: Any = None
    cli_only: str | None = None
    about_changes: bool = False


_LOOK = "the CLI shows it; a Dagster plan job records the plan, its run page shows it"
_APPLY = "a Dagster plan job only records the plan for review; apply_plan_<env> applies it"

PLAN_FLAGS: tuple[PlanFlag, ...] = (
    PlanFlag("start", ("-s", "--start"), FlagValue.TIME,
             "Start of the backfill range (development environments only)."),
    PlanFlag("end", ("-e", "--end"), FlagValue.TIME,
             "End of the backfill range, inclusive for dates (development environments only)."),
    PlanFlag("execution_time", ("--execution-time",), FlagValue.TIME,
             "The 'now' used for intervals and @execution_* macros."),
    PlanFlag("create_from", ("--create-from",), FlagValue.ENVIRONMENT,
             "Environment a new environment starts from.", default=PROD),
    PlanFlag("skip_tests", ("--skip-tests",), FlagValue.SWITCH, "Do not run unit tests before planning.",
             cli_only="a Dagster plan job runs no unit tests"),
    PlanFlag("skip_linter", ("--skip-linter",), FlagValue.SWITCH,
             "Do not run the linter (`linter:` in the config) before planning.",
             cli_only="a Dagster plan job always runs the linter, as its run is the review's record"),
    PlanFlag("skip_backfill", ("--skip-backfill", "--dry-run"), FlagValue.SWITCH,
             "Only update views; compute nothing.", about_changes=True),
    PlanFlag("empty_backfill", ("--empty-backfill",), FlagValue.SWITCH,
             "Record missing intervals as done without computing them.", about_changes=True),
    PlanFlag("include_unmodified", ("--include-unmodified",), FlagValue.SWITCH,
             "Give the environment views for all models, not just changed ones.", about_changes=True),
    PlanFlag("explain", ("--explain",), FlagValue.SWITCH, "Show what applying would do, without applying.",
             cli_only=_LOOK),
    PlanFlag("auto_apply", ("--auto-apply",), FlagValue.SWITCH, "Apply without asking.", cli_only=_APPLY),
    PlanFlag("no_prompts", ("--no-prompts",), FlagValue.SWITCH,
             "Never ask: without --auto-apply the plan is only shown.", cli_only="a Dagster plan job never asks"),
    PlanFlag("no_diff", ("--no-diff",), FlagValue.SWITCH, "Do not show text diffs of changed models.",
             cli_only=_LOOK),
    PlanFlag("forward_only", ("--forward-only",), FlagValue.SWITCH,
             "Keep every changed model's table: migrate its schema, compute only new intervals with the new "
             "logic (development environments preview the change in tables of their own).",
             about_changes=True),
    PlanFlag("effective_from", ("--effective-from",), FlagValue.TIME,
             "With forward-only changes: recompute their intervals from this date once deployed.",
             about_changes=True),
    PlanFlag("allow_destructive_model", ("--allow-destructive-model",), FlagValue.SELECTORS,
             "Allow destructive schema changes (dropped or narrowed columns) of these models' kept tables.",
             about_changes=True),
    PlanFlag("allow_additive_model", ("--allow-additive-model",), FlagValue.SELECTORS,
             "Allow additive schema changes (added or widened columns) of these models' kept tables.",
             about_changes=True),
    PlanFlag("no_auto_categorization", ("--no-auto-categorization",), FlagValue.SWITCH,
             "Ask the category (breaking, non-breaking, forward-only) of every directly modified model.",
             cli_only="a Dagster plan job never asks: give categories with `categorize`"),
    PlanFlag("categorize", ("--categorize",), FlagValue.CATEGORIES,
             "Set a directly modified model's category (breaking, non-breaking or forward-only), for scripts."),
    PlanFlag("restate_model", ("--restate-model", "-r"), FlagValue.SELECTORS,
             "Recompute these models and everything downstream over --start/--end (default: all their "
             "history), as the environment has them; local changes are not part of it.",
             cli_only="Dagster restates with the restate_<env> job"),
    PlanFlag("select_model", ("--select-model",), FlagValue.SELECTORS,
             "Only the selected models' local changes enter the plan; every other model stays as the environment "
             "has it (their children are still indirectly modified). In development environments, also what is "
             "backfilled unless --backfill-model says otherwise.", about_changes=True),
    PlanFlag("backfill_model", ("--backfill-model",), FlagValue.SELECTORS,
             "Development environments only: backfill only the selected models and their upstream; other changed "
             "models are neither computed nor shown in the environment.", about_changes=True),
    PlanFlag("min_intervals", ("--min-intervals",), FlagValue.COUNT,
             "Check at least this many of each model's latest intervals, however late --start is.", default=0,
             about_changes=True),
    PlanFlag("no_gaps", ("--no-gaps",), FlagValue.SWITCH,
             "Refuse the plan if a changed model's new table would lack intervals its current version has.",
             about_changes=True),
)

# The flags a Dagster plan job takes as config (the others are the CLI's only).
JOB_FLAGS: tuple[PlanFlag, ...] = tuple(f for f in PLAN_FLAGS if f.cli_only is None)

# Model selectors -> the model names they choose; errors name the flag (Context.select).
Select = Callable[[Sequence[str], str], set[str]]


def flag_spelling(flag: PlanFlag) -> str:
    """How an error names the flag: its long CLI spelling."""
    return next(s for s in flag.spellings if s.startswith("--"))


def refuse_in_restatement(values: Mapping[str, Any]) -> None:
    """A restatement recomputes what the environment has: options about changes make no sense with it."""
    used = [flag_spelling(f) for f in PLAN_FLAGS if f.about_changes and values.get(f.name)]
    if used:
        raise PlanError(f"--restate-model cannot be combined with {', '.join(used)}: a restatement changes no model")


def checked_value(flag: PlanFlag, value: Any) -> Any:
    """A flag's value as read from config (the CLI's types check it as the command line is read):
    a time or an environment name is checked here, naming the flag."""
    if value is None or flag.value not in (FlagValue.TIME, FlagValue.ENVIRONMENT):
        return value
    try:
        if flag.value is FlagValue.TIME:
            to_ms(value)
            return value
        return normalize_environment(value)
    except (DateError, EnvironmentNameError) as e:
        what = "a date or time" if flag.value is FlagValue.TIME else "an environment name"
        raise PlanError(f"{flag.name} ({flag_spelling(flag)}): '{value}' is not {what}: {e.reason}") from None


def plan_options(values: Mapping[str, Any], select: Select) -> PlanOptions:
    """The `PlanOptions` the flags' values ask for (categories and restatements aside: the front
    door chooses categories, and a restatement is a plan of its own)."""
    from mesh_dagster.core.plan.options import PlanOptions  # the model's modules: `mesh --help` builds flags only

    flags = {f.name: f for f in PLAN_FLAGS}
    given = {name: checked_value(flags[name], value) for name, value in values.items()}

    def chosen(name: str) -> frozenset[str]:
        return frozenset(select(given.get(name) or (), flag_spelling(flags[name])))

    return PlanOptions(
        start=given.get("start"), end=given.get("end"), execution_time=given.get("execution_time"),
        create_from=given.get("create_from") or PROD, include_unmodified=given.get("include_unmodified") or None,
        skip_backfill=bool(given.get("skip_backfill")), empty_backfill=bool(given.get("empty_backfill")),
        forward_only=bool(given.get("forward_only")), effective_from=given.get("effective_from"),
        allow_destructive=chosen("allow_destructive_model"), allow_additive=chosen("allow_additive_model"),
        select_models=tuple(given.get("select_model") or ()), backfill_models=tuple(given.get("backfill_model") or ()),
        min_intervals=given.get("min_intervals") or 0, no_gaps=bool(given.get("no_gaps")))
