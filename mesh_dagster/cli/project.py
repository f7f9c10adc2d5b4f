"""The `Context` of the project a command line names (`-p`, `--gateway`): one per invocation,
shared by the command groups so each reaches the project the same way."""

from __future__ import annotations

import click

from mesh_dagster.context import Context


def project_context(ctx: click.Context) -> Context:
    """Built on first use and kept in click's object, so every command group of one invocation
    shares it."""
    obj = ctx.find_object(dict)
    assert obj is not None  # the `mesh` group puts its options there before any command runs
    if "context" not in obj:
        obj["context"] = Context(obj["path"], obj.get("gateway"), on_warning=show_warning)
    return obj["context"]


def show_warning(message: str) -> None:
    """A project warning, on stderr: what a command prints on stdout (SQL, data) stays clean."""
    click.echo(f"{click.style('Warning:', fg='yellow')} {message}", err=True)
