"""`DueIntervals`: what `mesh run` would compute now in one environment, as Dagster's automation
conditions ask it (dagster/mapping/automation.py).

Each model's condition needs the same answer — the due, missing intervals whose signals pass and
whose parents have recorded them — and computing it means reading the state store and calling the
signals of every model. One tick evaluates every model's condition at one evaluation time, so the
answer is computed once for that time and shared by all of them, then dropped at the next tick.

The answer is the Context's (`runs.pending_intervals`, what the cron schedules ask, with
`after_parents`: a model is requested on its own, so its parents must have recorded an interval
before it is computed over it), never a copy of its rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from mesh_dagster.context import Context, LogLines
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.time.intervals import Interval
from mesh_dagster.dagster.mapping.partitions import to_ms

if TYPE_CHECKING:
    from mesh_dagster.dagster.mapping.graph import ProjectGraph


class DueIntervals:
    """The due, missing, ready intervals of one environment's models, once per evaluation time.

    Built by `definitions()` with the same project folder and connection as the environment's
    schedules (a deployed commit's files for an environment a git push deployed)."""

    def __init__(self, environment: str, names: Sequence[str], project_dir: str, gateway: str | None,
                 state_url: str | None, home: str | None = None, repos: Sequence[str] = ()):
        self.environment = environment
        self.names = list(names)
        self._connection = (project_dir, gateway, state_url, home, tuple(repos))
        self._lock = threading.Lock()  # one computation per tick, whichever condition asks first
        self._latest: tuple[int, dict[str, list[Interval]]] | None = None

    @classmethod
    def attach(cls, graph: ProjectGraph, project_dir: str, gateway: str | None, state_url: str | None,
               home: str | None, repos: Sequence[str]) -> None:
        """One for the environment of `graph`, set on each of its models (`ModelAsset.due`), before
        their specs and automation conditions are built."""
        due = cls(graph.environment, [a.name for a in graph.materializable], project_dir, gateway, state_url, home,
                  repos)
        for asset in graph.materializable:
            asset.due = due

    def pending(self, at: datetime, log: Callable[[str], None]) -> dict[str, list[Interval]]:
        """Model name -> its due, missing intervals at `at` that its signals allow and its parents
        have recorded. What waits is said once per evaluation through `log` (the tick's log)."""
        at_ms = to_ms(at)
        with self._lock:
            if self._latest is not None and self._latest[0] == at_ms:
                return self._latest[1]
            project_dir, gateway, state_url, home, repos = self._connection
            context = Context(project_dir, gateway, state_url=state_url, home=home, repos=repos)
            waits = LogLines()
            try:
                found = context.runs.pending_intervals(self.environment, self.names, execution_time=at_ms,
                                                       listener=waits, after_parents=True)
            finally:
                context.close()
            for line in waits.lines:  # a signal's arguments are the project's text
                log(printable(line))
            self._latest = (at_ms, found)
            return found
