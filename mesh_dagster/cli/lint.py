"""`mesh lint`, and the linter run `mesh plan` makes before planning (core/project/linter.py).

A violation of a rule of `linter.rules` is an error: listed as `file:line: rule: message`, it stops
the plan before anything is planned or written; one of `linter.warn_rules` is printed as a warning.
Context decides (`Context.lint_gate`, which Dagster's jobs call too); this module only prints.
"""

from __future__ import annotations

import click

from mesh_dagster.cli.console import console
from mesh_dagster.cli.params import selector_option
from mesh_dagster.cli.project import project_context
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.errors import MeshError


def show_lint_report(report) -> None:
    """Warnings in yellow, errors in red, one violation per line, on stderr."""
    for finding in report.findings:
        label = click.style("Linter error:", fg="red") if finding.error else click.style("Linter warning:",
                                                                                         fg="yellow")
        click.echo(f"{label} {printable(str(finding))}", err=True)


def lint_gate(context) -> None:
    """Lint the project and print every finding; an error stops the plan (Context's LinterErrors,
    naming --skip-linter), before anything is planned."""
    from mesh_dagster.context import LinterErrors  # Context's modules: imported by the commands that use them

    try:
        report = context.lint_gate("--skip-linter")
    except LinterErrors as e:
        show_lint_report(e.report)
        raise
    show_lint_report(report)


@click.command("lint")
@selector_option("--model", help="Only lint these models (selectors, as --select-model takes them).")
@click.pass_context
def lint(ctx, model) -> None:
    """Run the linter (`linter:` in the config) over the project's models: errors fail the command."""
    context = project_context(ctx)
    report = context.lint(list(model) or None)
    if not report.enabled:
        console.print("The linter is off (`linter: {enabled: true}` in the config turns it on): nothing checked.")
        return
    show_lint_report(report)
    if not report.ok:
        raise MeshError(f"Linter found {len(report.errors)} error(s) and {len(report.warnings)} warning(s)")
    console.print(f"Linter: no errors, {len(report.warnings)} warning(s).")
