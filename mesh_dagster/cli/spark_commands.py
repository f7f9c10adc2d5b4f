"""`mesh spark start|stop|status`: the project's shared local Spark Connect server.

Registered by `cli/main.py` with `cli.add_command(spark)`, whose group turns any failure into one
line and a log file (`cli/errors.py`). The commands never start an embedded session: `start`
only launches the server, the others only read `.mesh/connect.json`.

They never print the server's token: terminal output ends up in scrollback, CI logs and bug
reports, and the token is all another account of the machine needs to run SQL as this user. They
say where it is instead (`connect.json`, readable by its owner only); the project's own processes
read it from there.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from mesh_dagster.cli.project import project_context
from mesh_dagster.core.time.dates import now_ms


@click.group()
def spark() -> None:
    """The project's shared local Spark server (Spark Connect on 127.0.0.1).

    The embedded Spark of a local project admits one process at a time. When several must reach
    the warehouse at once (Dagster's webserver, daemon and runs, and `mesh` commands beside them),
    they share this server: every process of the project connects to it while it runs.
    """


@spark.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port to listen on (default: any free port).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=120, show_default=True,
              help="Seconds to wait for the server to answer.")
@click.pass_context
def start(ctx: click.Context, port: int | None, timeout_s: float) -> None:
    """Start the shared server (if it is not running) and print its URL."""
    context = project_context(ctx)
    running = context.spark_server()
    started = time.monotonic()
    info = running or context.start_spark_server(port=port, timeout_s=timeout_s)
    if running is None:
        click.echo(f"Started the Spark Connect server (pid {info.pid}) in {time.monotonic() - started:.1f} s.")
    else:
        click.echo(f"The Spark Connect server is already running (pid {info.pid}).")
    click.echo(info.url)
    click.echo(_token_note(context.spark_server_record))


@spark.command()
@click.pass_context
def stop(ctx: click.Context) -> None:
    """Stop the shared server; the project's processes go back to embedded Spark."""
    if project_context(ctx).stop_spark_server():
        click.echo("Stopped the Spark Connect server.")
    else:
        click.echo("No Spark Connect server is running for this project.")


@spark.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """Show whether the shared server runs, its URL, pid, uptime and log. Exit code 1 when it does not."""
    context = project_context(ctx)
    info = context.spark_server()
    if info is None:
        click.echo("No Spark Connect server is running for this project.")
        ctx.exit(1)
    uptime_s = max(0, now_ms() - info.started_ts) // 1000
    click.echo(f"Running: {info.url}")
    click.echo(
        f"pid {info.pid}, master {info.master}, up {uptime_s // 3600}h{uptime_s % 3600 // 60:02d}m{uptime_s % 60:02d}s"
    )
    click.echo(_token_note(context.spark_server_record))
    click.echo(f"log {info.log_path}")


def _token_note(record: Path) -> str:
    return f"token: set, in {record} (readable by you only)"
