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
    """The project's warm local Spark server (Spark Connect on 127.0.0.1).

    On a local master with the embedded metastore, every command that needs Spark goes through
    this server: the first one starts it, later ones find it warm, and Dagster's processes share
    it. It stops by itself after `server.idle_minutes` (default 30) without a client, and restarts
    when PySpark, mesh_dagster, Java or the Spark settings changed. `server.enabled: false` in the
    gateway's connection, or MESH_SPARK_SERVER=0, runs Spark in each command's own process instead.
    """


@spark.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port to listen on (default: any free port).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=120, show_default=True,
              help="Seconds to wait for the server to answer.")
@click.pass_context
def start(ctx: click.Context, port: int | None, timeout_s: float) -> None:
    """Start the warm server (if it is not running) and print its URL."""
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
    """Stop the warm server now (the next command that needs Spark starts it again)."""
    if project_context(ctx).stop_spark_server():
        click.echo("Stopped the Spark Connect server.")
    else:
        click.echo("No Spark Connect server is running for this project.")


@spark.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """Show whether the warm server runs: its URL, pid, uptime, clients, idle time left and log.
    Exit code 1 when it does not."""
    context = project_context(ctx)
    info = context.spark_server()
    if info is None:
        click.echo("No Spark Connect server is running for this project.")
        ctx.exit(1)
    click.echo(f"Running: {info.url}")
    click.echo(f"pid {info.pid}, master {info.master}, up {_duration(max(0, now_ms() - info.started_ts) / 1000)}")
    click.echo(_use(*context.spark_server_use(info), info.idle_s))
    click.echo(_token_note(context.spark_server_record))
    click.echo(f"log {info.log_path}")


def _use(connected: int, left_s: float | None, idle_s: float | None) -> str:
    if connected:
        return f"in use: {connected} client{'s' if connected > 1 else ''} connected"
    if left_s is None or idle_s is None:
        return "idle; it does not stop by itself"
    return f"idle: stops by itself in {_duration(left_s)} (after {_duration(idle_s)} without a client)"


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def _token_note(record: Path) -> str:
    return f"token: set, in {record} (readable by you only)"
