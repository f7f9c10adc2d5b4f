"""The Dagster view tells the truth (issue 20), end to end: `mesh ui` (webserver + daemon + code
servers, prod and dev locations) on the example moved to the last days, prod applied by the CLI
first, driven and checked through GraphQL, and the plan at a glance also in headless Chromium.

The tests run in order on one server and build on each other:
1. a change shows at a glance on graph nodes and catalog rows (the serves_current_code check's
   warning and the description's first line, as `mesh plan` says it), with whole names;
2. prod shows what prod serves: the change computed in dev leaves prod's partitions stale until
   promote_prod, then they are fresh;
3. a failing model fails its own asset (its partitions FAILED, one line, no stack trace, the run's
   failure too), the model reading it is not materialized (what Dagster shows for it, and why: see
   `_blocked_reader_shows_why`), the healthy one is;
4. audits are checks that hold: the CLI's verdicts show as check results; a failed blocking audit
   blocks promote_dev and survives re-stamps; reverting it shows the verdict on the data dev serves at once.
(5, git pushes: test_git_webserver.py; 6, fast and quiet: test_ui_partitions.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from browser import node_tags, page_text, rendered_dom, screenshot, text_after
from plan_checks import audit_checks, plan_check_shown
from project_copies import TODAY, edit, recent_example
from test_dagster_webserver import LAUNCH_RUN, RELOAD, Dagster, _free_port

from mesh_dagster.context import Context
from mesh_dagster.dagster.assets import NO_RESULT

pytestmark = pytest.mark.slow

DAYS = 7
FIRST = TODAY - timedelta(days=DAYS)
LAST = TODAY - timedelta(days=1)
PARTITIONS = [str(FIRST + timedelta(days=i)) for i in range(DAYS)]
RANGE = {"dagster/asset_partition_range_start": PARTITIONS[0], "dagster/asset_partition_range_end": PARTITIONS[-1]}
SCHEMA = {"prod": "sqlmesh_example", "dev": "sqlmesh_example__dev"}
NEW_COLUMN = ("  item_id,\n", "  item_id,\n  'z' AS new_column,\n")

NODES = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) {
  assetKey { path } kinds description staleStatus
  assetPartitionStatuses { ... on TimePartitionStatuses { ranges { status startKey endKey } } }
  assetMaterializations(limit: 1) { runId tags { key value }
    metadataEntries { label ... on TextMetadataEntry { text } } }
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { status evaluation { success } } } } } } }"""
STALE = """query($keys: [AssetKeyInput!], $partitions: [String!]) { assetNodes(assetKeys: $keys) {
  staleStatusByPartition(partitions: $partitions) } }"""
STEPS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename
  ... on MessageEvent { stepKey message }
  ... on ExecutionStepFailureEvent { errorSource error { message stack cause { message stack } } }
  ... on RunFailureEvent { error { message stack cause { message } } } } } } }"""
LATEST = """query($keys: [AssetKeyInput!]!) { assetsLatestInfo(assetKeys: $keys) { assetKey { path }
  latestRun { id status } latestMaterialization { runId } } }"""
CHECKS = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetChecksOrError {
  ... on AssetChecks { checks { name description executionForLatestMaterialization { runId status evaluation {
  success } } } } } } }"""
SENSORS = """query($loc: String!) { sensorsOrError(repositorySelector: {repositoryLocationName: $loc,
  repositoryName: "__repository__"}) { ... on Sensors { results { id name sensorState { status } } } } }"""
STOP_SENSOR = """mutation($id: String!) { stopSensor(id: $id) { __typename } }"""


