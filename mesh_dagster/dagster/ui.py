"""`mesh ui`: the Dagster UI (webserver + daemon) for a project, with one code location per environment.

The workspace and the Dagster instance live in the project's `.mesh/dagster/`, so run history,
schedules and sensor state survive restarts. Nothing here imports dagster: it writes files and
names the command `mesh ui` runs, `dagster dev` under a supervisor (`ui_supervisor`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.snapshot import normalize_environment

LOCATIONS_FILE = "locations.py"
LOCK_FILE = "ui.lock"
INSTANCE_CONFIG = """# Written by `mesh ui`: the Dagster instance of this project (see Dagster's dagster.yaml docs).
telemetry:
  enabled: false
concurrency:
  pools:
    # each environment's promote op sits in the pool `mesh_promote_<env>`: one promotion at a time
    default_limit: 1
    granularity: op
"""


def dev_environment() -> str:
    return os.environ.get("MESH_DEV_ENVIRONMENT", "dev")


def write_workspace(project_dir: str | Path, environments: list[str]) -> Path:
    """`.mesh/dagster/workspace.yaml` loading the project once per environment; returns its path."""
    project = Path(project_dir).resolve()
    home = ui_home(project)
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(INSTANCE_CONFIG)
    envs = list(dict.fromkeys(normalize_environment(e) for e in environments))
    functions = "\n\n".join(
        f"def env_{env}():\n    return definitions(PROJECT, {env!r})\n" for env in envs
    )
    (home / LOCATIONS_FILE).write_text(
        '"""Written by `mesh ui`: one Dagster code location per environment."""\n\n'
        "from mesh_dagster.dagster import definitions\n\n"
        f"PROJECT = {str(project)!r}\n\n\n{functions}"
    )
    entries = "".join(
        f"  - python_file:\n"
        f"      relative_path: {LOCATIONS_FILE}\n"
        f"      attribute: env_{env}\n"
        f"      location_name: {_location(project, env)}\n"
        f"      working_directory: {project}\n"
        for env in envs
    )
    workspace = home / "workspace.yaml"
    workspace.write_text(f"# Written by `mesh ui`.\nload_from:\n{entries}")
    return workspace


def _location(project: Path, environment: str) -> str:
    return f"{project.name}_{environment}".replace("-", "_")


def dagster_dev_command(workspace: Path, host: str, port: int) -> list[str]:
    """What `mesh ui` runs: `dagster dev` under our supervisor, which makes Ctrl-C and SIGTERM stop
    every process Dagster starts, runs included (see `ui_supervisor`)."""
    return [sys.executable, "-m", "mesh_dagster.dagster.ui_supervisor", str(workspace), host, str(port)]


def dagster_dev_args(workspace: Path, host: str, port: int) -> list[str]:
    """`dagster dev` itself, as the supervisor starts it."""
    return [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", host, "-p", str(port)]


def dagster_env(workspace: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(workspace.parent)}


def ui_home(project_dir: str | Path) -> Path:
    """The project's Dagster instance and workspace folder."""
    return Path(project_dir).resolve() / ".mesh" / "dagster"


class UiAlreadyRunning(MeshError):
    """Another `mesh ui` serves this project."""


@contextlib.contextmanager
def only_ui(dagster_home: Path) -> Iterator[None]:
    """One `mesh ui` per project: a second would run every schedule and sensor twice, and stopping
    either would cancel the other's runs.

    An flock (`filelock.FileLock`) on `ui.lock`: the kernel drops it when its process dies, however
    it dies, so a killed `mesh ui` leaves nothing stale. The holder writes its pid into the file for
    the refusal message; a contender only reads it (filelock never truncates a file it did not lock).
    """
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / LOCK_FILE
    # fallback_to_soft=False: on a filesystem without flock, fail rather than leave a marker a crash
    # would leave behind for good.
    lock = FileLock(path, blocking=False, fallback_to_soft=False, on_acquired=_write_pid)
    try:
        lock.acquire()
    except Timeout:
        raise UiAlreadyRunning(
            f"`mesh ui` already runs for this project (pid {_holder(path)}, instance {dagster_home}): use its "
            f"webserver, or stop it (Ctrl-C) before starting another."
        ) from None
    try:
        yield
    finally:
        lock.release()


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def check_ui_free(dagster_home: Path) -> None:
    """Refuse early (before printing where the UI will be) when another `mesh ui` holds the lock."""
    with only_ui(dagster_home):
        pass
