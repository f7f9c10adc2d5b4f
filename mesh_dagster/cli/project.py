"""The `Context` of the project a command line names (`-p`, `--gateway`): one per invocation,
shared by the command groups so each reaches the project the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from mesh_dagster.core.config.memory import for_this_process

if TYPE_CHECKING:
    from mesh_dagster.context import Context


def project_context(ctx: click.Context) -> Context:
    """Built on first use and kept in click's object, so every command group of one invocation
    shares it.

    Context's modules (the project's schema, its loading and planning, the state store) are imported
    here, by the commands that use a project: `mesh --help`, `mesh init` and a bad command line
    never load them. What is alive once they are is then left out of garbage collections for the
    rest of the command (core/config/memory.py)."""
    obj = ctx.find_object(dict)
    assert obj is not None  # the `mesh` group puts its options there before any command runs
    if "context" not in obj:
        from mesh_dagster.context import Context  # see the docstring

        for_this_process()
        obj["context"] = Context(obj["path"], obj.get("gateway"), on_warning=show_warning, repos=obj.get("repos", ()))
    return obj["context"]


def show_warning(message: str) -> None:
    """A project warning, on stderr: what a command prints on stdout (SQL, data) stays clean."""
    click.echo(f"{click.style('Warning:', fg='yellow')} {message}", err=True)
