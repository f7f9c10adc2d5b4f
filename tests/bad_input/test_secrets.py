"""Secrets never printed: `mesh info`, error lines, webhook warnings show `***` in their place.

`mesh info` used to print the Connect token of `remote: sc://...;token=...` and secret settings of
`connection.config` (`spark.hadoop.fs.s3a.secret.key`) in clear; a webhook URL with
`user:password@` was accepted, never delivered (urllib reads the password as part of the host) and
its warning printed the password. Such a URL is now delivered with HTTP basic auth.
What counts as a secret: core/config/redaction.py.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from project_builder import write_project

from bad_input.harness import EXAMPLE, assert_refused, closed_port, copy_example, mesh, nothing_written
from mesh_dagster.context import Context
from tests.execution.fake_engine import FakeEngine

SECRETS = ("T0KEN-SEKRET", "S3-SEKRET", "AKIA-SEKRET", "PG-SEKRET", "HOOK-SEKRET")
WHEN = "2020-01-03"


def _connection(project: Path, lines: str) -> None:
    """Put `lines` (indented for `connection:`) after the example's `master:` line."""
    path = project / "config.yaml"
    text = path.read_text()
    anchor = "      master: local[*]           # <-- or a cluster master, e.g. spark://host:7077, yarn\n"
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + lines, 1))


def test_info_hides_the_connect_token_and_secret_settings(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "p")
    _connection(project, "      remote: sc://127.0.0.1:15002/;token=T0KEN-SEKRET;user_id=ann\n"
                         "      config:\n"
                         "        spark.hadoop.fs.s3a.secret.key: S3-SEKRET\n"
                         "        spark.hadoop.fs.s3a.access.key: AKIA-SEKRET\n"
                         "        spark.sql.shuffle.partitions: '8'\n")
    result = mesh(project, "info")
    assert result.exit_code == 0, result.stderr
    assert not [s for s in SECRETS if s in result.stdout + result.stderr], result.stdout
    connection = next(line for line in result.stdout.splitlines() if line.startswith("connection:"))
    assert "token=***;user_id=ann" in connection
    assert "'spark.hadoop.fs.s3a.secret.key': '***'" in connection
    assert "'spark.hadoop.fs.s3a.access.key': '***'" in connection
    assert "'spark.sql.shuffle.partitions': '8'" in connection  # not a secret: shown


def test_info_hides_passwords_in_settings_and_urls(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "p")
    _connection(project, "      config:\n"
                         "        spark.hadoop.javax.jdo.option.ConnectionPassword: PG-SEKRET\n"
                         "        spark.hadoop.javax.jdo.option.ConnectionURL: "
                         "'jdbc:postgresql://127.0.0.1/m?user=ann&password=PG-SEKRET'\n"
                         "        spark.eventLog.dir: 's3a://ann:AKIA-SEKRET@bucket/logs'\n")
    result = mesh(project, "info")
    assert result.exit_code == 0, result.stderr
    assert "SEKRET" not in result.stdout, result.stdout
    assert "'spark.hadoop.javax.jdo.option.ConnectionPassword': '***'" in result.stdout
    assert "jdbc:postgresql://127.0.0.1/m?user=ann&password=***" in result.stdout
    assert "s3a://ann:***@bucket/logs" in result.stdout


def test_info_lines_are_bounded(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "p")
    _connection(project, f"      config:\n        spark.app.comment: '{'x' * 100_000}'\n")
    result = mesh(project, "info")
    assert result.exit_code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("connection:"))
    assert len(line) < 2200 and "more characters)" in line


def test_a_refused_webhook_url_does_not_print_its_password(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "p")
    path = project / "config.yaml"
    path.write_text(path.read_text() + "\nnotification_targets:\n  - url: ftp://bob:HOOK-SEKRET@hooks.example.com/x\n")
    lines = len((EXAMPLE / "config.yaml").read_text().splitlines())
    with nothing_written(project):
        result = mesh(project, "plan", "--explain")
    line = assert_refused(result, f"config.yaml:{lines + 3}:", "ftp://bob:***@hooks.example.com/x",
                          "is not an http(s) URL")
    assert "HOOK-SEKRET" not in line


class Hook:
    """A real HTTP server on 127.0.0.1 that keeps the bodies and Authorization headers it is sent."""

    def __init__(self) -> None:
        received: list[tuple[str | None, dict]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received.append((self.headers.get("Authorization"), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


def _protected(tmp_path: Path, targets: str) -> Path:
    config = ("model_defaults:\n  dialect: spark\n  start: 2020-01-01\nprotected_environments:\n  prod:\n"
              "    approvers: [alice@example.com, bob@example.com]\nnotification_targets:\n" + targets)
    return write_project(tmp_path / "p", {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n"}, config)


def test_a_webhook_url_with_a_password_is_delivered_with_basic_auth(tmp_path: Path, hook: Hook,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = _protected(tmp_path, f"  - url: http://bob:HOOK-SEKRET%21@127.0.0.1:{hook.port}/hook\n")
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    result = mesh(root, "plan", "--no-prompts", "--execution-time", WHEN)  # records it: plan_pending
    assert result.exit_code == 0, result.stderr
    assert "HOOK-SEKRET" not in result.stdout + result.stderr
    ((authorization, body),) = hook.received
    assert authorization == "Basic " + base64.b64encode(b"bob:HOOK-SEKRET!").decode()
    assert body["event"] == "plan_pending" and body["changes"] == ["s.a"]


def test_webhook_warnings_and_bodies_hide_passwords_and_show_escapes(tmp_path: Path, hook: Hook, caplog,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    dead = closed_port()
    root = _protected(tmp_path, f"  - url: http://127.0.0.1:{hook.port}/hook\n"
                                f"  - url: https://bob:HOOK-SEKRET@127.0.0.1:{dead}/hook\n")
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = Context(root, engine=FakeEngine())
    try:
        plan = ctx.plans.plan("prod", execution_time=WHEN)
        ctx.reviews.record(plan)
        monkeypatch.setenv("MESH_USER", "bob@example.com")
        with caplog.at_level(logging.INFO, logger="mesh_dagster.notify"):
            ctx.decide(plan.plan_id, "approve", "ok \x1b[2K\u202e sc://h:1/;token=T0KEN-SEKRET")
    finally:
        ctx.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"https://bob:***@127.0.0.1:{dead}/hook" in logged and "not delivered" in logged
    assert not [s for s in SECRETS if s in logged]
    notes = [body.get("note") for _, body in hook.received if body["event"] == "plan_approved"]
    assert notes == ["ok \\x1b[2K\\u202e sc://h:1/;token=***"]