class Truth(Dagster):
    """The UI of prod and dev, with what these tests launch and read."""

    def location(self, env: str) -> str:
        return f"project_{env}"

    def key(self, env: str, model: str) -> list[str]:
        return [SCHEMA[env], model]

    def launch_in(self, env: str, job: str, tags: dict[str, str] | None = None,
                  models: list[str] | None = None) -> str:
        selector = {"repositoryLocationName": self.location(env), "repositoryName": "__repository__", "jobName": job}
        if models:
            selector["assetSelection"] = [{"path": self.key(env, m)} for m in models]
        params = {"selector": selector,
                  "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}}
        result = self.query(LAUNCH_RUN, p=params)["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        return result["run"]["runId"]

    def run(self, env: str, job: str, tags: dict[str, str] | None = None,
            models: list[str] | None = None) -> tuple[str, str]:
        run_id = self.launch_in(env, job, tags, models)
        return run_id, self.wait_run(run_id)

    def nodes(self, env: str, *models: str) -> dict[str, dict]:
        found = self.query(NODES, keys=[{"path": self.key(env, m)} for m in models])
        return {n["assetKey"]["path"][-1]: n for n in found["assetNodes"]}

    def stale_partitions(self, env: str, model: str) -> str:
        """One letter per partition: F(resh), S(tale), M(issing)."""
        (node,) = self.query(STALE, keys=[{"path": self.key(env, model)}], partitions=PARTITIONS)["assetNodes"]
        return "".join(s[0] for s in node["staleStatusByPartition"])

    def reload(self, env: str) -> None:
        self.query(RELOAD, name=self.location(env))
        self.wait_loaded()

    def restamp_env(self, env: str) -> list[str]:
        """Tick restamp_<env>_sensor here (on the UI's instance) and launch the runs it requests
        through GraphQL, as the daemon would; returns their statuses."""
        import dagster as dg

        wanted = self.tick(env, f"restamp_{env}_sensor")
        if not isinstance(wanted, dg.SkipReason) and wanted.asset_events:  # stored, as the daemon stores them
            with dg.DagsterInstance.from_config(str(self.project / ".mesh" / "dagster")) as instance:
                for event in wanted.asset_events:
                    instance.report_runless_asset_event(event)
        requests_ = [] if isinstance(wanted, dg.SkipReason) else wanted.run_requests
        runs = [self.launch_in(env, "__ASSET_JOB", r.tags, [k.path[-1] for k in r.asset_selection or []])
                for r in requests_]
        statuses = [self.wait_run(run_id) for run_id in runs]
        assert set(statuses) <= {"SUCCESS"}, [self.failure(r) for r in runs]
        return statuses

    def tick(self, env: str, sensor: str):
        """One evaluation of `sensor` of `env`'s definitions on the UI's instance, as the daemon's."""
        import dagster as dg

        from mesh_dagster.dagster import definitions

        defs = definitions(self.project, env)
        with dg.DagsterInstance.from_config(str(self.project / ".mesh" / "dagster")) as instance, \
                dg.build_sensor_context(instance=instance, definitions=defs) as context:
            return defs.resolve_sensor_def(sensor)(context)

    def step_events(self, run_id: str) -> list[dict]:
        return self.query(STEPS, id=run_id)["logsForRun"]["events"]

    def page(self, path: str) -> str:
        return self.url.removesuffix("/graphql") + path


def _restamp_sensors_stopped(server: Truth) -> bool:
    """These tests tick the re-stamp sensors themselves: stop those still running (a stop sent while
    `mesh ui` reloads a location can be lost), True once all are stopped."""
    running = [s for env in ("prod", "dev")
               for s in server.query(SENSORS, loc=server.location(env))["sensorsOrError"].get("results", [])
               if s["name"].startswith("restamp_") and s["sensorState"]["status"] != "STOPPED"]
    for sensor in running:
        server.query(STOP_SENSOR, id=sensor["id"])
    return not running


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    work = tmp_path_factory.mktemp("truth")
    project = recent_example(work / "project", DAYS)
    with (project / "config.yaml").open("a") as config:  # the daemon's sensors look every 5 s, not 30
        config.write("\ndagster:\n  sensor_interval_s: 5\n")
    applied = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "plan",
                              "--auto-apply"], capture_output=True, text=True, timeout=900)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    server = Truth(project, _free_port(), work / "dagster.log", ["prod", "dev"])
    try:
        server.wait_loaded()
        server.until(lambda: _restamp_sensors_stopped(server), "the re-stamp sensors stopped", 120)
        server.shots = work  # type: ignore[attr-defined]
        yield server
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")


