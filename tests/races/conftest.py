"""Race tests: real processes (`tests/races/actors.py`) against SQLite and the local Postgres.

`state_url` comes from the state tests: SQLite in a temp file, and Postgres in a schema of its
own (marked `postgres`; it fails loudly, never skips, when the server is missing).
`MESH_RACE_CODE` points the actor processes at another checkout (to prove a test fails on the
code before a fix); by default they run this one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.state.conftest import postgres_admin, state_url  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
CODE = os.environ.get("MESH_RACE_CODE", str(REPO))
ACTOR_TIMEOUT_S = 180

MODELS_V1 = {
    "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT x FROM s.a\n",
}


@dataclass
class Actor:
    name: str
    proc: subprocess.Popen
    result: Path
    stderr: Path

    def outcome(self) -> dict[str, Any]:
        """Wait for the process to end; what it reported (a crash reports nothing: None)."""
        self.proc.wait(ACTOR_TIMEOUT_S)
        if not self.result.exists():
            return {"ok": None, "exit": self.proc.returncode, "stderr": self.stderr.read_text()[-2000:]}
        return json.loads(self.result.read_text())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(ACTOR_TIMEOUT_S)


class Race:
    """Starts actor processes sharing one state store and one recorded warehouse."""

    def __init__(self, root: Path, url: str):
        self.root = root
        self.url = url
        self.calls = root / "calls.jsonl"
        self.actors: list[Actor] = []

    def path(self, name: str) -> Path:
        return self.root / name

    def start(self, role: str, name: str, **spec: Any) -> Actor:
        result, stderr = self.root / f"{name}.result.json", self.root / f"{name}.stderr"
        full = {"role": role, "name": name, "url": self.url, "calls": str(self.calls), "result": str(result), **spec}
        with stderr.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "tests.races.actors", json.dumps(full, default=str)],
                                    cwd=CODE, env={**os.environ, "PYTHONPATH": CODE}, stderr=err)
        actor = Actor(name, proc, result, stderr)
        self.actors.append(actor)
        return actor

    def stop_all(self) -> None:
        for actor in self.actors:
            if actor.proc.poll() is None:
                actor.kill()


@pytest.fixture
def race(tmp_path: Path, state_url: str) -> Iterator[Race]:  # noqa: F811 (the imported fixture)
    race = Race(tmp_path, state_url)
    yield race
    race.stop_all()
