"""`mesh git-worker`: the process a pushed commit is planned in, or its approved plan applied (hidden:
`git_plan` and `mesh plans apply` start it, see execution/plans/git_worker.py for why and how).

A command of the `mesh` group, so it ends like every other: a failure is one line on stderr (the
worker's log file) naming a log file with the detail.
"""

from __future__ import annotations

import sys

import click

from mesh_dagster.core.config.memory import for_this_process


@click.command("git-worker", hidden=True)
def git_worker() -> None:
    """Plan a pushed commit (or apply its recorded plan) here, as the request on stdin says (not for people)."""
    from mesh_dagster.context import Context, GitPlanRequest, open_channel  # as cli/project.py does, and why

    for_this_process()
    channel = open_channel()
    request = GitPlanRequest.model_validate_json(sys.stdin.buffer.read())
    context = Context(request.project_dir, request.gateway, state_url=request.state_url, home=request.home,
                      config=request.rules, on_warning=channel.log)
    try:
        context.reviews.work(request, channel)
    finally:
        context.close()