def test_0_what_the_cli_applied_shows_materialized_with_its_audit(ui):
    """The re-stamp sensor's first tick (before the fixture stopped it) or ours shows it."""
    assert set(ui.restamp_env("prod")) <= {"SUCCESS"}

    def shown() -> bool:
        nodes = ui.nodes("prod", "seed_model", "incremental_model", "full_model")
        return all(n["assetMaterializations"] for n in nodes.values()) and \
            nodes["incremental_model"]["assetPartitionStatuses"]["ranges"][:1] == [
                {"status": "MATERIALIZED", "startKey": PARTITIONS[0], "endKey": PARTITIONS[-1]}]

    ui.until(shown, "prod's data in Dagster", 120)
    nodes = ui.nodes("prod", "seed_model", "incremental_model", "full_model")
    assert nodes["incremental_model"]["assetPartitionStatuses"]["ranges"] == [
        {"status": "MATERIALIZED", "startKey": PARTITIONS[0], "endKey": PARTITIONS[-1]}]
    assert nodes["seed_model"]["assetMaterializations"] and nodes["full_model"]["assetMaterializations"]
    (check,) = audit_checks(nodes["full_model"]["assetChecksOrError"]["checks"])  # the audit `mesh plan` ran: passed
    assert check["executionForLatestMaterialization"]["status"] == "SUCCEEDED"
    # nothing pending: no plan on the assets, their plan checks pass
    assert not nodes["incremental_model"]["description"].startswith("Pending")
    assert {status for status, _ in _plan_checks(ui, "prod", "seed_model", "incremental_model",
                                                 "full_model").values()} == {"SUCCEEDED"}


LINEAGE = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  metadataEntries { label __typename
    ... on TableColumnLineageMetadataEntry { lineage { columnName columnDeps { assetKey { path } columnName } } }
    ... on TableSchemaMetadataEntry { schema { columns { name type } } }
    ... on TableMetadataEntry { table { records } } } } }"""


# The fields Dagster's UI asks for to draw column lineage (its AssetColumnLineage query): the
# definition's entries and the latest materialization's, whose lineage wins when it has one.
UI_LINEAGE = """query($keys: [AssetKeyInput!]!) { assetNodes(loadMaterializations: true, assetKeys: $keys) {
  assetKey { path }
  metadataEntries { __typename label ...L }
  assetMaterializations(limit: 1) { timestamp metadataEntries { __typename label ...L } } } }
