"""End to end: `mesh ui` (dagster dev: webserver + daemon + code server) on 127.0.0.1, driven and
checked through GraphQL only, with runs executing in their own processes on the project's Spark.

One module-scoped server; the tests run in order and build on each other: refused promotion,
a partition-range backfill of every asset, promotion, the three staleness cases, and two
concurrent runs beside a `mesh` command.
"""

from __future__ import annotations

import calendar
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from project_copies import TODAY, edit, recent_example

from mesh_dagster.context import Context
from mesh_dagster.engine.server_record import SERVER_ENV

pytestmark = pytest.mark.slow

DAYS = 7
FIRST = TODAY - timedelta(days=DAYS)
LAST = TODAY - timedelta(days=1)
PARTITIONS = [str(FIRST + timedelta(days=i)) for i in range(DAYS)]
LOCATION = "project_prod"
MODELS = ("seed_model", "incremental_model", "full_model")
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}


class Dagster:
    """A running `mesh ui` and a small GraphQL client for it."""

    def __init__(self, project: Path, port: int, log: Path, environments: tuple[str, ...] | list[str] = ("prod",),
                 env: dict[str, str] | None = None):
        self.project = project
        self.url = f"http://127.0.0.1:{port}/graphql"
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "ui",
             *(a for e in environments for a in ("-e", e)), "--port", str(port)],
            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )

    def query(self, text: str, **variables) -> dict:
        response = requests.post(self.url, json={"query": text, "variables": variables}, timeout=120)
        response.raise_for_status()
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    def wait_loaded(self, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"mesh ui exited:\n{self.log.read_text()[-3000:]}")
            try:
                entries = self.query(LOCATIONS)["workspaceOrError"]["locationEntries"]
            except (requests.ConnectionError, requests.Timeout):
                entries = []
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return {e["name"]: e for e in entries}
            time.sleep(2)
        raise AssertionError(f"code locations did not load:\n{self.log.read_text()[-3000:]}")

    def launch(self, job: str, tags: dict[str, str] | None = None, assets: list[list[str]] | None = None) -> str:
        selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": job}
        if assets:
            selector["assetSelection"] = [{"path": a} for a in assets]
        params = {"selector": selector,
                  "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}}
        result = self.query(LAUNCH_RUN, p=params)["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        return result["run"]["runId"]

    def until(self, predicate, what: str, timeout: float) -> None:
        """Poll `predicate` until it holds; past `timeout`, fail naming `what`, with the log's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(2)
        raise AssertionError(f"timed out waiting for {what}\n{self.log.read_text()[-3000:]}")

    def wait_run(self, run_id: str, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.query(RUN, id=run_id)["runOrError"]["status"]
            if status in TERMINAL:
                return status
            time.sleep(2)
        raise AssertionError(f"run {run_id} did not finish")

    def failure(self, run_id: str) -> str:
        events = self.query(RUN_LOGS, id=run_id)["logsForRun"]["events"]
        return "\n".join(e["error"]["message"] + (e["error"]["cause"] or {}).get("message", "")
                         for e in events if e.get("error"))

    def stale(self, model: str) -> str:
        nodes = self.query(STALE, keys=[{"path": ["sqlmesh_example", model]}], partitions=PARTITIONS)["assetNodes"]
        return "".join(s[0] for s in nodes[0]["staleStatusByPartition"])

    def restamp(self) -> list[str]:
        """Tick restamp_prod_sensor here (on the UI's instance) and launch the ranged re-stamp runs
        it requests through GraphQL, as the daemon would; returns their statuses."""
        import dagster as dg

        from mesh_dagster.dagster import definitions

        defs = definitions(self.project, "prod")
        with dg.DagsterInstance.from_config(str(self.project / ".mesh" / "dagster")) as instance, \
                dg.build_sensor_context(instance=instance, definitions=defs) as context:
            wanted = defs.resolve_sensor_def("restamp_prod_sensor")(context)
        requests = [] if isinstance(wanted, dg.SkipReason) else wanted.run_requests
        runs = [self.launch("__ASSET_JOB", r.tags, [list(k.path) for k in r.asset_selection or []]) for r in requests]
        return [self.wait_run(run_id) for run_id in runs]

    def stop(self) -> None:
        """Stop dagster dev and everything it started (they share the process group we created)."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.proc.poll()
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
        os.killpg(self.proc.pid, signal.SIGKILL)


LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
LAUNCH_RUN = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } ... on InvalidSubsetError { message } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""
RUN_LOGS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
  __typename ... on ExecutionStepFailureEvent { error { message cause { message } } } } } } }"""
BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) { __typename
  ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
BACKFILL_STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status } } }"""
BACKFILL_RUNS = """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
  ... on Runs { results { runId status tags { key value } } } } }"""
