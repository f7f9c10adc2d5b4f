"""`mesh plans ...`: the recorded plans, their review and their apply (execution/plans/records.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click
from rich.table import Table
from rich.text import Text

from mesh_dagster.cli.console import console
from mesh_dagster.cli.params import ENVIRONMENT
from mesh_dagster.cli.project import project_context
from mesh_dagster.core.config.display import printable, printable_line

if TYPE_CHECKING:  # the record's module is the plan's: imported by the commands that read records
    from mesh_dagster.core.plan.review import PlanRecord

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
    r = project_context(ctx).reviews.records.find(plan_id)
    click.echo(printable_line(f"Plan {r.plan_id} for '{r.environment}': {r.status.value}"))
    click.echo(printable_line(f"Made by {r.author} on {_when(r.created_ts)}" + (
        f" from {r.git_branch or 'a detached checkout'} at {r.git_commit}" if r.git_commit else "")))
    click.echo(printable(r.summary.markdown(r.environment, data=False)))
    show_data_diffs(r)
    click.echo("\nHistory:")
    for e in r.events:
        note = f": {e.note}" if e.note else ""
        click.echo("  " + printable_line(f"{_when(e.ts)}  {e.action:<10} {e.actor}{note}"))


def show_data_diffs(record: PlanRecord) -> None:
    """The data diff as tables: one line per model, then each model's changed columns and rows."""
    summary = record.summary
    if not summary.data_diffs:
        if summary.data_diff_pending:
            click.echo(f"\nData diff: pending for {', '.join(map(printable_line, summary.data_diff_pending))} "
                       "(computed once the apply has built the new tables).")
        return
    click.echo()
    table = Table(title=_text(summary.data_diff_title()), title_justify="left")
    for heading in ("Model", "Grain", "Old rows", "New rows", "Only new", "Only old", "Changed", "Unchanged", "Note"):
        table.add_column(heading, justify="left" if heading in ("Model", "Grain", "Note") else "right")
    for d in summary.data_diffs.values():
        table.add_row(_text(d.model), _text(", ".join(d.grain) or "none"),
                      *(_count(n) for n in (d.old_rows, d.new_rows, d.only_new, d.only_old, d.changed, d.unchanged)),
                      _text(d.note_text()))
    console.print(table)
    for d in summary.data_diffs.values():
        changed = {c: n for c, n in d.column_changes.items() if n}
        if changed or d.columns_added or d.columns_removed:
            console.print(_text(f"{d.model}: " + "; ".join(
                [f"{c} changed in {n:,} rows" for c, n in changed.items()]
                + [f"added {', '.join(d.columns_added)}"] * bool(d.columns_added)
                + [f"removed {', '.join(d.columns_removed)}"] * bool(d.columns_removed))))
        if d.sample:
            rows = Table(title=_text(f"{d.model}: differing rows"), title_justify="left")
            for c in d.sample_columns:
                rows.add_column(_text(c))
            for row in d.sample:
                rows.add_row(*(_text(v) for v in row))
            console.print(rows)


def _text(value: str) -> Text:
    """User text (names, values) for rich: printable, and never read as markup."""
    return Text(printable_line(value))


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


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
    from mesh_dagster.cli.progress import ConsoleListener  # Context's listener: for commands that apply or run

    listener = ConsoleListener()
    try:
        record = project_context(ctx).reviews.apply_recorded(plan_id, listener)
    finally:
        listener.close()
    resumed = len(record.events) > 1 and record.events[-2].action == "resume"
    click.echo(f"Plan {record.plan_id[:8]} applied to '{record.environment}'"
               + (" (resumed: its earlier apply was killed)." if resumed else "."))