fragment L on TableColumnLineageMetadataEntry { lineage { columnName columnDeps { assetKey { path } columnName } } }"""


def _ui_lineage(node: dict) -> dict[str, list]:
    """The lineage the UI draws for an asset node: the latest materialization's, else the definition's."""
    def canonical(entries: list[dict]) -> dict | None:
        return next((e for e in entries if e["label"] == "dagster/column_lineage"
                     and e["__typename"] == "TableColumnLineageMetadataEntry"), None)

    latest = node["assetMaterializations"][0]["metadataEntries"] if node["assetMaterializations"] else []
    found = canonical(latest) or canonical(node["metadataEntries"]) or {"lineage": []}
    return {e["columnName"]: [(d["assetKey"]["path"], d["columnName"]) for d in e["columnDeps"]]
            for e in found["lineage"]}


def test_0_column_lineage_reaches_the_webserver_in_each_environment(ui):
    """Every SQL model's asset carries its column lineage, in prod's and dev's code locations, each
    pointing at its own environment's assets, and the UI's own column lineage query finds it. The
    open-source UI of Dagster 1.13 draws no column graph (Dagster+ does, from `dagster/column_lineage`)
    and leaves that entry out of its metadata tables; it shows our `mesh/column_lineage` table on the
    asset's page, checked in Chromium."""
    def entries(schema: str, table: str) -> dict[str, dict]:
        (node,) = ui.query(LINEAGE, keys=[{"path": [schema, table]}])["assetNodes"]
        return {e["label"]: e for e in node["metadataEntries"]}

    for schema in ("sqlmesh_example", "sqlmesh_example__dev"):
        lineage = entries(schema, "full_model")["dagster/column_lineage"]
        assert lineage["__typename"] == "TableColumnLineageMetadataEntry"
        assert {e["columnName"]: [(d["assetKey"]["path"], d["columnName"]) for d in e["columnDeps"]]
                for e in lineage["lineage"]} == {
            "item_id": [([schema, "incremental_model"], "item_id")],
            "num_orders": [([schema, "incremental_model"], "id")]}
        upstream = entries(schema, "incremental_model")
        assert {"id", "item_id"} <= {c["name"] for c in upstream["dagster/column_schema"]["schema"]["columns"]}
        assert [(d["assetKey"]["path"], d["columnName"]) for e in upstream["dagster/column_lineage"]["lineage"]
                if e["columnName"] == "id" for d in e["columnDeps"]] == [([schema, "seed_model"], "id")]
        (node,) = ui.query(UI_LINEAGE, keys=[{"path": [schema, "full_model"]}])["assetNodes"]
        if schema == "sqlmesh_example":  # materialized (test_0_what_the_cli_applied...): its entries are read first
            assert node["assetMaterializations"], "the CLI's apply shows as a materialization"
        assert _ui_lineage(node) == {"item_id": [([schema, "incremental_model"], "item_id")],
                                     "num_orders": [([schema, "incremental_model"], "id")]}
        shown = [json.loads(r) for r in entries(schema, "full_model")["mesh/column_lineage"]["table"]["records"]]
        assert shown == [{"column": "item_id", "reads": f"{schema}/incremental_model.item_id"},
                         {"column": "num_orders", "reads": f"{schema}/incremental_model.id"}]

    page = ui.page("/assets/sqlmesh_example__dev/full_model")
    dom = rendered_dom(page, "mesh/column_lineage", "sqlmesh_example__dev/incremental_model.id")
    assert "num_orders sqlmesh_example__dev/incremental_model.id" in text_after(dom, "mesh/column_lineage"), \
        page_text(dom)[-3000:]
    screenshot(page, ui.shots / "column_lineage.png")


PLAN_CHECKS = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { status evaluation { success description } } } } } } }"""


def _plan_checks(ui: Truth, env: str, *models: str) -> dict[str, tuple[str, str]]:
    """Model -> (status, description) of its serves_current_code check's latest execution."""
    found = ui.query(PLAN_CHECKS, keys=[{"path": ui.key(env, m)} for m in models])["assetNodes"]
    return {node["assetKey"]["path"][-1]: plan_check_shown(node["assetChecksOrError"]["checks"]) for node in found}


def test_1_a_change_shows_at_a_glance_on_the_graph_and_in_the_catalog(ui):
    """The plan at a glance, where a Dagster user looks first: the description's first line (the
    catalog row's), a warning from the serves_current_code check on every changed model (graph node,
    asset page), the partitions of a changed incremental model stale; the kinds are icons, so the
    catalog shows whole names."""
    edit(ui.project, "incremental_model", *NEW_COLUMN)
    ui.reload("prod")
    ui.restamp_env("prod")  # the re-stamp sensor's tick, as the daemon's: the plan check's new verdicts
    nodes = ui.nodes("prod", "incremental_model", "full_model")
    inc, full = nodes["incremental_model"], nodes["full_model"]
    assert set(inc["kinds"]) == {"spark", "table"} and set(full["kinds"]) == {"spark", "table"}
    line = f"Pending change (Non-breaking) in prod: {DAYS} partition(s) to recompute, 0 reused."
    assert inc["description"].startswith(line)
    assert full["description"].startswith("Pending change (Indirect Non-breaking) in prod: reused, nothing to "
                                          "recompute.")
    checks = _plan_checks(ui, "prod", "seed_model", "incremental_model", "full_model")
    assert checks["incremental_model"][0] == "FAILED" and checks["incremental_model"][1].startswith(line)
    assert checks["full_model"][0] == "FAILED" and "Indirect Non-breaking" in checks["full_model"][1]
    assert checks["seed_model"] == ("SUCCEEDED", "'prod' serves the current code.")
    assert ui.stale_partitions("prod", "incremental_model") == "S" * DAYS  # prod's data, of the old version

    # what the browser shows: no words among the kinds, the check's warning on the node, whole names
    graph = ui.page("/locations/project_prod/asset-groups/sqlmesh_example")
    dom = rendered_dom(graph, "incremental_model", "Asset checks")
    assert set(node_tags(dom, "sqlmesh_example/incremental_model")) <= {"Spark", "Table"}, dom[-3000:]
    screenshot(graph, ui.shots / "plan_graph.png")
    catalog = page_text(rendered_dom(ui.page("/assets"), "Pending change (Non-breaking) in prod"))
    assert line in catalog
    for model in ("seed_model", "incremental_model", "full_model"):
        assert f"sqlmesh_example / {model}" in catalog, catalog  # not cut to "sqlme…model"
    screenshot(ui.page("/assets"), ui.shots / "plan_catalog.png")
    page = ui.page("/assets/sqlmesh_example/incremental_model?view=checks")
    assert line in page_text(rendered_dom(page, "serves_current_code", line))
    screenshot(page, ui.shots / "plan_check.png")