STALE = """query($keys: [AssetKeyInput!], $partitions: [String!]) { assetNodes(assetKeys: $keys) {
  assetKey { path } staleStatusByPartition(partitions: $partitions) } }"""
RELOAD = """mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) { __typename } }"""
SENSOR = """query { sensorOrError(sensorSelector: {repositoryLocationName: "project_prod",
  repositoryName: "__repository__", sensorName: "restamp_prod_sensor"}) { ... on Sensor { id } } }"""
STOP_SENSOR = """mutation($id: String!) { stopSensor(id: $id) { __typename } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mesh(project: Path, *args: str, lane: bool = True) -> subprocess.CompletedProcess:
    """A `mesh` command in the suite's lane, or (`lane=False`) as a user runs it: the product's default,
    the project's warm server, whatever lane the suite runs in."""
    env = None if lane else {k: v for k, v in os.environ.items() if k != SERVER_ENV}
    return subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), *args],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def dagster(tmp_path_factory):
    work = tmp_path_factory.mktemp("webserver")
    project = recent_example(work / "project", DAYS)
    # Dagster's freshness daemon looks every 5 s, not 30 (test_automation_runs_due_intervals_and_shows_late_models)
    server = Dagster(project, _free_port(), work / "dagster.log", env={"FRESHNESS_DAEMON_INTERVAL_SECONDS": "5"})
    try:
        server.wait_loaded()
        # the re-stamp sensor would act on its own every minute; these tests launch it explicitly
        server.query(STOP_SENSOR, id=server.query(SENSOR)["sensorOrError"]["id"])
        yield server
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")


def test_promote_with_gaps_is_refused_and_moves_nothing(dagster):
    run_id = dagster.launch("promote_prod")
    assert dagster.wait_run(run_id) == "FAILURE"
    message = dagster.failure(run_id)
    assert "Cannot promote 'prod': 3 model(s) miss intervals" in message
    assert f"sqlmesh_example.incremental_model: {FIRST} - {LAST}" in message
    assert Context(dagster.project).state.environments.get_environment("prod") is None


def test_partition_range_backfill_of_all_assets_then_promote(dagster):
    status, runs = _backfill(dagster, list(MODELS), PARTITIONS)
    assert status in ("COMPLETED", "COMPLETED_SUCCESS"), (status, runs, dagster.log.read_text()[-2000:])
    assert {r["status"] for r in runs} == {"SUCCESS"}
    # the incremental model's whole range in one run (one evaluation); the seed and the FULL model,
    # which have no partitions, once each
    ranged = [r for r in runs if "dagster/asset_partition_range_start" in {t["key"] for t in r["tags"]}]
    (run,) = ranged
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]) == \
        (str(FIRST), str(LAST))
    said = _messages(dagster, run["runId"])  # the FULL model runs apart, after it (issue 38, point 4)
    assert "in a run after this one" in said and "sqlmesh_example.full_model" in said
    assert "left to restamp_prod_sensor" not in said

    assert Context(dagster.project).state.environments.get_environment("prod") is None  # materializing never moves views
    run_id = dagster.launch("promote_prod")
    assert dagster.wait_run(run_id) == "SUCCESS", dagster.failure(run_id)

    # the physical table holds the backfilled data, and prod's view shows it after promotion
    inc = Context(dagster.project).plans.plan("prod", allow_empty=True).snapshots["sqlmesh_example.incremental_model"]
    out = _mesh(dagster.project, "fetchdf", f"SELECT (SELECT COUNT(*) FROM {inc.table_name}) AS rows_in_table, "
                                            "item_id, num_orders FROM sqlmesh_example.full_model ORDER BY item_id")
    assert out.returncode == 0, out.stdout + out.stderr
    assert [line.split()[1:] for line in out.stdout.strip().splitlines()[1:]] == [
        ["7", "1", "5"], ["7", "2", "1"], ["7", "3", "1"]]


