"""`mesh plans ...`: the recorded plans, their review and their apply (execution/reviews.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from mesh_dagster.cli.console import ConsoleListener
from mesh_dagster.cli.params import ENVIRONMENT
from mesh_dagster.cli.project import project_context
from mesh_dagster.core.config.display import printable, printable_line

STATUSES = ("pending", "approved", "running", "completed", "failed", "rejected", "cancelled", "superseded")


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


@click.group()
def plans() -> None:
    """Recorded plans: list, show, approve, reject, apply, cancel."""


@plans.command("list")
@click.option("-e", "--environment", type=ENVIRONMENT, help="Only this environment's plans.")
@click.option("--status", type=click.Choice(STATUSES), multiple=True, help="Only plans with this status (repeatable).")
@click.option("-n", "--limit", default=20, show_default=True, type=click.IntRange(1, 1000),
              help="How many, newest first.")
@click.pass_context
def list_plans(ctx, environment, status, limit) -> None:
    """The latest plans, newest first."""
    records = project_context(ctx).plan_records(environment, list(status) or None, limit)
    if not records:
        click.echo("No plans recorded.")
        return
    for r in records:
        changes = len(r.summary.changes)
        git = f" {r.git_branch or ''}@{r.git_commit[:8]}" if r.git_commit else ""
        click.echo(printable_line(f"{r.plan_id[:8]}  {_when(r.created_ts)}  {r.environment:<16} "
                                  f"{r.status.value:<10} {r.author}{git}  {changes} change(s)"))


@plans.command()
@click.argument("plan_id")
@click.pass_context
def show(ctx, plan_id) -> None:
    """A plan's summary (changes, categories, diffs, backfill) and its history.

    All of it is user text shown for review: control characters are shown as escapes, never sent
    to the terminal (the summary's Markdown is already made so, core/plan/review.py)."""
    r = project_context(ctx).plan_record(plan_id)
    click.echo(printable_line(f"Plan {r.plan_id} for '{r.environment}': {r.status.value}"))
    click.echo(printable_line(f"Made by {r.author} on {_when(r.created_ts)}" + (
        f" from {r.git_branch or 'a detached checkout'} at {r.git_commit}" if r.git_commit else "")))
    click.echo(printable(r.summary.markdown(r.environment)))
    click.echo("\nHistory:")
    for e in r.events:
        note = f": {e.note}" if e.note else ""
        click.echo("  " + printable_line(f"{_when(e.ts)}  {e.action:<10} {e.actor}{note}"))


def _decision(action: str, done: str, help_text: str) -> click.Command:
    @click.argument("plan_id")
    @click.option("-m", "--note", help="Why, for the plan's history.")
    @click.pass_context
    def command(ctx, plan_id, note) -> None:
        record = project_context(ctx).decide(plan_id, action, note)
        click.echo(f"Plan {record.plan_id[:8]} {done} by {record.events[-1].actor}.")

    command.__doc__ = help_text
    return plans.command(action)(command)


_decision("approve", "approved", "Approve a pending plan of a protected environment (as one of its approvers).")
_decision("reject", "rejected", "Reject a pending or approved plan of a protected environment.")
_decision("cancel", "cancelled", "Cancel a plan that has not run (or failed, or whose apply was killed), so it "
                                  "can never be applied.")


@plans.command("apply")
@click.argument("plan_id")
@click.pass_context
def apply_plan(ctx, plan_id) -> None:
    """Apply a recorded plan: approved (protected environments) and still exactly what was reviewed.

    A plan whose apply was killed (still `running`, its process gone) is resumed: the apply picks up
    from what is missing."""
    listener = ConsoleListener()
    try:
        record = project_context(ctx).apply_recorded(plan_id, listener)
    finally:
        listener.close()
    resumed = len(record.events) > 1 and record.events[-2].action == "resume"
    click.echo(f"Plan {record.plan_id[:8]} applied to '{record.environment}'"
               + (" (resumed: its earlier apply was killed)." if resumed else "."))
