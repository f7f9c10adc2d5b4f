"""The bad-input suite's harness: run `mesh` in process and prove a refusal wrote nothing.

Every case in this folder follows one pattern:

    with nothing_written(project):
        result = mesh(project, "plan", "--explain")
    assert_refused(result, "models/a.sql:3:", "time_column")

`assert_refused` checks the user-facing contract of DEVELOPERS.md (exit code 1, exactly one line
on stderr, no traceback, no Python exception names); `nothing_written` checks that the project's
files, the state store's rows and the warehouse are exactly as before (log files and the parse
cache excepted: they are ours, not the user's data).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "example_project"
# Written by mesh itself, never user data: allowed to change during a refused command.
_OURS = (".mesh/logs", ".mesh/cache")


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def mesh(project: Path, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Outcome:
    """`mesh -p project args...` in this process (fast: no interpreter start, no Spark)."""
    from mesh_dagster.cli.main import cli

    runner = CliRunner()
    result = runner.invoke(cli, ["-p", str(project), *args], input=input, env=env, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"mesh {' '.join(args)} raised instead of answering in one line") from result.exception
    return Outcome(result.exit_code, result.stdout, result.stderr)


def mesh_process(project: Path, *args: str, timeout_s: float = 120) -> Outcome:
    """`mesh -p project args...` in a new process: for commands that would change this process's
    Spark mode (a Connect client turns every later session of the process into a Connect one)."""
    done = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                          capture_output=True, text=True, timeout=timeout_s)
    return Outcome(done.returncode, done.stdout, done.stderr)


def assert_refused(outcome: Outcome, *fragments: str) -> str:
    """Exit code 1 and one line on stderr holding every fragment; returns that line."""
    assert outcome.exit_code == 1, f"exit code {outcome.exit_code}\nstdout:\n{outcome.stdout}\nstderr:\n{outcome.stderr}"
    lines = outcome.error_lines
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{outcome.stderr}"
    line = lines[0]
    for bad in ("Traceback", "Exception:", "Error(", 'File "'):
        assert bad not in line, f"internal detail leaked: {line}"
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    _record(line)
    return line


def _record(line: str) -> None:
    """With MESH_BAD_INPUT_REPORT=file, append (test, message): the table of cases and messages."""
    report = os.environ.get("MESH_BAD_INPUT_REPORT")
    if report:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]  # "<node id> (call)"
        with open(report, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": test, "message": line}) + "\n")


def copy_example(dest: Path) -> Path:
    """A fresh copy of the quickstart project (without any state or warehouse)."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    return dest


def _files_digest(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".mesh" or rel.startswith(_OURS) or "__pycache__" in rel or path.name.startswith("state.db"):
            continue
        out[rel] = "dir" if path.is_dir() else hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def _state_rows(root: Path) -> dict[str, list[tuple]] | None:
    db = root / ".mesh" / "state.db"
    if not db.exists():
        return None
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}


@contextmanager
def nothing_written(root: Path) -> Iterator[None]:
    """Assert that the block changed no project file, no state row and created no table."""
    files, rows = _files_digest(root), _state_rows(root)
    yield
    after_files = _files_digest(root)
    added = sorted(set(after_files) - set(files))
    changed = sorted(k for k in files if after_files.get(k) != files[k])
    assert not added and not changed, f"written: added {added[:10]}, changed/removed {changed[:10]}"
    after_rows = _state_rows(root)
    if rows is None:
        assert after_rows is None or not any(after_rows.get(t) for t in after_rows if t != "mesh_versions"), \
            f"the state store was filled: { {t: len(r) for t, r in (after_rows or {}).items()} }"
    else:
        assert after_rows == rows, "the state store changed"


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound and released at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
