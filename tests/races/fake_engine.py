"""A stand-in for Spark that records every call, for tests about *ordering* between processes.

Engine calls are duck-typed, so applies, promotions and the janitor run their real code against
it: the engine is its own session and catalog, and its writes are every write of the `Writes`
Protocol that names a table, recorded by that name (what a write does to rows is no concern here). Each call is appended as one JSON line to a log shared by every process of a test (one
`write` per line with O_APPEND: lines of concurrent processes never interleave), and the
"warehouse" — which tables and views exist, and what each view selects — is replayed from that
log. Hooks let a test pause a process inside a call, or kill it there.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mesh_dagster.execution.ports import Writes

WAIT_S = 120  # a paused actor gives up (and fails its test) after this long


# The writes of the Protocol whose first argument is a table (not finishing journaled writes, which
# this engine never makes).
TABLE_WRITES = frozenset(name for name, op in vars(Writes).items()
                         if inspect.isfunction(op) and list(inspect.signature(op).parameters)[1:2] == ["table"])


# What a write that lays a table out returns: its columns (none known here) and "laid out anew".
LAID_OUT: dict[str, Any] = {"replace_table": ({}, True), "load_seed": ({}, True)}


class RecordedWrites:
    """An engine's writes part that records each write under its table's name."""

    def __init__(self, record: Callable[[str, str], None]):
        self._record = record

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if op not in TABLE_WRITES:
            raise AttributeError(op)

        def write(table: str, *args: Any, **kwargs: Any) -> Any:
            self._record(op, table)
            return LAID_OUT.get(op)

        return write


class RecordingEngine:
    def __init__(self, log: Path, actor: str, hooks: dict[str, dict[str, Any]] | None = None):
        self.log = Path(log)
        self.actor = actor
        self.hooks = hooks or {}
        self._counts: dict[str, int] = {}
        self.session = self.catalog = self
        self.writes = RecordedWrites(self._record)

    # -- what the evaluator, the virtual layer and the janitor call ------------------------------
    def create_schema(self, name: str) -> None:
        self._record("create_schema", name)

    def drop_schema(self, name: str, cascade: bool = True) -> None:
        self._record("drop_schema", name)

    def create_table(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._record("create_table", name)

    def create_view(self, name: str, select_sql: str, *args: Any, **kwargs: Any) -> None:
        self._record("create_view", name, select_sql)

    def drop_view(self, name: str) -> None:
        self._record("drop_view", name)

    def drop_table(self, name: str) -> None:
        self._record("drop_table", name)

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> None:
        self._record("execute", sql)

    def columns(self, name: str) -> dict[str, str]:
        return {}

    def query_columns(self, sql: str) -> dict[str, str]:
        return {}

    def canonical_types(self, columns: dict[str, str]) -> dict[str, str]:
        return dict(columns)

    def existing_columns(self, name: str) -> dict[str, str] | None:
        return self.columns(name) if self.table_exists(name) else None

    def fetchall(self, sql: str) -> list[tuple]:
        return [(0,)]  # audits find no rows

    def table_exists(self, name: str) -> bool:
        return name in warehouse(self.log)

    def schema_exists(self, name: str) -> bool:
        return True

    def list_objects(self, schema: str) -> dict[str, str]:
        return {n.split(".", 1)[1]: kind for n, (kind, _) in warehouse(self.log).items() if n.split(".")[0] == schema}

    def table_names(self, schema: str) -> set[str]:
        return {name.lower() for name in self.list_objects(schema)}

    # -- recording and hooks -----------------------------------------------------------------
    def _record(self, call: str, name: str, sql: str | None = None) -> None:
        """Hooks, by call name: `{"crash_at": n}` dies (like a kill: no cleanup, no lock release)
        instead of making the n-th such call; `{"pause": marker, "resume": file}` stops after the
        first such call until the test creates `resume`."""
        hook = self.hooks.get(call)
        if hook and "crash_at" in hook:
            self._counts[call] = self._counts.get(call, 0) + 1
            if self._counts[call] == hook["crash_at"]:
                os._exit(3)
        line = json.dumps({"actor": self.actor, "pid": os.getpid(), "call": call, "name": name, "sql": sql})
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
        if hook and "pause" in hook and not Path(hook["pause"]).exists():
            pause(Path(hook["pause"]), Path(hook["resume"]))


def pause(marker: Path, resume: Path) -> None:
    """Say we are here, then wait until the test lets us go on."""
    marker.write_text(str(os.getpid()))
    wait_for(resume)


def wait_for(path: Path, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def calls(log: Path) -> list[dict[str, Any]]:
    if not Path(log).exists():
        return []
    return [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]


def warehouse(log: Path) -> dict[str, tuple[str, str | None]]:
    """Objects that exist after replaying the log: name -> ("table" | "view", view SQL)."""
    objects: dict[str, tuple[str, str | None]] = {}
    for c in calls(log):
        if c["call"] in ("create_table", "replace_table", "load_seed"):
            objects[c["name"]] = ("table", None)
        elif c["call"] == "create_view":
            objects[c["name"]] = ("view", c["sql"])
        elif c["call"] in ("drop_table", "drop_view"):
            objects.pop(c["name"], None)
    return objects