def test_staleness_follows_the_change_category(dagster):
    """Prod shows what it serves: a change making a new version leaves prod's partitions stale (the
    pending change) until prod serves it; one keeping the version (metadata-only) is re-stamped."""
    path = dagster.project / "models" / "incremental_model.sql"
    original = path.read_text()
    assert dagster.stale("incremental_model") == "F" * DAYS
    cases = [
        ("non-breaking", ("incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n"), "S" * DAYS),
        ("breaking", ("incremental_model", "  item_id,\n", "  item_id + 1 AS item_id,\n"), "S" * DAYS),
        ("metadata-only", ("incremental_model", "  cron '@daily',", "  cron '@daily',\n  owner jen,"), "F" * DAYS),
    ]
    try:
        for case, change, incremental in cases:
            path.write_text(original)
            edit(dagster.project, *change)
            dagster.query(RELOAD, name=LOCATION)
            dagster.wait_loaded()
            assert set(dagster.restamp()) <= {"SUCCESS"}, case
            assert dagster.stale("incremental_model") == incremental, case
    finally:
        path.write_text(original)
        dagster.query(RELOAD, name=LOCATION)
        dagster.wait_loaded()


def test_two_concurrent_runs_and_a_cli_command(dagster):
    """Two runs at once and `mesh` beside them, on the local default: one shared Spark server."""
    inc = ["sqlmesh_example", "incremental_model"]
    first = dagster.launch("__ASSET_JOB", {"dagster/partition": PARTITIONS[1]}, [inc])
    second = dagster.launch("__ASSET_JOB", {"dagster/partition": PARTITIONS[2]}, [inc])
    # As a user runs it: a client of the server the runs start (or starting it, for them). In the
    # opt-out lane, an embedded session started while a run starts the server would race it for Derby.
    cli = _mesh(dagster.project, "fetchdf", "SELECT COUNT(*) AS n FROM sqlmesh_example.incremental_model",
                lane=False)
    statuses = [dagster.wait_run(first), dagster.wait_run(second)]
    assert statuses == ["SUCCESS", "SUCCESS"], [dagster.failure(r) for r in (first, second)]
    assert cli.returncode == 0 and cli.stdout.split()[-1] == "7", cli.stdout + cli.stderr