def test_2_prod_is_fresh_only_once_prod_serves_the_change(ui):
    ui.reload("dev")
    run_id, status = ui.run("dev", "__ASSET_JOB", RANGE, ["incremental_model"])
    assert status == "SUCCESS", ui.failure(run_id)
    assert ui.run("dev", "promote_dev")[1] == "SUCCESS"
    ui.restamp_env("prod")  # the new version's data exists, but prod's views still show the old one
    prod = ui.nodes("prod", "incremental_model")["incremental_model"]
    assert ui.stale_partitions("prod", "incremental_model") == "S" * DAYS  # the pending change
    tags = {t["key"]: t["value"] for t in prod["assetMaterializations"][0]["tags"]}
    plan = Context(ui.project).plans.plan("prod", allow_empty=True)
    assert tags["dagster/code_version"] != plan.snapshots["sqlmesh_example.incremental_model"].identifier

    run_id, status = ui.run("prod", "promote_prod")
    assert status == "SUCCESS", ui.failure(run_id)
    # mesh ui reloads prod's location (it serves something new): no pending change left on it
    ui.until(lambda: not ui.nodes("prod", "incremental_model")["incremental_model"]["description"].startswith(
        "Pending"), "prod's location to show the promoted plan", 120)
    assert set(ui.restamp_env("prod")) == {"SUCCESS"}
    assert ui.stale_partitions("prod", "incremental_model") == "F" * DAYS
    assert _plan_checks(ui, "prod", "incremental_model")["incremental_model"][0] == "SUCCEEDED"  # no reload by hand


def test_3_a_failing_model_fails_its_own_asset_only(ui):
    path = ui.project / "models" / "incremental_model.sql"
    original = path.read_text()
    edit(ui.project, "incremental_model", "  item_id,\n", "  item_id,\n  CAST(raise_error('boom') AS INT) AS x,\n")
    try:
        ui.reload("dev")
        run_id, status = ui.run("dev", "__ASSET_JOB", RANGE, ["seed_model", "incremental_model", "full_model"])
        assert status == "FAILURE"
        events = ui.step_events(run_id)
        started = {e["stepKey"] for e in events if e["__typename"] == "ExecutionStepStartEvent"}
        assert started == {"sqlmesh_example__dev__seed_model", "sqlmesh_example__dev__incremental_model"}
        (failure,) = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
        assert failure["stepKey"] == "sqlmesh_example__dev__incremental_model"
        assert failure["errorSource"] == "USER_CODE_ERROR"  # the UI hides Dagster's own stack for it
        cause = failure["error"]["cause"]
        assert cause["stack"] == [] and cause["message"].startswith("mesh.ModelFailed: ")
        assert "boom" in cause["message"] and "\n" not in cause["message"].strip()
        # the run's last row: Dagster's "Steps failed: [...]", then that one line, no stack trace
        (run_failure,) = [e for e in events if e["__typename"] == "RunFailureEvent"]
        assert run_failure["message"].endswith("Steps failed: ['sqlmesh_example__dev__incremental_model'].")
        assert run_failure["error"] == {"message": cause["message"], "stack": [], "cause": None}, run_failure
        screenshot(ui.page(f"/runs/{run_id}"), ui.shots / "failure_run.png")
        nodes = ui.nodes("dev", "incremental_model", "full_model")
        assert nodes["incremental_model"]["assetPartitionStatuses"]["ranges"][-1]["status"] == "FAILED"
        _blocked_reader_shows_why(ui, run_id, events)
    finally:
        path.write_text(original)
        ui.reload("dev")


