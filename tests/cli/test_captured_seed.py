"""A seed is read once, when its plan is made (issue 19, point 2): the CSV edited while `mesh plan`
waits at its prompt changes nothing that plan writes, and an environment reusing that table shows
exactly the rows of the content it was planned with."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.conftest import run_mesh

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
PROMPT = "Apply - Backfill Tables [y/n]: "


def _wait_for(proc: subprocess.Popen, text: str, timeout_s: float = 300) -> str:
    """stdout up to `text` (the process is waiting for input there)."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while text not in seen:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError(f"no {text!r} from mesh plan:\n{seen}")
            if selector.select(timeout=1):
                chunk = os.read(proc.stdout.fileno(), 65536).decode()
                seen += chunk
    return seen


def _ids(root: Path, view: str) -> list[int]:
    out = run_mesh(root, "fetchdf", f"SELECT id FROM {view} ORDER BY id").stdout
    return [int(line.split()[-1]) for line in out.splitlines()[1:] if line.split() and line.split()[-1].isdigit()]


def test_a_seed_edited_while_the_plan_waits_is_not_what_the_plan_writes(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".mesh"))
    csv = root / "seeds" / "seed_data.csv"
    run_mesh(root, "plan", "--auto-apply", "--skip-tests")
    planned = csv.read_text() + "8,9,2020-01-08\n"
    csv.write_text(planned)  # the change dev2 plans

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"}
    proc = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(root), "plan", "dev2",
                             "--skip-tests"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for(proc, PROMPT)
        csv.write_text(planned + "99,99,2020-01-09\n")  # edited while the plan waits
        out, _ = proc.communicate(b"y\n", timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, out.decode()

    assert _ids(root, "sqlmesh_example__dev2.seed_model") == [1, 2, 3, 4, 5, 6, 7, 8]
    csv.write_text(planned)  # back to what dev2 planned: dev3 reuses its table
    run_mesh(root, "plan", "dev3", "--include-unmodified", "--auto-apply", "--skip-tests")
    assert _ids(root, "sqlmesh_example__dev3.seed_model") == [1, 2, 3, 4, 5, 6, 7, 8]
