"""`mesh ui` keeps its code locations in step with the state store (dagster/ui/watch.py), without
Spark: the workspace it writes, and the reloads it asks a webserver for — here a stand-in HTTP
server that records the GraphQL mutations it receives — when what an environment serves changes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from project_builder import record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster.ui.watch import WorkspaceWatch
from mesh_dagster.dagster.ui.workspace import workspace_environments, write_workspace

MODELS = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n"}
GIT = "protected_environments:\n  prod: {}\ngit:\n  repo: ../warehouse.git\n"


class Recorder(ThreadingHTTPServer):
    def __init__(self):
        self.received: list[dict] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append(body)  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"data": {}}')

    def log_message(self, *args):  # quiet
        pass


def test_the_workspace_has_a_location_for_pushed_environments_only_with_git(tmp_path):
    plain = write_project(tmp_path / "plain", MODELS)
    workspace = write_workspace(plain, ["prod", "dev"])
    assert workspace_environments(workspace) == ["prod", "dev"]
    assert "pushed" not in workspace.read_text()

    watched = write_project(tmp_path / "watched", MODELS, GIT)
    workspace = write_workspace(watched, ["prod", "dev"])
    assert workspace_environments(workspace) == ["prod", "dev"]  # the pushed ones are not listed one by one
    assert "location_name: watched_pushed" in workspace.read_text()
    assert "def pushed_environments():" in (workspace.parent / "locations.py").read_text()


def test_a_location_is_reloaded_when_what_its_environment_serves_changes(tmp_path):
    root = write_project(tmp_path / "p", MODELS)
    workspace = write_workspace(root, ["prod", "dev"])
    server = Recorder()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        watch = WorkspaceWatch(workspace, "127.0.0.1", server.server_address[1])
        watch.tick()  # the first look only notes what is served
        assert server.received == []
        ctx = Context(root)
        try:
            record_plan(ctx.plans.plan("prod"), ctx.state)  # prod now serves something (a promotion, an apply)
        finally:
            ctx.close()
        watch.tick()
        assert [r["variables"] for r in server.received] == [{"name": "p_prod"}]
        assert "reloadRepositoryLocation" in server.received[0]["query"]
        watch.tick()  # nothing changed since
        assert len(server.received) == 1
    finally:
        server.shutdown()


def test_a_location_is_reloaded_when_the_versions_it_counts_as_pending_gain_intervals(tmp_path):
    """Its `recompute-N` would go stale: intervals of a pending version computed by a run, another
    environment or `mesh` (issue 38, point 2). A new note (the reloaded location's) is no change."""
    from mesh_dagster.dagster.mapping.pending import note_pending

    root = write_project(tmp_path / "p", MODELS)
    workspace = write_workspace(root, ["prod", "dev"])
    server = Recorder()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        note_pending(root, "dev", [("s.a", "v1")])
        watch = WorkspaceWatch(workspace, "127.0.0.1", server.server_address[1])
        watch.tick()
        ctx = Context(root)
        try:
            ctx.state.intervals.add_interval("s.a", "v1", 0, 86_400_000)  # computed elsewhere
            watch.tick()
            assert [r["variables"] for r in server.received] == [{"name": "p_dev"}]
            note_pending(root, "dev", [("s.a", "v2")])  # the reloaded location counts another version
            watch.tick()
            ctx.state.intervals.add_interval("s.a", "v9", 0, 86_400_000)  # not a version it counts
            watch.tick()
            assert len(server.received) == 1
        finally:
            ctx.close()
    finally:
        server.shutdown()


def test_a_location_is_reloaded_when_its_environments_waiting_plans_change(tmp_path):
    """The review and apply jobs list the waiting plans: a recorded or decided plan reloads the list."""
    root = write_project(tmp_path / "p", MODELS, "protected_environments:\n  prod:\n    approvers: [bob@example.com]\n")
    workspace = write_workspace(root, ["prod", "dev"])
    server = Recorder()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        watch = WorkspaceWatch(workspace, "127.0.0.1", server.server_address[1])
        watch.tick()
        ctx = Context(root)
        try:
            record = ctx.reviews.record(ctx.plans.plan("prod"))  # pending: prod serves nothing yet
            watch.tick()
            assert [r["variables"] for r in server.received] == [{"name": "p_prod"}]
            ctx.reviews.records.decide(record.plan_id, "reject", "bob@example.com")
            watch.tick()
            assert [r["variables"] for r in server.received] == [{"name": "p_prod"}] * 2
        finally:
            ctx.close()
    finally:
        server.shutdown()