def _blocked_reader_shows_why(ui: Truth, run_id: str, events: list[dict]) -> None:
    """full_model (FULL: no partitions) reads the failed model: Dagster does not run its step, so it
    is not materialized and its audit gives no verdict. What Dagster 1.13 shows for it, and why:
    - its node says "Failed", linking the run: for an asset without partitions the UI shows the
      latest run that planned it (every asset of a run is planned when the run starts) as failed
      when that run failed without materializing it; a partitioned reader shows missing partitions;
    - its check is EXECUTION_FAILED, with no evaluation: Dagster plans the checks of a run's assets
      when the run starts and resolves one left without a result by the run's status alone (a
      failed run: EXECUTION_FAILED; the UI says "Failed" / "Execution failed"). No verdict is
      recorded (it would be one for an audit that did not run); the check's description, shown
      beside it, says what no result means."""
    reader = [e["message"] for e in events if e.get("stepKey") == "sqlmesh_example__dev__full_model"]
    assert any(m.startswith("Dependencies for step sqlmesh_example__dev__full_model failed") for m in reader), reader
    nodes = ui.nodes("dev", "full_model")
    assert all(m["runId"] != run_id for m in nodes["full_model"]["assetMaterializations"])  # not by this run
    (latest,) = ui.query(LATEST, keys=[{"path": ui.key("dev", "full_model")}])["assetsLatestInfo"]
    assert latest["latestRun"] == {"id": run_id, "status": "FAILURE"}
    assert (latest["latestMaterialization"] or {}).get("runId") != run_id
    (node,) = ui.query(CHECKS, keys=[{"path": ui.key("dev", "full_model")}])["assetNodes"]
    (check,) = audit_checks(node["assetChecksOrError"]["checks"])
    execution = check["executionForLatestMaterialization"]
    assert execution["runId"] == run_id and execution["status"] == "EXECUTION_FAILED"
    assert execution["evaluation"] is None  # no verdict: not a failed audit (that has its failing rows)
    assert check["description"].endswith(NO_RESULT)

    graph = ui.page("/locations/project_dev/asset-groups/sqlmesh_example__dev")
    dom = rendered_dom(graph, "full_model", "Failed")
    (ui.shots / "failure_graph.html").write_text(dom)
    screenshot(graph, ui.shots / "failure_graph.png")
    assert "Failed" in node_text(dom, "sqlmesh_example__dev/full_model"), node_text(dom, "sqlmesh_example__dev/full_model")
    checks = ui.page("/assets/sqlmesh_example__dev/full_model?view=checks")
    said = "means this audit gave no verdict"
    assert said in NO_RESULT
    dom = rendered_dom(checks, "Execution failed", said)
    assert "Execution failed" in dom and said in dom, dom[-3000:]
    screenshot(checks, ui.shots / "failure_checks.png")


def node_text(dom: str, asset_path: str) -> str:
    """The text of the graph's node of asset `a/b` from its first link up to the next node's."""
    start = dom.find(f'href="/assets/{asset_path}')
    if start < 0:
        return ""
    rest = dom[start:]
    others = [m.start() for m in re.finditer(r'href="/assets/([^"?]+)', rest) if m.group(1) != asset_path]
    return page_text(rest[:others[0]] if others else rest)


OWNER = ("  cron '@daily',\n", "  cron '@daily',\n  owner someone,\n")  # a metadata change of full_model
SENSOR_STATE = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor {
  id sensorState { status } } } }"""
START_SENSOR = """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename } }"""
SHOWN = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { opVersion staleStatus
  assetMaterializations(limit: 1) { tags { key value } metadataEntries { label ... on TextMetadataEntry { text } } }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } }"""


