"""No traceback ever reaches a user: one line, a log file holding the traceback, --debug for more.

The contract lives in the `mesh` group itself (cli/errors.py), so these tests add throw-away
commands to the real group (and to its `spark` sub-group) that fail the ways a bug would.
"""

import re
import tempfile
from pathlib import Path

import click
import pytest
from bad_input.harness import assert_refused, copy_example, mesh

from mesh_dagster.cli.errors import LOG_LIMIT, MeshGroup
from mesh_dagster.cli.main import cli
from mesh_dagster.cli.spark_commands import spark
from mesh_dagster.core.time.dates import add_months


@click.command("boom")
@click.option("--how", default="bug")
def boom(how: str) -> None:
    if how == "bug":
        raise RuntimeError("kaput")
    if how == "ctrl-c":
        raise KeyboardInterrupt
    if how == "oserror":
        raise PermissionError(13, "Permission denied", "/somewhere/state.db")
    if how == "multiline":
        raise RuntimeError("first line\nsecond line")
    if how == "ours":
        add_months(None, 1)  # a bug inside mesh_dagster, as a bad call makes one


@pytest.fixture(autouse=True)
def failing_commands(tmp_path, monkeypatch):
    """`mesh boom` and `mesh spark boom`; the temp-folder logs go under tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cli.add_command(boom)
    spark.add_command(boom)
    yield
    cli.commands.pop("boom")
    spark.commands.pop("boom")


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_example(tmp_path / "p")


def _log_of(line: str) -> Path:
    match = re.search(r"\(log: (.+)\)$", line)
    assert match, f"the line does not end with the log: {line!r}"
    path = Path(match.group(1))
    return path if path.is_absolute() else Path.cwd() / path


def test_the_mesh_group_handles_failures_for_every_command():
    assert isinstance(cli, MeshGroup)


def test_an_unexpected_error_is_one_line_naming_where_with_the_traceback_in_a_log(project):
    line = assert_refused(mesh(project, "boom"), "RuntimeError at tests/cli/test_logging.py:", "kaput")
    log = _log_of(line)
    assert log.parent == project / ".mesh" / "logs"
    text = log.read_text()
    assert f"command: mesh -p {project} boom" in text
    assert "Traceback (most recent call last)" in text and 'raise RuntimeError("kaput")' in text
    assert "error: RuntimeError at" in text


def test_a_bug_in_mesh_dagster_names_our_file_and_line(project):
    assert_refused(mesh(project, "boom", "--how", "ours"), "Unexpected AttributeError at mesh_dagster/core/time/dates.py:",
                   "This is a bug in mesh_dagster")


def test_a_sub_group_command_is_covered_too(project):
    line = assert_refused(mesh(project, "spark", "boom"), "RuntimeError at", "kaput")
    assert "command: mesh -p" in _log_of(line).read_text()


def test_a_real_spark_command_failure_is_one_line_with_a_log(project):
    (project / "config.yaml").write_text("gateways: [\n")
    line = assert_refused(mesh(project, "spark", "start"), "config.yaml")
    assert "Traceback" in _log_of(line).read_text()


def test_our_errors_keep_their_file_and_line_and_get_a_log(project):
    (project / "models" / "bad.sql").write_text("MODEL (\n  name s.bad,\n  kind FULL,\n  colour 'red'\n);\nSELECT 1")
    line = assert_refused(mesh(project, "plan", "--explain"), "models/bad.sql:4:", "colour")
    assert _log_of(line).exists()


def test_debug_prints_the_traceback_too(project, monkeypatch):
    for args, env in ((["--debug", "boom"], None), (["boom"], {"MESH_DEBUG": "1"})):
        outcome = mesh(project, *args, env=env)
        assert outcome.exit_code == 1
        assert "Traceback (most recent call last)" in outcome.stderr and "kaput" in outcome.stderr
        assert outcome.stderr.rstrip().splitlines()[-1].startswith("Error: RuntimeError at")


def test_ctrl_c_is_interrupted_with_code_130_and_no_traceback(project):
    outcome = mesh(project, "boom", "--how", "ctrl-c")
    assert outcome.exit_code == 130
    assert outcome.error_lines == ["Interrupted."]
    assert not (project / ".mesh" / "logs").exists()


def test_an_os_error_names_the_file(project):
    assert_refused(mesh(project, "boom", "--how", "oserror"), "Cannot use '/somewhere/state.db': Permission denied")


def test_a_message_with_line_breaks_stays_one_line(project):
    assert_refused(mesh(project, "boom", "--how", "multiline"), "first line second line")


def test_old_logs_are_pruned(project):
    logs = project / ".mesh" / "logs"
    logs.mkdir(parents=True)
    for i in range(LOG_LIMIT + 5):
        (logs / f"mesh-20000101-000000-{i:06d}-1.log").write_text("old")
    newest = _log_of(assert_refused(mesh(project, "boom")))
    kept = sorted(logs.glob("mesh-*.log"))
    assert len(kept) == LOG_LIMIT and newest in kept


def test_outside_a_project_the_log_goes_to_the_temp_folder(tmp_path):
    not_a_project = tmp_path / "somewhere"
    not_a_project.mkdir()
    log = _log_of(assert_refused(mesh(not_a_project, "boom")))
    assert log.parent == tmp_path / "tmp" / log.parent.name and log.exists()
    assert list(not_a_project.iterdir()) == []  # a typo'd -p does not sprout folders


def test_an_unwritable_project_log_folder_falls_back_to_the_temp_folder(project, tmp_path):
    (project / ".mesh").write_text("not a folder")  # root ignores permissions; a file blocks mkdir for all
    log = _log_of(assert_refused(mesh(project, "boom")))
    assert log.is_relative_to(tmp_path / "tmp") and log.exists()


def test_usage_errors_are_one_line_with_exit_code_1(project):
    assert_refused(mesh(project, "plna"), "No such command 'plna'", "--help")
    assert_refused(mesh(project, "--bogus"), "No such option '--bogus'")
    assert_refused(mesh(project, "render"), "Missing argument 'MODEL'", "render --help")


def test_ctrl_c_at_the_apply_prompt_of_a_real_process(tmp_path):
    """A real `mesh plan` waiting at its prompt gets SIGINT: "Interrupted.", 130, nothing applied."""
    import os
    import selectors
    import signal
    import subprocess
    import sys

    root = copy_example(tmp_path / "p")
    for test in (root / "tests").glob("*.yaml"):
        test.unlink()  # unit tests would start Spark before the prompt
    proc = subprocess.Popen([sys.executable, "-m", "mesh_dagster.cli.main", "-p", str(root), "plan"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"[y/n]" not in out and sel.select(timeout=120):
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            out += chunk
    assert b"Apply - Backfill Tables [y/n]" in out, out.decode()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert [line for line in err.decode().splitlines() if line.strip()] == ["Interrupted."]
    from mesh_dagster.context import Context

    assert Context(root).state.environments.get_environments() == []
