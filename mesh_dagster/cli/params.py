"""Command-line values checked when the command line is read, so the error names the option.

A bad `--start` used to surface as a traceback deep in planning; as a click parameter type it is
one line naming the option, the value and what is accepted, before any file is read.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from mesh_dagster.core.config.names import EnvironmentNameError, environment_spelling_notice, normalize_environment
from mesh_dagster.core.plan.flags import PLAN_FLAGS, FlagValue, PlanFlag
from mesh_dagster.core.time.dates import DateError, to_ms


class TimeParam(click.ParamType):
    """A point in time (`2020-01-01`, `1 week ago`, epoch ms...). The text is passed on as typed:
    relative times are resolved by the command against its own `now`, and a date-only end
    names its whole day, which only the text tells."""

    name = "time"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        try:
            to_ms(value)
        except DateError as e:
            self.fail(f"'{value}' is not a date or time: {e.reason}", param, ctx)
        return value


class EnvironmentParam(click.ParamType):
    """An environment name, normalised (`my-env` -> `my_env`, with a warning), or refused."""

    name = "environment"

    def convert(self, value, param, ctx):
        try:
            return environment_name(value)
        except EnvironmentNameError as e:
            self.fail(f"'{value}' is not an environment name: {e.reason}", param, ctx)


def environment_name(value: str) -> str:
    """The name `value` stands for; warns on stderr when it differs from what was typed."""
    notice = environment_spelling_notice(value)
    if notice is not None:
        click.echo(f"{click.style('Warning:', fg='yellow')} {notice}", err=True)
    return normalize_environment(value)


TIME = TimeParam()
ENVIRONMENT = EnvironmentParam()

SELECTOR_SYNTAX = (
    "SELECTOR: schema.model (or model), wildcards (schema.*_model), tag:NAME (tag:fin*), +SELECTOR "
    "(with its upstream), SELECTOR+ (with its downstream), combined with & (and), | (or), ^ (not) and "
    "parentheses. Repeat the option for a union."
)


def selector_option(*param_decls: str, help: str):
    """A repeatable option taking model selectors (core/plan/selectors.py): its help ends with the
    selector syntax, so every flag that takes selectors explains them the same way. The command
    evaluates them (`core.selectors.select_models`), naming the flag in its errors."""
    return click.option(*param_decls, multiple=True, metavar="SELECTOR", help=f"{help} {SELECTOR_SYNTAX}")


def flag_option(flag: PlanFlag) -> Callable:
    """The click option of one plan flag (core/plan/flags.py: the Dagster plan job's config is built
    from the same description)."""
    decls = (*flag.spellings, flag.name)
    if flag.value is FlagValue.SELECTORS:
        return selector_option(*decls, help=flag.help)
    if flag.value is FlagValue.SWITCH:
        return click.option(*decls, is_flag=True, help=flag.help)
    if flag.value is FlagValue.CATEGORIES:
        return click.option(*decls, multiple=True, metavar="MODEL=CATEGORY", help=flag.help)
    if flag.value is FlagValue.COUNT:
        return click.option(*decls, type=click.IntRange(min=0), default=flag.default, show_default=True, help=flag.help)
    kind = TIME if flag.value is FlagValue.TIME else ENVIRONMENT
    shown = {"default": flag.default, "show_default": True} if flag.default is not None else {}
    return click.option(*decls, type=kind, help=flag.help, **shown)


def plan_flags(command: Callable) -> Callable:
    """Every plan flag as an option of `command`, in the description's order."""
    for flag in reversed(PLAN_FLAGS):
        command = flag_option(flag)(command)
    return command
