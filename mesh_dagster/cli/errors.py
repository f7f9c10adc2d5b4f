"""How a `mesh` command ends when it fails: one line on stderr, a log file, an exit code.

Users see one line naming what failed and where, never a traceback; the traceback goes to a log
file (`.mesh/logs/` in the project, a temp folder otherwise) whose path ends the line, so a bug
report has everything. `--debug` (or `MESH_DEBUG=1`) prints the traceback too.

The `mesh` group does this for every command it runs, sub-groups such as `mesh spark` included,
so no command can forget it: see `MeshGroup`.

The line often quotes user text (SQL, a model name, a setting): control characters in it are shown
as escapes, never obeyed by the terminal, and secrets (tokens, URL passwords) are hidden.
"""

from __future__ import annotations

import functools
import getpass
import os
import platform
import shlex
import sys
import sysconfig
import tempfile
import threading
import traceback
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click

from mesh_dagster.core.config.display import printable
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.errors import MeshError

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
TASK_THREADS = "mesh-task"  # execution/intervals/tasks.py's worker threads
LOG_LIMIT = 20  # log files kept per folder; older ones are deleted
ARGV_KEY = "mesh.argv"

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class MeshGroup(click.Group):
    """The `mesh` group: every failure below it ends as one line (see the module docstring)."""

    def make_context(self, info_name, args, parent=None, **extra):
        # Bad global options fail here, before `invoke` runs.
        argv = list(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as e:
            raise OneLineUsageError(e) from None
        ctx.meta[ARGV_KEY] = argv
        return ctx

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.Abort as e:
            if not isinstance(e.__context__, KeyboardInterrupt):
                raise  # a prompt got no answer (end of input): click says "Aborted!"
            _interrupted(ctx, e.__context__)  # Ctrl-C at a prompt: click turns it into Abort
        except (click.exceptions.Exit, OneLineUsageError, BrokenPipeError):
            raise  # click ends these itself (BrokenPipe: output piped into `head`)
        except click.ClickException as e:
            raise OneLineUsageError(e) from None
        except KeyboardInterrupt as e:
            _interrupted(ctx, e)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line and a log
            ctx.exit(report_failure(exc, _project_dir(ctx), ctx.meta.get(ARGV_KEY, []), _debug(ctx)))


def _interrupted(ctx: click.Context, interrupt: BaseException | None) -> None:
    """Ctrl-C: one line (which model was running, when execution/intervals/tasks.py says so), exit code 130.

    A Python model that never returns keeps its worker thread, and Python waits for every worker
    before a process ends: so with one still running the process ends at once. Its batch was never
    recorded, and the locks were released (or are taken over from a dead holder) on the way here.
    """
    click.echo(printable(str(interrupt or "") or "Interrupted."), err=True)
    if any(t.name.startswith(TASK_THREADS) and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    ctx.exit(EXIT_INTERRUPTED)


class OneLineUsageError(click.ClickException):
    """A bad command line (unknown option, invalid value...) as one line, exit code 1.

    Click prints the usage block and a hint before the message and exits with 2; we keep the
    contract of every other refusal: one line, exit code 1. There is no traceback to log.
    """

    exit_code = EXIT_ERROR

    def __init__(self, original: click.ClickException):
        super().__init__(printable(one_line(original.format_message())))
        ctx = getattr(original, "ctx", None)
        self.help_hint = f" (see '{ctx.command_path} --help')" if ctx is not None and ctx.command_path else ""

    def show(self, file=None) -> None:
        click.echo(f"{click.style('Error:', fg='red')} {self.message}{self.help_hint}", err=True)


def report_failure(exc: BaseException, project_dir: Path | None, argv: list[str], debug: bool) -> int:
    """Print the one line for `exc` (and the traceback with --debug), write the log; exit code."""
    message = printable(redact_text(one_line(failure_message(exc))))
    text = _log_text(exc, argv, message)
    log = write_log(text, project_dir)
    if debug:
        click.echo(text, err=True)
    where = f" (log: {_display_path(log)})" if isinstance(log, Path) else f" (no log written: {log})"
    click.echo(f"{click.style('Error:', fg='red')} {message}{where}", err=True)
    return EXIT_ERROR


def failure_message(exc: BaseException) -> str:
    """What failed and where, for users: our own errors as they are, Spark's first line, and for
    anything else (a bug) the exception and the line of mesh_dagster that raised it."""
    if isinstance(exc, MeshError):
        return str(exc)
    module = type(exc).__module__ or ""
    if module.startswith(("pyspark", "py4j")):
        from mesh_dagster.engine.session import spark_error_message

        return spark_error_message(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"Cannot use '{exc.filename}': {exc.strerror or exc}"
    detail = str(exc) or "no message"
    where, ours = _raised_at(exc)
    if ours:
        return f"Unexpected {type(exc).__name__} at {where}: {detail}. This is a bug in mesh_dagster"
    return f"{type(exc).__name__} at {where}: {detail}"  # e.g. in a project's own Python code


def one_line(text: str) -> str:
    """Messages with line breaks (e.g. from a library) folded onto one line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) or "Unknown error"


def write_log(text: str, project_dir: Path | None) -> Path | str:
    """Write the log into the first writable log folder; its path, or why none could be written."""
    reason = "no writable folder"
    for folder in _log_folders(project_dir):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / _log_name()
            path.write_text(_redact(text), encoding="utf-8")
        except OSError as e:
            reason = f"{folder}: {e.strerror or e}"
            continue
        _prune(folder)
        return path
    return reason


def _log_folders(project_dir: Path | None) -> list[Path]:
    from mesh_dagster.core.config.config import CONFIG_FILES  # the config's schema: for a failure only
    from mesh_dagster.core.config.connections import MESH_DIR

    # Only a project gets `.mesh/logs`: a typo'd `-p` must not sprout folders anywhere.
    folders = []
    if project_dir is not None and any((project_dir / name).is_file() for name in (*CONFIG_FILES, "config.py")):
        folders.append(project_dir / MESH_DIR / "logs")
    folders.append(Path(tempfile.gettempdir()) / f"mesh_dagster-logs-{_user()}")
    return folders


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (containers): the uid still separates users
        return str(os.getuid()) if hasattr(os, "getuid") else "user"


def _log_name() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    return f"mesh-{stamp}-{os.getpid()}.log"


def _prune(folder: Path) -> None:
    """Keep the newest LOG_LIMIT logs (names sort by time)."""
    logs = sorted(folder.glob("mesh-*.log"))
    for old in logs[:-LOG_LIMIT]:
        try:
            old.unlink()
        except OSError:
            pass  # another process pruned it, or it is not ours to delete


def _log_text(exc: BaseException, argv: list[str], message: str) -> str:
    try:
        mesh_version = version("mesh_dagster")
    except PackageNotFoundError:
        mesh_version = "unknown"
    header = [
        f"time: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"command: mesh {shlex.join(argv)}".rstrip(),
        f"cwd: {os.getcwd()}",
        f"mesh_dagster {mesh_version}, Python {platform.python_version()}, {platform.platform()}",
        f"error: {message}",
    ]
    return "\n".join(header) + "\n\n" + "".join(traceback.format_exception(exc))


def _redact(text: str) -> str:
    return redact_text(text)


def _raised_at(exc: BaseException) -> tuple[str, bool]:
    """Where to look (`mesh_dagster/core/x.py:12`, or a project's `macros/m.py:3`), and whether
    it is our code: the innermost frame that is not Python's or an installed library's."""
    frames = traceback.extract_tb(exc.__traceback__)
    relevant = [f for f in frames if _is_ours(f.filename) or not _is_library(f.filename)]
    chosen = relevant or frames
    if not chosen:
        return "an unknown place", False
    frame = chosen[-1]
    if _is_ours(frame.filename):
        return f"{Path(frame.filename).resolve().relative_to(_PACKAGE_ROOT.parent).as_posix()}:{frame.lineno}", True
    return f"{_display_path(Path(frame.filename))}:{frame.lineno}", False


def _is_ours(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(_PACKAGE_ROOT)


def _is_library(filename: str) -> bool:
    path = Path(filename).resolve()
    return filename.startswith("<") or any(path.is_relative_to(root) for root in _library_roots())


@functools.cache
def _library_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple({Path(paths[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths})


def _display_path(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def _project_dir(ctx: click.Context) -> Path | None:
    path = (ctx.obj or {}).get("path") if isinstance(ctx.obj, dict) else None
    try:
        return Path(path).resolve() if path else None
    except OSError:
        return None


def _debug(ctx: click.Context) -> bool:
    return bool(ctx.params.get("debug"))
