"""`mesh ui`: the Dagster UI (webserver + daemon) for a project, with one code location per environment.

The workspace and the Dagster instance live in the project's `.mesh/dagster/`, so run history,
schedules and sensor state survive restarts. This module writes files and names the command `mesh
ui` runs, `dagster dev` under a supervisor (`ui_supervisor`); the environment variables it sets for
Dagster are undocumented ones, named in compat.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import psycopg
import yaml

from mesh_dagster.context import Context, ProjectConfig
from mesh_dagster.core.config.config import DagsterStorageConfig
from mesh_dagster.core.config.names import normalize_environment
from mesh_dagster.core.errors import MeshError
from mesh_dagster.dagster.compat import EVENT_BATCH_SIZE_ENV, PLANNED_EVENTS_PER_RUN
from mesh_dagster.dagster.mapping.pending import ui_home
from mesh_dagster.dagster.ui.pushed_python import location_variables, write_python

LOCATIONS_FILE = "locations.py"
INSTANCE_CONFIG = """# Written by `mesh ui`: the Dagster instance of this project (see Dagster's dagster.yaml docs).
# Rewritten at every start from config.yaml (its `dagster:` section): change that instead.
telemetry:
  enabled: false
nux:
  enabled: false  # no "join the community" dialog over the UI
concurrency:
  pools:
    # each environment's promote op sits in the pool `mesh_promote_<env>`: one promotion at a time
    default_limit: 1
    granularity: op
run_queue:
  # the daemon looks for launched runs every second (Dagster's default: 5): a run starts at once
  dequeue_interval_seconds: 1
"""


def dev_environment() -> str:
    return os.environ.get("MESH_DEV_ENVIRONMENT", "dev")


# SQLAlchemy 2.1 reads `postgresql://` as psycopg 3, whose server-side parameters break
# dagster-postgres (`NOTIFY run_events, $1` is a syntax error): name the driver it is written for.
POSTGRES_SCHEME = "postgresql+psycopg2"
# Dagster's own tables: a database holding other tables but not these is not a Dagster instance.
DAGSTER_TABLES = frozenset({"runs", "event_logs", "alembic_version"})


# The embedded SQLite event log, writing a batch of a run's materializations in one statement per
# file (dagster/compat.py; the stock storage when Dagster no longer has what it needs).
SQLITE_EVENT_LOG = """# the event log: Dagster's SQLite files, written in batches (mesh_dagster/dagster/compat.py)
event_log_storage:
  module: mesh_dagster.dagster.compat
  class: BatchingSqliteEventLogStorage
  config:
    base_dir: {base_dir}
"""
EVENT_BATCH_SIZE = 500  # SQLite allows ~32,000 values per statement; a materialization's row and tags take ~50


def instance_config(storage: DagsterStorageConfig | None = None, home: Path | None = None) -> str:
    """The dagster.yaml of `mesh ui`'s instance: SQLite files beside it (Dagster's default, the event
    log written in batches), or the Postgres database of config.yaml's `dagster.storage` for runs,
    the event log and schedules."""
    if storage is None or storage.type == "sqlite":
        if home is None:
            return INSTANCE_CONFIG
        return INSTANCE_CONFIG + SQLITE_EVENT_LOG.format(base_dir=json.dumps(str(home / "history" / "runs")))
    db: dict = {"hostname": storage.host, "port": storage.port, "username": storage.user}
    if storage.password_env:
        db["password"] = {"env": storage.password_env}  # Dagster reads it at start: no secret on disk
    db.update({"db_name": storage.database, "scheme": POSTGRES_SCHEME})
    section = yaml.safe_dump({"storage": {"postgres": {"postgres_db": db}}}, sort_keys=False)
    return (f"{INSTANCE_CONFIG}# runs, event log and schedules: config.yaml `dagster.storage` (Postgres)\n{section}")


def write_instance(home: Path, storage: DagsterStorageConfig | None = None) -> Path:
    """`.mesh/dagster/dagster.yaml`, rewritten from config.yaml at every `mesh ui`."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    path.write_text(instance_config(storage, home))
    return path


class DagsterInstanceError(MeshError):
    """The Dagster instance's database cannot serve `mesh ui`."""