def _dev_daemon_stamps(ui):
    """dev's re-stamp sensor, run by the daemon from here on (the other tests tick it by hand):
    what it requests goes through Dagster's own run-key bookkeeping, as for a user."""
    selector = {"repositoryLocationName": ui.location("dev"), "repositoryName": "__repository__",
                "sensorName": "restamp_dev_sensor"}
    assert ui.query(START_SENSOR, s=selector)["startSensor"]["__typename"] == "Sensor"
    return selector


def _shown(ui) -> tuple[str, str, str, str]:
    """(code version of the location, of the latest materialization, its outcome, the check's status)."""
    (node,) = ui.query(SHOWN, keys=[{"path": ui.key("dev", "full_model")}])["assetNodes"]
    latest = (node["assetMaterializations"] or [{"tags": [], "metadataEntries": []}])[0]
    tags = {t["key"]: t["value"] for t in latest["tags"]}
    outcome = {m["label"]: m.get("text") for m in latest["metadataEntries"]}.get("mesh/outcome", "")
    (check,) = audit_checks(node["assetChecksOrError"]["checks"])
    execution = check["executionForLatestMaterialization"] or {"status": ""}
    return node["opVersion"], tags.get("dagster/code_version", ""), outcome, execution["status"]


def _stamped(ui, check: str, what: str) -> None:
    """Wait until the daemon re-stamped full_model under the location's code version, its check `check`."""
    def done() -> bool:
        current, stamped, outcome, status = _shown(ui)
        return current == stamped and outcome == "restamped" and status == check

    ui.until(done, what, 180)


def test_4_a_failed_blocking_audit_blocks_promotion_and_stays_failed(ui):
    """A failed blocking audit blocks promote_dev and its check stays failed through a re-stamp;
    reverting the audit (issue 38, point 1) shows the served data's passed verdict and no Unsynced
    badge at once, without recomputing: the daemon re-stamps the reverted code version, although
    it re-stamped that very version before the failure (Dagster launches a run key once)."""
    audit = ui.project / "audits" / "assert_positive_order_ids.sql"
    original = audit.read_text()
    ui.restamp_env("dev")  # nothing else outstanding: the daemon's first request is full_model's alone
    sensor = _dev_daemon_stamps(ui)
    try:
        edit(ui.project, "full_model", *OWNER)
        ui.reload("dev")
        _stamped(ui, "SUCCEEDED", "the owner change re-stamped by the daemon")
        audit.write_text(original.replace("item_id < 0", "item_id > 2"))
        ui.reload("dev")
        run_id, status = ui.run("dev", "__ASSET_JOB", None, ["full_model"])
        assert status == "FAILURE"
        assert _shown(ui)[3] == "FAILED"
        run_id, status = ui.run("dev", "promote_dev")
        assert status == "FAILURE"
        assert "blocking audit 'assert_positive_order_ids' failed" in ui.failure(run_id)
        screenshot(ui.page("/assets/sqlmesh_example__dev/full_model?view=checks"), ui.shots / "audit_checks.png")
        screenshot(ui.page(f"/runs/{run_id}"), ui.shots / "audit_promote_run.png")
        # another metadata change of full_model (the owner dropped): re-stamped, its check still fails
        edit(ui.project, "full_model", *reversed(OWNER))
        ui.reload("dev")
        _stamped(ui, "FAILED", "the failing audit carried through a re-stamp")
        # the fix: the audit reverted, full_model's code as when the daemon first stamped it
        audit.write_text(original)
        edit(ui.project, "full_model", *OWNER)
        ui.reload("dev")
        _stamped(ui, "SUCCEEDED", "the reverted audit's verdict re-stamped by the daemon")
        assert _shown(ui)[2] == "restamped"  # nothing recomputed
        assert ui.nodes("dev", "full_model")["full_model"]["staleStatus"] == "FRESH"
        page = ui.page("/assets/sqlmesh_example__dev/full_model")
        dom = rendered_dom(page, "Latest check results", "restamped")
        screenshot(page, ui.shots / "audit_reverted.png")  # a green check, no Unsynced badge
        assert "Unsynced" not in page_text(dom) and "Latest check results" in page_text(dom)
    finally:
        audit.write_text(original)
        path = ui.project / "models" / "full_model.sql"
        path.write_text(path.read_text().replace(OWNER[1], OWNER[0]))
        ui.reload("dev")
        _stamped(ui, "SUCCEEDED", "full_model as before this test")
        ui.query(STOP_SENSOR, id=ui.query(SENSOR_STATE, s=sensor)["sensorOrError"]["id"])


