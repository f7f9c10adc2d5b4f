"""What an environment serves, as files: the commit a git push deployed to it.

A plan made from a pushed commit (the git sensor's) is applied from that commit's files, never the
watching project's working tree. A view of the environment built from the working tree would then
show the deployed models as changes — pending reverts of what was just approved. So the files of
the commit an environment serves are kept under `.mesh/dagster/deployed/<sha>/` (exported once,
atomically; commits never change), and a Dagster code location of that environment loads them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from mesh_dagster.core.config.config import GitWatchConfig
from mesh_dagster.core.config.connections import MESH_DIR
from mesh_dagster.execution.plans.git_repo import export_commit
from mesh_dagster.execution.ports import State

FROM_COMMIT = "from_commit"  # a plan record's option: the pushed commit whose files it was planned from


def deployed_commit(state: State, environment: str) -> str | None:
    """The commit whose files made the plan `environment` serves; None when it was planned from a
    working tree (or the environment does not exist)."""
    env = state.environments.served_environment(environment)
    record = state.plans.get_plan_record(env.plan_id) if env is not None else None
    sha = record.summary.options.get(FROM_COMMIT) if record is not None else None
    return sha if isinstance(sha, str) and sha else None


def deployed_files(state: State, environment: str, watch: GitWatchConfig, project_dir: Path,
                   home: Path) -> Path | None:
    """The project folder of the commit `environment` serves (exported on first use), or None."""
    sha = deployed_commit(state, environment)
    if sha is None:
        return None
    root = home / MESH_DIR / "dagster" / "deployed"
    done = root / sha
    if not done.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}.", dir=root))
        try:
            export_commit(watch.repo_path(project_dir), sha, staging / "files", watch.tick_timeout_s * 4)
            try:
                os.rename(staging / "files", done)
            except OSError:  # another process exported it meanwhile: same commit, same files
                if not done.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return done / watch.project_path
