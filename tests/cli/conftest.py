import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_mesh(project: Path, *args: str, input: str | None = None, check: bool = True,
             timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real `mesh` command in its own process, as a user would."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}
    proc = subprocess.run(
        [sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
        input=input, capture_output=True, text=True, env=env, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"mesh {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def mesh():
    return run_mesh
