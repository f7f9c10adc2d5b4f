"""A project's `mesh ui` (dagster dev: webserver, daemon, code server), driven through GraphQL as
the UI drives it, for timing Dagster runs from launch to success (bench_steady.py).

Why through the webserver: "launch -> success" is what a user waits for after clicking Launch (or
the daemon's tick): the queued run dequeued by the daemon, a run worker process started, the code
location loaded in it, the steps executed, the run marked SUCCESS. `execute_in_process` would skip
all but the steps.

`scheduled_request` asks the webserver for a schedule's dry run at a given time (the code server
evaluates the schedule exactly as the daemon's tick would); `launch` launches that request
(`launchRun`: its job, tags and asset selection); `finish` polls the run until it ends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
DAEMONS = """{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }"""
DRY_RUN = """mutation($s: ScheduleSelector!, $t: Float) { scheduleDryRun(selectorData: $s, timestamp: $t) {
  __typename ... on DryRunInstigationTick { evaluationResult { skipReason error { message }
    runRequests { runKey jobName tags { key value } assetSelection { path } } } }
  ... on PythonError { message } ... on ScheduleNotFoundError { message } } }"""
SCHEDULE_JOB = """query($s: ScheduleSelector!) { scheduleOrError(scheduleSelector: $s) {
  __typename ... on Schedule { pipelineName } } }"""
LAUNCH_RUN = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } ... on InvalidSubsetError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
ACTIVE_RUNS = """{ runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED, CANCELING]}) {
  ... on Runs { results { runId pipelineName } } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status creationTime startTime endTime } } }"""
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
REPOSITORY = "__repository__"  # the one repository of a Definitions-based code location


@dataclass(frozen=True)
class Request:
    """A run a schedule asks for."""

    job: str
    tags: dict[str, str]
    assets: list[list[str]]


@dataclass(frozen=True)
class Finished:
    """One run: the wall time we waited from launchRun to its end, and Dagster's own timestamps."""

    status: str
    wall_s: float
    queued_s: float  # creation -> start: the daemon's dequeue, the run worker's start and its code load
    executing_s: float  # start -> end: the steps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterUI:
    """`mesh -p <project> ui -e <environment>` in a process group of its own, and a GraphQL client."""

    def __init__(self, mesh: list[str], project: Path, environment: str, log: Path, env: dict[str, str]):
        self.project, self.environment, self.log = project, environment, log
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/graphql"
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [*mesh, "-p", str(project), "ui", "-e", environment, "--port", str(port)],
                stdout=out, stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True, cwd=project.parent)

    @property
    def location(self) -> str:
        return f"{self.project.name}_{self.environment}".replace("-", "_")  # dagster/ui/workspace.py's location_name

    def query(self, text: str, **variables: object) -> dict:
        body = json.dumps({"query": text, "variables": variables}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as e:  # the webserver's reason is in the body
            raise SystemExit(f"GraphQL HTTP {e.code}: {e.read().decode(errors='replace')[:3000]}") from None
        if answer.get("errors"):
            raise SystemExit(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def wait_ready(self, timeout: float = 600) -> float:
        """Seconds until the code location is loaded and every required daemon is healthy (the run
        queue's daemon dequeues launched runs)."""
        began = time.perf_counter()
        while time.perf_counter() - began < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"mesh ui exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if self._ready():
                    return time.perf_counter() - began
            except (OSError, urllib.error.URLError):
                pass  # not listening yet
            time.sleep(1)
        raise SystemExit(f"mesh ui was not ready within {timeout:.0f} s:\n{self.tail()}")

    def _ready(self) -> bool:
        entries = self.query(LOCATIONS)["workspaceOrError"]["locationEntries"]
        failed = [e for e in entries if e["locationOrLoadError"] and e["locationOrLoadError"].get("message")]
        if failed:
            raise SystemExit(f"code location failed to load: {failed[0]['locationOrLoadError']['message']}")
        if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
            return False
        daemons = self.query(DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
        return all(d["healthy"] for d in daemons if d["required"])

    def scheduled_request(self, schedule: str, when: float) -> list[Request]:
        """The runs `schedule` requests at `when` (a Unix timestamp), evaluated by the code server."""
        selector = {"repositoryLocationName": self.location, "repositoryName": REPOSITORY, "scheduleName": schedule}
        tick = self.query(DRY_RUN, s=selector, t=when)["scheduleDryRun"]
        if tick["__typename"] != "DryRunInstigationTick":
            raise SystemExit(f"dry run of {schedule} failed: {tick}")
        result = tick["evaluationResult"]
        if result["error"] or not result["runRequests"]:
            raise SystemExit(f"{schedule} requests no run at {when}: {result['error'] or result['skipReason']}")
        found = self.query(SCHEDULE_JOB, s=selector)["scheduleOrError"]
        if found["__typename"] != "Schedule":
            raise SystemExit(f"no schedule {schedule}: {found}")
        return [Request(r["jobName"] or found["pipelineName"], {t["key"]: t["value"] for t in r["tags"]},
                        [a["path"] for a in r["assetSelection"] or []]) for r in result["runRequests"]]

    def wait_idle(self, quiet_s: float, timeout: float = 900) -> list[str]:
        """Wait until no run has been queued or running for `quiet_s` seconds in a row (the re-stamp
        sensor launches runs of its own, e.g. to record what `mesh` commands computed); returns the
        jobs of the runs seen meanwhile."""
        began, quiet_since, seen = time.perf_counter(), time.perf_counter(), {}
        while time.perf_counter() - began < timeout:
            active = self.query(ACTIVE_RUNS)["runsOrError"]["results"]
            seen.update({r["runId"]: r["pipelineName"] for r in active})
            if active:
                quiet_since = time.perf_counter()
            elif time.perf_counter() - quiet_since >= quiet_s:
                return list(seen.values())
            time.sleep(1)
        raise SystemExit(f"runs still active after {timeout:.0f} s: {seen}")

    def launch(self, request: Request) -> str:
        selector: dict[str, object] = {"repositoryLocationName": self.location, "repositoryName": REPOSITORY,
                                       "jobName": request.job}
        if request.assets:
            selector["assetSelection"] = [{"path": a} for a in request.assets]
        params = {"selector": selector,
                  "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in request.tags.items()]}}
        result = self.query(LAUNCH_RUN, p=params)["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise SystemExit(f"launchRun failed: {result}")
        return result["run"]["runId"]

    def finish(self, run_id: str, launched: float, timeout: float = 900) -> Finished:
        """Poll the run every 0.2 s until it ends; `launched` is the perf_counter() before launchRun."""
        while time.perf_counter() - launched < timeout:
            run = self.query(RUN, id=run_id)["runOrError"]
            if run["status"] in TERMINAL:
                wall = time.perf_counter() - launched
                start, end = run["startTime"] or run["creationTime"], run["endTime"] or run["creationTime"]
                return Finished(run["status"], wall, start - run["creationTime"], end - start)
            time.sleep(0.2)
        raise SystemExit(f"run {run_id} did not finish within {timeout:.0f} s")

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the group we started (`mesh ui`'s supervisor stops what Dagster started), SIGKILL after 60 s."""
        for sig, wait_s in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                self.proc.poll()
                try:
                    os.killpg(self.proc.pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.5)
        print(f"warning: mesh ui (process group {self.proc.pid}) did not stop", file=sys.stderr)
