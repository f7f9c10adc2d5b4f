"""`mesh ui`: the Dagster UI (webserver + daemon) for a project, with one code location per environment.

The workspace and the Dagster instance live in the project's `.mesh/dagster/`, so run history,
schedules and sensor state survive restarts. Nothing here imports dagster: it writes files and
names the command `mesh ui` runs, `dagster dev` under a supervisor (`ui_supervisor`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mesh_dagster.core.snapshot import normalize_environment

LOCATIONS_FILE = "locations.py"
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
    home = project / ".mesh" / "dagster"
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