FRESHNESS = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  freshnessStatusInfo { freshnessStatus } } }"""
AUTOMATION = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__",
              "sensorName": "automation_prod_sensor"}
START_SENSOR = """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
  ... on Sensor { id } ... on PythonError { message } } }"""
SCHEDULED_RUNS = """{ runsOrError(filter: {tags: [{key: "mesh/scheduled", value: "true"}]}) { ... on Runs { results {
  runId status startTime endTime assetSelection { path } tags { key value } } } } }"""


def test_automation_runs_due_intervals_and_shows_late_models(dagster, tmp_path):
    """Prod on Dagster's automation: a model whose latest materialization is older than its cron
    allows shows late; the automation sensor, once started, runs yesterday's missing interval of the
    incremental model, then (its parent's interval recorded) the FULL model reading it."""
    import dagster as dg
    from browser import page_text, rendered_dom, screenshot
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
    from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID

    full, inc = (["sqlmesh_example", m] for m in ("full_model", "incremental_model"))
    # full_model's latest materialization, three days old: its daily cron wanted one since yesterday
    with dg.DagsterInstance.from_config(str(dagster.project / ".mesh" / "dagster")) as instance:
        event = DagsterEvent(event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value, job_name=RUNLESS_JOB_NAME,
                             event_specific_data=StepMaterializationData(dg.AssetMaterialization(full)))
        instance.report_dagster_event(event, RUNLESS_RUN_ID, timestamp=time.time() - 3 * 86400)
    # yesterday's interval of both models is missing again (as after a failed night)
    ctx = Context(dagster.project)
    snapshots = ctx.plans.plan("prod", allow_empty=True).snapshots
    day = calendar.timegm(LAST.timetuple()) * 1000  # LAST's midnight, UTC
    ctx.state.intervals.remove_intervals([(s.name, s.version, day, day + 86_400_000) for s in
                                          (snapshots[f"sqlmesh_example.{m}"] for m in ("incremental_model", "full_model"))])
    ctx.close()

    def freshness(path: list[str]) -> str | None:
        (node,) = dagster.query(FRESHNESS, keys=[{"path": path}])["assetNodes"]
        return (node["freshnessStatusInfo"] or {}).get("freshnessStatus")

    dagster.until(lambda: freshness(full) == "DEGRADED", "full_model shown late", 120)
    base = dagster.url.removesuffix("/graphql")
    page = f"{base}/assets/sqlmesh_example/full_model"
    dom = rendered_dom(page, "Last materialized")
    screenshot(page, Path(os.environ.get("MESH_SCREENSHOTS", tmp_path)) / "late_full_model.png")
    # the asset's Status, and its Freshness policy panel: failed, last materialized 3 days ago
    shown = page_text(dom)
    assert "Freshness policy Failed Asset history" in shown, shown[:3000]
    assert "Freshness policy Failed Last materialized 3 days ago" in shown, shown[-3000:]
    assert "Deadline: At 12:00 AM UTC" in shown, shown[-3000:]

    result = dagster.query(START_SENSOR, s=AUTOMATION)["startSensor"]
    assert result["__typename"] == "Sensor", result
    try:
        def runs() -> dict[str, dict]:
            found = dagster.query(SCHEDULED_RUNS)["runsOrError"]["results"]
            return {r["assetSelection"][0]["path"][-1]: r for r in found if len(r["assetSelection"]) == 1}

        dagster.until(lambda: runs().get("full_model", {}).get("status") in TERMINAL, "the automation's runs", 600)
    finally:
        dagster.query(STOP_SENSOR, id=result["id"])
    done = runs()
    assert {m: r["status"] for m, r in done.items()} == {"incremental_model": "SUCCESS", "full_model": "SUCCESS"}
    tags = {t["key"]: t["value"] for t in done["incremental_model"]["tags"]}
    assert tags.get("dagster/partition") == str(LAST), tags  # the missing interval, and only it
    assert done["full_model"]["startTime"] >= done["incremental_model"]["endTime"]  # after its parent recorded it
    dagster.until(lambda: freshness(full) == "HEALTHY", "full_model fresh again", 120)
    assert freshness(inc) == "HEALTHY"


LATEST_RUN = """query($keys: [AssetKeyInput!]!) { assetsLatestInfo(assetKeys: $keys) { latestRun { id status } } }"""
RUN_MESSAGES = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
  ... on MessageEvent { message } } } } }"""


def _backfill(dagster: Dagster, models: list[str], partitions: list[str]) -> tuple[str, list[dict]]:
    """Launch a backfill of `models` over `partitions` as the UI does; (its status once done, its runs)."""
    assets = [{"path": ["sqlmesh_example", m]} for m in models]
    launched = dagster.query(BACKFILL, p={"partitionNames": partitions, "assetSelection": assets})
    backfill = launched["launchPartitionBackfill"]
    assert backfill["__typename"] == "LaunchBackfillSuccess", backfill
    status = ""

    def done() -> bool:
        nonlocal status
        status = dagster.query(BACKFILL_STATUS, id=backfill["backfillId"])["partitionBackfillOrError"]["status"]
        return status in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")

    dagster.until(done, f"backfill {backfill['backfillId']}", 900)
    return status, dagster.query(BACKFILL_RUNS, id=backfill["backfillId"])["runsOrError"]["results"]


def _messages(dagster: Dagster, run_id: str) -> str:
    return "\n".join(e.get("message") or "" for e in dagster.query(RUN_MESSAGES, id=run_id)["logsForRun"]["events"])


def test_a_failed_backfill_shows_the_models_it_blocked(dagster, tmp_path):
    """Issue 38, point 4: Dagster runs a backfill's FULL model apart from its parent's partition range
    (a backfill's runs are grouped by partitions definition), after it (the ranged run says so:
    test_partition_range_backfill_of_all_assets_then_promote); when the parent fails, the backfill never
    launches the FULL model's run: the failed run names it blocked, and its node shows failed."""
    edit(dagster.project, "incremental_model", "  item_id,\n", "  item_id,\n  RAISE_ERROR('broken') AS broken,\n")
    try:
        dagster.query(RELOAD, name=LOCATION)
        dagster.wait_loaded()
        status, runs = _backfill(dagster, ["incremental_model", "full_model"], PARTITIONS[:2])
        (failed,) = runs  # the FULL model's run is never launched
        assert (status, failed["status"]) in {("COMPLETED_FAILED", "FAILURE"), ("FAILED", "FAILURE")}, (status, runs)
        assert "Blocked by this failure" in _messages(dagster, failed["runId"])
        (latest,) = dagster.query(LATEST_RUN, keys=[{"path": ["sqlmesh_example", "full_model"]}])["assetsLatestInfo"]
        assert latest["latestRun"] == {"id": failed["runId"], "status": "FAILURE"}
        from browser import page_text, rendered_dom, screenshot

        page = f"{dagster.url.removesuffix('/graphql')}/assets/sqlmesh_example/full_model"
        dom = rendered_dom(page, "Failed")
        screenshot(page, tmp_path / "blocked_full_model.png")
        assert "Failed" in page_text(dom)
    finally:
        path = dagster.project / "models" / "incremental_model.sql"
        path.write_text(path.read_text().replace("  RAISE_ERROR('broken') AS broken,\n", ""))
        dagster.query(RELOAD, name=LOCATION)
        dagster.wait_loaded()
