"""As a user sees it, in headless Chromium through `mesh ui`'s webserver: a model's description
holding a right-to-left override (U+202E) and an escape sequence shows their escapes on the asset
page, and a model whose query fails quoting such text shows it escaped on the run's page, in the
run's log and in the step's failure, never reversed (issue 34, point 11). The column schema a
materialization reports (its types read from the table when the query left one unknown) is escaped
too, and so are the failing rows a failed audit's check shows. The screenshots are kept in the test's
directory (asset_page.png, run_page.png, check_page.png) to look at.
"""

from __future__ import annotations

import pytest
from browser import page_text, rendered_dom, screenshot
from plan_checks import audit_checks
from project_builder import write_project
from test_dagster_webserver import Dagster, _free_port

from mesh_dagster.context import Context

pytestmark = pytest.mark.slow

RLO = "\u202e"
DESCRIPTION = f"Orders, {RLO}desrever{RLO} and\x1b[2K hidden"
SHOWN_DESCRIPTION = "Orders, \\u202edesrever\\u202e and\\x1b[2K hidden"
RAISED = f"bad row {RLO}kcab\x1b[2K"
SHOWN_RAISED = "bad row \\u202ekcab\\x1b[2K"
COLUMN = f"The {RLO}eman"
MODELS = {  # elt(...): a type the query leaves unknown, read from the table once written
    "models/described.sql": f"MODEL (name s.described, kind FULL, description '{DESCRIPTION}', column_descriptions "
                            f"(e = '{COLUMN}'));\n\nSELECT 1 AS id, elt(1, 'a', 'b') AS e\n",
    "models/broken.sql": f"MODEL (name s.broken, kind FULL);\n\nSELECT CAST(raise_error('{RAISED}') AS INT) AS x\n",
    # a failed audit's check shows some of its failing rows (issue 38, point 6), escaped as well
    "models/audited.sql": "MODEL (name s.audited, kind FULL, audits (not_null(columns := (v), blocking := false)));\n\n"
                          f"SELECT id, IF(id > 2, NULL, 'x') AS v, '{RLO}row' AS note "
                          "FROM (SELECT EXPLODE(SEQUENCE(1, 14)) AS id)\n",
}
CHECK = """query($key: AssetKeyInput!) { assetNodes(assetKeys: [$key]) { assetChecksOrError { ... on AssetChecks {
  checks { name executionForLatestMaterialization { evaluation { success metadataEntries { label
  ... on MarkdownMetadataEntry { mdStr } ... on IntMetadataEntry { intValue } } } } } } } } }"""
STEPS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename
  ... on MessageEvent { message }
  ... on ExecutionStepFailureEvent { error { message cause { message } } }
  ... on RunFailureEvent { error { message } } } } } }"""
LATEST = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetMaterializations(limit: 1) {
  runId metadataEntries { label ... on TableSchemaMetadataEntry { schema { columns { name description } } } } } } }"""


def _no_hidden(text: str) -> None:
    assert RLO not in text and "\x1b" not in text, repr(text)


def test_the_asset_page_and_a_failed_runs_page_show_hidden_characters_as_escapes(tmp_path):
    project = write_project(tmp_path / "project", MODELS)
    server = Dagster(project, _free_port(), tmp_path / "dagster.log")
    try:
        server.wait_loaded()
        run_id = server.launch("__ASSET_JOB", assets=[["s", "described"], ["s", "broken"], ["s", "audited"]])
        assert server.wait_run(run_id) == "FAILURE"
        events = server.query(STEPS, id=run_id)["logsForRun"]["events"]
        (failure,) = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
        assert SHOWN_RAISED in failure["error"]["cause"]["message"]
        assert any(e.get("message", "").startswith("s.broken failed: ") and SHOWN_RAISED in e["message"]
                   for e in events)  # the run's log line, written as the model failed
        _no_hidden(str(events))
        (node,) = server.query(LATEST, keys=[{"path": ["s", "described"]}])["assetNodes"]
        (materialized,) = node["assetMaterializations"]
        entries = {e["label"]: e for e in materialized["metadataEntries"]}
        assert (materialized["runId"], "dagster/column_schema" in entries) == (run_id, True), (
            materialized, [e.get("message") for e in events])
        schema = entries["dagster/column_schema"]["schema"]
        assert {"name": "e", "description": "The \\u202eeman"} in schema["columns"]
        ctx = Context(project)
        broken = ctx.plans.plan("prod", allow_empty=True).snapshots["s.broken"]
        assert ctx.state.intervals.get_intervals([broken.interval_key]).get(broken.interval_key, []) == []  # nothing recorded
        ctx.close()

        run_page = server.url.removesuffix("/graphql") + f"/runs/{run_id}?logs=step%3As__broken"  # its step's rows
        dom = rendered_dom(run_page, "s.broken failed", SHOWN_RAISED)
        screenshot(run_page, tmp_path / "run_page.png")
        assert SHOWN_RAISED in page_text(dom), page_text(dom)[-3000:]
        _no_hidden(page_text(dom))

        (audited,) = server.query(CHECK, key={"path": ["s", "audited"]})["assetNodes"]
        (check,) = audit_checks(audited["assetChecksOrError"]["checks"])
        evaluation = check["executionForLatestMaterialization"]["evaluation"]
        entries = {e["label"]: e for e in evaluation["metadataEntries"]}
        assert (evaluation["success"], entries["failing_rows"]["intValue"]) == (False, 12)
        sample = entries["failing_rows_sample"]["mdStr"]
        assert sample.startswith("10 of 12 failing row(s):") and sample.count("| `\\u202erow` |") == 10, sample
        _no_hidden(sample)
        # The check page (kept to look at) shows this table under "Latest execution" until the re-stamp
        # sensor stamps prod's unserved data back: then its latest execution is "Not evaluated" (a
        # race with the daemon's tick), so the page is not asserted on here.
        check_page = server.url.removesuffix("/graphql") + f"/assets/s/audited?view=checks&checkDetail={check['name']}"
        screenshot(check_page, tmp_path / "check_page.png")

        asset_page = server.url.removesuffix("/graphql") + "/assets/s/described"
        dom = rendered_dom(asset_page, SHOWN_DESCRIPTION)
        screenshot(asset_page, tmp_path / "asset_page.png")
        assert SHOWN_DESCRIPTION in page_text(dom), page_text(dom)[-3000:]
        _no_hidden(page_text(dom))
    finally:
        server.stop()
        from mesh_dagster.engine.connect_server import stop_server

        stop_server(project / ".mesh")
