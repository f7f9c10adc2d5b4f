"""`mesh ui` keeps its code locations in step with the state store, so the UI shows what each
environment serves without anyone pressing "Reload".

Dagster has no hot reload: a code location shows the plan it computed when it loaded. A thread of
`mesh ui`'s supervisor looks at the environments every few seconds and asks the webserver
(GraphQL, the UI's own "Reload" action) to reload:

- an environment's code location when what it serves changed (a promotion, an apply, a git
  deploy): its assets then show the new versions, and no pending change that is done;
- an environment's code location when the intervals of the table versions it counted as pending
  changed (mapping/pending.py): its "7 partition(s) to recompute" then says what is left to compute;
- an environment's code location when its waiting plans change (recorded, decided, applied): the
  review and apply jobs offer them as a list (dagster/jobs/reviews.py);
- the location of the environments git pushes created (`pushed_environments`, written when
  config.yaml has a `git:` section) when one is added, removed or deployed to: each is shown from
  the files of the commit it serves (dagster/code_location.py).

It never fails `mesh ui`: a look that goes wrong is skipped, and the next one tries again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

from dagster import Definitions

from mesh_dagster.context import FROM_COMMIT, Context
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.dagster.code_location import definitions
from mesh_dagster.dagster.compat import RELOAD_LOCATION
from mesh_dagster.dagster.jobs.reviews import WAITING
from mesh_dagster.dagster.mapping.pending import noted_pending
from mesh_dagster.dagster.ui.workspace import location_name, workspace_environments

INTERVAL_S = 5.0


class WorkspaceWatch(threading.Thread):
    def __init__(self, workspace: Path, host: str, port: int, interval_s: float = INTERVAL_S):
        super().__init__(name="mesh-ui-watch", daemon=True)
        self.project = workspace.parent.parent.parent  # <project>/.mesh/dagster/workspace.yaml
        self.url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/graphql"
        self.interval_s = interval_s
        self.base = workspace_environments(workspace)  # the environments with a location of their own
        self._served: dict[str, str] | None = None  # environment -> the record it serves
        self._counted_before: dict[str, tuple[list, str]] = {}  # environment -> `_counted` at the last look
        self._waiting_before: dict[str, str] = {}  # environment -> its waiting plans at the last look
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a look that goes wrong (state store busy, UI starting) waits for the next
                continue

    def tick(self) -> None:
        ctx = Context(self.project)
        try:
            served, pushed = self._environments(ctx)
            counted = self._counted(ctx)
            waiting = {env: repr([(r.plan_id, r.status.value) for r in ctx.plan_records(env, list(WAITING))])
                       for env in self.base}
        finally:
            ctx.close()
        if self._served is not None:
            changed = {e for e in set(served) | set(self._served) if served.get(e) != self._served.get(e)}
            changed |= {e for e in waiting if e in self._waiting_before and self._waiting_before[e] != waiting[e]}
            changed |= {e for e, (keys, found) in counted.items()
                        if e in self._counted_before and self._counted_before[e][0] == keys
                        and self._counted_before[e][1] != found}
            for env in self.base:
                if env in changed:
                    self._post(RELOAD_LOCATION, {"name": location_name(self.project, env)})
            if changed & (set(pushed) | (set(self._served) - set(self.base))):
                self._post(RELOAD_LOCATION, {"name": location_name(self.project, "pushed")})
        self._served = served
        self._counted_before = counted
        self._waiting_before = waiting

    def _counted(self, ctx: Context) -> dict[str, tuple[list, str]]:
        """Each environment's pending table versions as its location counted them when it loaded
        (mapping/pending.py), with their intervals now: the location is stale when, for the same
        versions, the intervals differ (computed since, by a run, another environment or `mesh`)."""
        out: dict[str, tuple[list, str]] = {}
        for env in self.base:
            keys = noted_pending(self.project, env)
            found = ctx.state.intervals.get_intervals(keys) if keys else {}
            out[env] = (keys, repr(sorted(found.items())))
        return out

    def _environments(self, ctx: Context) -> tuple[dict[str, str], list[str]]:
        served = {e.name: f"{e.plan_id}:{e.finalized_ts}" for e in _unexpired(ctx)}
        return served, pushed_environments(ctx, self.base)

    def _post(self, query: str, variables: dict) -> None:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - our own webserver
            response.read()


def pushed_environments(ctx: Context, base: list[str]) -> list[str]:
    """The environments in state (not expired) that a git push deployed, less `base`."""
    if ctx.config.git is None:
        return []
    return sorted(e.name for e in _unexpired(ctx) if e.name not in base and _from_commit(ctx, e.plan_id))


def _unexpired(ctx: Context) -> list:
    """The environments in state whose time to live has not run out."""
    return [e for e in ctx.state.environments.get_environments()
            if not (e.expiration_ts and e.expiration_ts < now_ms())]


def pushed_definitions(project: str, base: list[str]) -> Definitions:
    """The code location of the environments git pushes created (none yet: an empty one)."""
    ctx = Context(project)
    try:
        environments = pushed_environments(ctx, base)
    finally:
        ctx.close()
    return definitions(project, environments) if environments else Definitions()


def _from_commit(ctx: Context, plan_id: str) -> bool:
    record = ctx.state.plans.get_plan_record(plan_id)
    return record is not None and bool(record.summary.options.get(FROM_COMMIT))


def wait_stopped(watch: WorkspaceWatch, timeout_s: float = 2.0) -> None:
    watch.stop()
    deadline = time.monotonic() + timeout_s
    while watch.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