def check_instance_database(storage: DagsterStorageConfig, home: Path) -> None:
    """Refuse, in one line, a Postgres instance database `dagster dev` would fail on with a
    traceback: unreachable, missing, or holding another application's tables. An empty database is
    fine: Dagster creates its schema there on first start."""
    if storage.type != "postgres":
        return
    where = f"{storage.host}:{storage.port}"
    if importlib.util.find_spec("dagster_postgres") is None:
        raise DagsterInstanceError("config.yaml `dagster.storage` is postgres but dagster-postgres is not installed: "
                                   "pip install dagster-postgres==0.29.27")
    password = os.environ.get(storage.password_env) if storage.password_env else None
    if storage.password_env and password is None:
        raise DagsterInstanceError(f"config.yaml `dagster.storage.password_env` names {storage.password_env}, which "
                                   "is not set in this environment")
    try:
        with psycopg.connect(host=storage.host, port=storage.port, dbname=storage.database, user=storage.user,
                             password=password, connect_timeout=5) as conn:
            tables = {row[0] for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
    except psycopg.OperationalError as e:
        reason = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        reason = reason.split(": FATAL:", 1)[-1].strip() if "FATAL" in reason else reason
        raise DagsterInstanceError(f"Cannot open the Dagster instance database '{storage.database}' on {where} "
                                   f"(config.yaml `dagster.storage`): {reason}") from None
    if tables and not DAGSTER_TABLES <= tables:
        raise DagsterInstanceError(
            f"Database '{storage.database}' on {where} holds tables but not Dagster's schema (no "
            f"{', '.join(sorted(DAGSTER_TABLES - tables))}): point config.yaml `dagster.storage.database` at an "
            f"empty database or an existing Dagster instance's, or add Dagster's schema to this one with "
            f"`DAGSTER_HOME={home} dagster instance migrate`.")


def write_workspace(project_dir: str | Path, environments: list[str],
                    storage: DagsterStorageConfig | None = None, repos: Sequence[str | Path] = ()) -> Path:
    """`.mesh/dagster/workspace.yaml` loading the project once per environment, and the instance's
    dagster.yaml; returns the workspace's path.

    With a `git:` section, the location of the environments git pushes created loads pushed code:
    it starts with a git worker's environment (pushed_python.py). An environment of its own location
    is shown from the commit it serves only when that was approved (a protected environment's): an
    unprotected one a push deployed to (a branch named like it) is shown from this working tree, so
    that location, which has `mesh ui`'s whole environment, never loads a commit nobody reviewed.
    A multi-repo project's other repositories (`repos`) load with it in each location (its `git:`
    is refused there: code_location.py)."""
    project = Path(project_dir).resolve()
    home = ui_home(project)
    write_instance(home, storage)
    envs = list(dict.fromkeys(normalize_environment(e) for e in environments))
    config = _watching(project)
    more = f", repos={[str(Path(repo).resolve()) for repo in repos]!r}" if repos else ""
    functions = "\n\n".join(
        f"def env_{env}():\n    return definitions(PROJECT, {env!r}{_follow(config, env)}{more})\n" for env in envs
    )
    if config is not None:  # the environments git pushes created: one location, reloaded as they come and go
        functions += (f"\n\ndef {PUSHED}():\n    return pushed_definitions(PROJECT, {envs!r})\n")
    (home / LOCATIONS_FILE).write_text(
        '"""Written by `mesh ui`: one Dagster code location per environment."""\n\n'
        "from mesh_dagster.dagster import definitions\n"
        + ("from mesh_dagster.dagster.ui.watch import pushed_definitions\n" if config is not None else "")
        + f"\nPROJECT = {str(project)!r}\n\n\n{functions}"
    )
    entries = "".join(_entry(f"env_{env}", location_name(project, env), project) for env in envs)
    if config is not None:
        python = write_python(home, location_variables(config, storage))
        entries += _entry(PUSHED, location_name(project, "pushed"), project) + f"      executable_path: {python}\n"
    workspace = home / "workspace.yaml"
    workspace.write_text(f"# Written by `mesh ui`.\nload_from:\n{entries}")
    return workspace


def _entry(attribute: str, name: str, project: Path) -> str:
    return (f"  - python_file:\n"
            f"      relative_path: {LOCATIONS_FILE}\n"
            f"      attribute: {attribute}\n"
            f"      location_name: {name}\n"
            f"      working_directory: {project}\n")


def _follow(config: ProjectConfig | None, environment: str) -> str:
    """The argument keeping an environment's own location on this working tree when a push may
    deploy to it unreviewed (see `write_workspace`)."""
    return "" if config is None or config.protection(environment) is not None else ", follow_deployed=False"


PUSHED = "pushed_environments"  # the location of the environments git pushes created


def _watching(project: Path) -> ProjectConfig | None:
    """The project's config.yaml when it has a `git:` section (a broken one: None)."""
    context = Context(project)
    try:
        return context.config if context.config.git is not None else None
    except MeshError:
        return None
    finally:
        context.close()


def location_name(project: Path, environment: str) -> str:
    return f"{project.name}_{environment}".replace("-", "_")


def workspace_environments(workspace: Path) -> list[str]:
    """The environments a workspace written by `write_workspace` loads, in its order."""
    try:
        loaded = yaml.safe_load(workspace.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    entries = loaded.get("load_from", []) if isinstance(loaded, dict) else []
    attributes = [(e.get("python_file") or {}).get("attribute", "") for e in entries if isinstance(e, dict)]
    return [a.removeprefix("env_") for a in attributes if isinstance(a, str) and a.startswith("env_")]


def dagster_dev_command(workspace: Path, host: str, port: int) -> list[str]:
    """What `mesh ui` runs: `dagster dev` under our supervisor, which makes Ctrl-C and SIGTERM stop
    every process Dagster starts, runs included (see `ui_supervisor`)."""
    return [sys.executable, "-m", "mesh_dagster.dagster.ui.supervisor", str(workspace), host, str(port)]


def dagster_env(workspace: Path, storage: DagsterStorageConfig | None = None) -> dict[str, str]:
    """The environment of `dagster dev` and its processes: the project's instance, one planned
    event per asset of a ranged run, and batched event writes (a ranged run's per-partition events
    in one statement per batch: Postgres natively, SQLite through the instance's event log class)."""
    env = {**os.environ, "DAGSTER_HOME": str(workspace.parent), **PLANNED_EVENTS_PER_RUN}
    if storage is not None and storage.type == "postgres":
        if storage.event_batch_size > 0:
            env[EVENT_BATCH_SIZE_ENV] = str(storage.event_batch_size)
    else:
        env[EVENT_BATCH_SIZE_ENV] = str(EVENT_BATCH_SIZE)
    return env