OUTPUTS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
  ... on ExecutionStepOutputEvent { stepKey metadataEntries { label __typename
    ... on TableMetadataEntry { table { records } } ... on MarkdownMetadataEntry { mdStr }
    ... on TextMetadataEntry { text } } } } } } }"""


def test_5_the_plan_runs_show_the_data_diff_a_reviewer_approves(ui):
    """A change reviewed through Dagster: plan_dev records it (the diff is pending: no data of the
    new version exists yet), apply_plan_dev builds it and shows how its data differs from what dev
    served, on the model's grain, as run metadata (GraphQL) and on the run's page (Chromium); the
    plan status sensor's next tick adds the diff to plan_dev's page, the one the reviewer opened."""
    original = (ui.project / "models" / "full_model.sql").read_text()
    edit(ui.project, "full_model", "  COUNT(DISTINCT id) AS num_orders\n", "  COUNT(DISTINCT id) + 1 AS num_orders\n")
    try:
        ui.reload("dev")
        planned_run, status = ui.run("dev", "plan_dev")
        assert status == "SUCCESS", ui.failure(planned_run)
        planned = _output_metadata(ui, planned_run)
        assert planned["data_diff"]["text"].startswith("pending for sqlmesh_example.full_model")
        plan_id = planned["plan_id"]["text"]

        selector = {"repositoryLocationName": ui.location("dev"), "repositoryName": "__repository__",
                    "jobName": "apply_plan_dev"}
        launched = ui.query(LAUNCH_RUN, p={"selector": selector, "runConfigData": {
            "ops": {"apply_plan_dev_record": {"config": {"plan_id": plan_id}}}}})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        assert ui.wait_run(run_id) == "SUCCESS", ui.failure(run_id)
        applied = _output_metadata(ui, run_id)
        (row,) = [json.loads(r) for r in applied["data_diff"]["table"]["records"]]
        items = row["new_rows"]
        assert row == {"model": "sqlmesh_example.full_model", "grain": "item_id", "old_rows": items,
                       "new_rows": items, "only_new": 0, "only_old": 0, "changed": items, "unchanged": 0,
                       "note": ""}, row
        assert f"`num_orders` changed in {items} rows" in applied["data_diff_details"]["mdStr"]

        page = ui.page(f"/runs/{run_id}")
        dom = rendered_dom(page, "data_diff", "sqlmesh_example.full_model", "Show schema")
        row_shown = f"sqlmesh_example.full_model item_id {items} {items} 0 0 {items} 0"  # the table's row, as drawn
        assert row_shown in text_after(dom, "data_diff"), page_text(dom)[-3000:]
        screenshot(page, ui.shots / "data_diff_run.png")

        ui.tick("dev", "plan_status_dev_sensor")  # as the daemon's next tick: the diff joins plan_dev's page
        page = ui.page(f"/runs/{planned_run}")
        dom = rendered_dom(page, "Data diff of plan", "data_diff", "sqlmesh_example.full_model", "Show schema")
        assert row_shown in text_after(dom, "Data diff of plan"), page_text(dom)[-3000:]
        screenshot(page, ui.shots / "data_diff_plan_run.png")
    finally:
        (ui.project / "models" / "full_model.sql").write_text(original)
        ui.reload("dev")


def _output_metadata(ui: Truth, run_id: str) -> dict[str, dict]:
    """The metadata of the run's one step output, by label."""
    events = ui.query(OUTPUTS, id=run_id)["logsForRun"]["events"]
    (output,) = [e for e in events if "metadataEntries" in e]
    return {m["label"]: m for m in output["metadataEntries"]}
