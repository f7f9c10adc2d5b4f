"""`mesh ui` keeps its code locations in step with the state store, so the UI shows what each
environment serves without anyone pressing "Reload".

Dagster has no hot reload: a code location shows the plan it computed when it loaded. A thread of
`mesh ui`'s supervisor looks at the environments every few seconds and asks the webserver
(GraphQL, the UI's own "Reload" actions) to:

- reload an environment's code location when what it serves changed (a promotion, an apply, a git
  deploy): its assets then show the new versions, and no pending change that is done;
- add a code location for every environment a git push created (its plan was made from a pushed
  commit, and the location loads that commit's files, dagster/definitions.py), and drop the
  location of one that is gone: the workspace file is rewritten, then reloaded.

It never fails `mesh ui`: a look that goes wrong is skipped, and the next one tries again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

from mesh_dagster.core.dates import now_ms
from mesh_dagster.dagster.ui import location_name, workspace_environments, write_workspace

INTERVAL_S = 5.0
RELOAD_LOCATION = """mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) {
  __typename } }"""
RELOAD_WORKSPACE = "mutation { reloadWorkspace { __typename } }"


class WorkspaceWatch(threading.Thread):
    def __init__(self, workspace: Path, host: str, port: int, interval_s: float = INTERVAL_S):
        super().__init__(name="mesh-ui-watch", daemon=True)
        self.workspace = workspace
        self.project = workspace.parent.parent.parent  # <project>/.mesh/dagster/workspace.yaml
        self.url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/graphql"
        self.interval_s = interval_s
        self.base = workspace_environments(workspace)  # what `mesh ui` was asked to show
        self.shown = list(self.base)
        self._served: dict[str, str] | None = None  # environment -> the plan its record holds
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a look that goes wrong (state store busy, UI starting) waits for the next
                continue

    def tick(self) -> None:
        served, pushed, storage = self._environments()
        wanted = self.base + [e for e in pushed if e not in self.base]
        if wanted != self.shown:
            write_workspace(self.project, wanted, storage)
            self._post(RELOAD_WORKSPACE, {})
            self.shown = wanted
        if self._served is not None:
            for env in self.shown:
                if served.get(env) != self._served.get(env):
                    self._post(RELOAD_LOCATION, {"name": location_name(self.project, env)})
        self._served = served

    def _environments(self):
        from mesh_dagster.context import Context

        ctx = Context(self.project)
        try:
            records = [e for e in ctx.state.get_environments() if not (e.expiration_ts and e.expiration_ts < now_ms())]
            served = {e.name: f"{e.plan_id}:{e.finalized_ts}" for e in records}
            pushed = sorted(e.name for e in records if ctx.config.git is not None and _from_commit(ctx, e.plan_id))
            return served, pushed, ctx.config.dagster.storage
        finally:
            ctx.close()

    def _post(self, query: str, variables: dict) -> None:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - our own webserver
            response.read()


def _from_commit(ctx, plan_id: str) -> bool:
    record = ctx.state.get_plan_record(plan_id)
    return record is not None and bool(record.summary.options.get("from_commit"))


def wait_stopped(watch: WorkspaceWatch, timeout_s: float = 2.0) -> None:
    watch.stop()
    deadline = time.monotonic() + timeout_s
    while watch.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
