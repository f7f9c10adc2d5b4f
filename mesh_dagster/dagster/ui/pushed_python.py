"""The Python of `mesh ui`'s location of pushed environments: it starts with a git worker's environment.

The location `<project>_pushed` shows each environment a git push created from the files of the
commit it serves (watch.py), so loading it runs pushed code (`macros/*.py`, Python models), and
so do the runs launched from it. Like a git worker (execution/plans/git_worker.py), they must not hold
what `mesh ui` was started with: notification credentials, other gateways' settings, every other
variable of whoever started it.

Dagster starts a workspace entry's code server with the entry's `executable_path`, and the process
loading the code and its runs inherit that server's environment (compat.py). So the entry names a
script `mesh ui` writes, `.mesh/dagster/pushed-python`, which starts this Python with a git worker's
environment (`worker_variables`: its fixed few, the locale, `git.worker_env`, which must name the
variables config.yaml reads for the state store and Spark) plus what a code location needs: its
Dagster instance (`DAGSTER_HOME`, the settings `mesh ui` gives Dagster, a Postgres instance's
password variable) and who acts in its runs (`MESH_USER`). The script holds names, never a value:
values are those `dagster dev` has, and a withheld variable reads as the stand-in URL.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from mesh_dagster.context import STAND_IN_URL, ProjectConfig, WorkerVariables, worker_variables
from mesh_dagster.core.config.config import DagsterStorageConfig
from mesh_dagster.dagster.compat import DEV_CLI_ENV, EVENT_BATCH_SIZE_ENV, PLANNED_EVENTS_PER_RUN

PYTHON_FILE = "pushed-python"
# What the location needs besides a git worker's variables.
LOCATION_ENV = ("DAGSTER_HOME", EVENT_BATCH_SIZE_ENV, *PLANNED_EVENTS_PER_RUN, *DEV_CLI_ENV, "MESH_USER")
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what `sh` can expand (an odd `LC_*` name it cannot)


def location_variables(config: ProjectConfig, storage: DagsterStorageConfig | None) -> WorkerVariables:
    """The names of the location's environment: a git worker's under `config` and `LOCATION_ENV`."""
    password = [storage.password_env] if storage is not None and storage.password_env else []
    extra = [*(config.git.worker_env if config.git else []), *LOCATION_ENV, *password]
    return worker_variables(extra, [target.url for target in config.notification_targets])


def write_python(home: Path, variables: WorkerVariables) -> Path:
    """`.mesh/dagster/pushed-python`: this Python, started with `variables` only."""
    path = home / PYTHON_FILE
    path.write_text(python_script(variables))
    path.chmod(0o700)
    return path


def python_script(variables: WorkerVariables) -> str:
    """A POSIX shell script that runs this Python (with its arguments) in an environment emptied
    (`env -i`) but for `variables`: each passed one if it is set, each withheld one as the stand-in."""
    passed = [f'${{{name}+"{name}=${name}"}}' for name in sorted(variables.passed) if _SHELL_NAME.fullmatch(name)]
    withheld = [shlex.quote(f"{name}={STAND_IN_URL}") for name in sorted(variables.withheld)]
    lines = ["exec /usr/bin/env -i", *passed, *withheld, f'{shlex.quote(sys.executable)} "$@"']
    return ("#!/bin/sh\n# Written by `mesh ui` (mesh_dagster/dagster/pushed_python.py): the Python of the location of\n"
            "# pushed environments and of its runs, with a git worker's environment. Names only, no value.\n"
            + " \\\n  ".join(lines) + "\n")
