"""End to end through `mesh ui` (webserver, daemon, code server) and GraphQL: a change materialized
in prod's own code location without promote_prod does not make prod look fresh (issue 20: "a
version is FRESH in prod only once prod's views point at it").

Dagster writes the run's code version on the run's materializations; the re-stamp sensor, ticked
by Dagster's own daemon, then stamps back what prod serves (its runless asset events), so
`staleStatusByPartition` reads stale while `SELECT` from prod's view returns the old columns, and
fresh again only once promote_prod points the view at the new version (re-stamp runs, nothing
computed)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from plan_checks import plan_check_shown
from project_copies import edit, recent_example
from test_dagster_webserver import DAYS, LAUNCH_RUN, PARTITIONS, RELOAD, Dagster, _free_port, _mesh

pytestmark = pytest.mark.slow

RANGE = {"dagster/asset_partition_range_start": PARTITIONS[0], "dagster/asset_partition_range_end": PARTITIONS[-1]}
LATEST = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetMaterializations(limit: 1) {
  runId metadataEntries { label ... on TextMetadataEntry { text } } } } }"""


PLAN = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { description
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { evaluation { description } } } } } } }"""


def _plan_counts(server: Dagster, where: str = "description") -> tuple[list[str], str]:
    """What the plan says incremental_model recomputes and reuses (`recompute-N`, `reuse-M`, the
    counts above 0) and its line, from the asset's description or (`where="check"`) from the
    latest verdict of its serves_current_code check."""
    (node,) = server.query(PLAN, keys=[{"path": ["sqlmesh_example", "incremental_model"]}])["assetNodes"]
    text = node["description"] or ""
    if where == "check":
        text = plan_check_shown(node["assetChecksOrError"]["checks"])[1]
    line = next((ln for ln in text.splitlines() if "recompute" in ln), "")
    found = re.search(r"(\d+) partition\(s\) to recompute, (\d+) reused", line)
    counts = [(f"recompute-{found[1]}", found[1]), (f"reuse-{found[2]}", found[2])] if found else []
    return sorted(c for c, n in counts if n != "0"), line


def _latest_outcome(server: Dagster) -> tuple[str, str]:
    (node,) = server.query(LATEST, keys=[{"path": ["sqlmesh_example", "incremental_model"]}])["assetNodes"]
    (event,) = node["assetMaterializations"]
    meta = {m["label"]: m.get("text") for m in event["metadataEntries"]}
    return event["runId"], meta.get("mesh/outcome") or ""


def _prod_columns(project) -> str:
    out = _mesh(project, "fetchdf", "SELECT * FROM sqlmesh_example.incremental_model LIMIT 1")
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()[0]


def test_a_change_materialized_in_prods_location_is_stale_until_promote_prod(tmp_path):
    project = recent_example(tmp_path / "project", DAYS)
    with (project / "config.yaml").open("a") as config:  # the daemon's sensors look every 5 s, not 30
        config.write("\ndagster:\n  sensor_interval_s: 5\n")
    applied = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(project), "plan",
                              "--auto-apply"], capture_output=True, text=True, timeout=900)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    server = Dagster(project, _free_port(), tmp_path / "dagster.log")
    try:
        server.wait_loaded()
        server.until(lambda: server.stale("incremental_model") == "F" * DAYS, "prod's data shown", 300)

        edit(project, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
        server.query(RELOAD, name="project_prod")
        server.wait_loaded()
        assert server.stale("incremental_model") == "S" * DAYS  # the pending change
        assert _plan_counts(server)[0] == [f"recompute-{DAYS}"]
        selector = {"repositoryLocationName": "project_prod", "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB", "assetSelection": [{"path": ["sqlmesh_example", "incremental_model"]}]}
        launched = server.query(LAUNCH_RUN, p={"selector": selector, "executionMetadata": {
            "tags": [{"key": k, "value": v} for k, v in RANGE.items()]}})["launchRun"]
        run_id = launched["run"]["runId"]
        assert server.wait_run(run_id) == "SUCCESS", server.failure(run_id)

        # the run computed the version's intervals: mesh ui reloads prod's location, whose counts say so
        # (issue 38, point 2: no "Reload definitions" by hand)
        server.until(lambda: _plan_counts(server)[0] == [f"reuse-{DAYS}"], "prod's counts after the run", 120)
        assert f"0 partition(s) to recompute, {DAYS} reused" in _plan_counts(server)[1]
        # and so does the plan check's verdict, at the daemon's next tick of restamp_prod_sensor
        server.until(lambda: _plan_counts(server, "check")[0] == [f"reuse-{DAYS}"], "the plan check's counts", 120)

        # the daemon's tick of restamp_prod_sensor stamps back what prod serves: stale, not fresh
        server.until(lambda: _latest_outcome(server)[1] == "served", "the stamp-back", 180)
        assert server.stale("incremental_model") == "S" * DAYS
        assert "new_column" not in _prod_columns(project)  # what prod's view returns

        promoted = server.launch("promote_prod")
        assert server.wait_run(promoted) == "SUCCESS", server.failure(promoted)
        assert "new_column" in _prod_columns(project)
        # mesh ui reloads prod's location, the sensor's re-stamp run marks the served version fresh
        server.until(lambda: server.stale("incremental_model") == "F" * DAYS, "fresh after promote_prod", 300)
        assert _latest_outcome(server)[1] == "restamped"
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")
