"""What runs, ticks and code locations show that quotes the project is escaped as the CLI escapes
it (core/config/display.py `printable`): a right-to-left override (U+202E) or an escape sequence in
a signal's arguments, a linter rule's finding, a pushed commit's author or branch, an approval's
note or a file's error shows as `\\u202e` / `\\x1b`, never obeyed (issue 34, point 11). Through
Dagster's own APIs, in process, without Spark (every path here stops before it would start);
tests/dagster/test_escaped_text_in_browser.py looks at a failed query's run page in Chromium.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

import dagster as dg
import pytest
from failures import failure_text
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster import ProjectLoadError, definitions
from mesh_dagster.dagster.mapping.shown_text import shown_value
from tests.state.test_git_plans import MODELS, WATCHER_CONFIG, Repo

HIDDEN = "held \u202ebackwards\x1b[2K"  # reads "sdrawkcab" in a browser; ESC [2K erases a terminal's line
SHOWN = "held \\u202ebackwards\\x1b[2K"
SIGNAL = '''from mesh_dagster import signal


@signal()
def never(batch, note: str):
    return []
'''
WAITING = f"""MODEL (
  name s.a,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
  signals (never(note := '{HIDDEN}'))
);

SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
"""
QUOTING_RULE = '''from sqlmesh.core.linter.rule import Rule


class QuotesDescriptions(Rule):
    def check_model(self, model):
        return self.violation(f"described as {model.description}") if model.description else None
'''
DESCRIBED = f"MODEL (name s.d, kind FULL, description '{HIDDEN}');\n\nSELECT 1 AS id\n"


def assert_escaped(text: str) -> None:
    assert SHOWN in text, text
    assert "\u202e" not in text and "\x1b" not in text, repr(text)


def _log(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [record.user_message for record in instance.all_logs(run_id) if record.dagster_event is None]


@pytest.fixture
def instance(tmp_path):
    (tmp_path / "home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        yield instance


def test_a_refused_steps_line_and_the_runs_show_the_signals_text_escaped(tmp_path, instance):
    root = write_project(tmp_path / "p", {"signals/__init__.py": SIGNAL, "models/a.sql": WAITING})
    job = definitions(root, shared_spark=False).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, partition_key="2020-01-01", raise_on_error=False)
    assert not result.success
    failure = failure_text(result)
    assert f"Cannot materialize s.a for 2020-01-01 - 2020-01-01: signal never(note := '{SHOWN}') says" in failure
    assert_escaped(failure)
    (run_failure,) = [r.dagster_event for r in instance.all_logs(result.run_id)
                      if r.dagster_event is not None and r.dagster_event.event_type.name == "RUN_FAILURE"]
    error = run_failure.event_specific_data.error
    assert_escaped(error.message + (error.cause.message if error.cause else ""))
    assert not result.get_asset_materialization_events()
    assert Context(root).state.snapshots.all_snapshot_ids() == set()  # refused before anything was written


def test_a_schedule_tick_says_what_waits_for_a_signal_escaped(tmp_path, instance):
    root = write_project(tmp_path / "p", {"signals/__init__.py": SIGNAL, "models/a.sql": WAITING})
    schedule = definitions(root, shared_spark=False).resolve_schedule_def("run_prod_daily_schedule")
    with dg.build_schedule_context(instance=instance,
                                   scheduled_execution_time=datetime(2020, 1, 3, tzinfo=UTC)) as context:
        tick = schedule.evaluate_tick(context)
    assert not tick.run_requests
    assert tick.skip_message.startswith("Every due, missing interval waits for a signal:\n")
    assert f"s.a: waiting for signal never(note := '{SHOWN}')" in tick.skip_message
    assert_escaped(tick.skip_message)


def _linted(tmp_path, rules: str, warn_rules: str):
    linter = f"linter:\n  enabled: true\n  rules: {rules}\n  warn_rules: {warn_rules}\n"
    return write_project(tmp_path / "p", {"models/d.sql": DESCRIBED, "linter/quoting.py": QUOTING_RULE},
                         CONFIG + linter)


def test_a_linter_finding_is_escaped_in_the_plan_jobs_log_metadata_and_failure(tmp_path, instance):
    finding = f"models/d.sql:1: quotesdescriptions: described as {SHOWN}"
    warned = _linted(tmp_path / "warn", "[]", "[quotesdescriptions]")
    result = definitions(warned, "dev", shared_spark=False).resolve_job_def("plan_dev").execute_in_process(
        run_config={"ops": {"plan_dev_changes": {"config": {"execution_time": "2020-01-03"}}}}, instance=instance)
    assert result.success
    assert f"Linter warning: {finding}" in _log(instance, result.run_id)
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["linter_warnings"].value == finding

    refused = _linted(tmp_path / "error", "[quotesdescriptions]", "[]")
    result = definitions(refused, "dev", shared_spark=False).resolve_job_def("plan_dev").execute_in_process(
        instance=instance, raise_on_error=False)
    assert not result.success
    failure = failure_text(result)
    assert f"Linter errors: {finding}" in failure
    assert_escaped(failure)
    assert f"Linter error: {finding}" in _log(instance, result.run_id)
    assert Context(refused).plan_records() == []  # refused before anything was planned


def test_a_pushed_commits_author_and_branch_and_an_approvals_note_are_escaped(tmp_path, instance, monkeypatch):
    repo = Repo(tmp_path)
    sha = repo.commit(MODELS, "models", email=f"{HIDDEN}@example.com")
    repo.push("main")
    branch = "feature/\u202ebackwards"  # git refuses control characters in a branch's name, not U+202E
    repo.push(branch)
    location = write_project(tmp_path / "location", {}, WATCHER_CONFIG)
    defs = definitions(location, "prod", shared_spark=False)
    git_plan = defs.resolve_job_def("git_plan")

    recorded = git_plan.execute_in_process(
        run_config={"ops": {"git_plan_commit": {"config": {"branch": "main", "sha": sha}}}}, instance=instance)
    (output,) = [e for e in recorded.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["author"].value == f"{SHOWN}@example.com"

    subprocess.run(["git", "-C", str(repo.clone), "push", "-q", "origin", "--delete", branch], check=True)
    with dg.build_sensor_context(cursor=f'{{"main": "{sha}", "{branch}": "{sha}"}}', instance=instance) as context:
        (request,) = defs.resolve_sensor_def("git_push_sensor").evaluate_tick(context).run_requests
    assert request.tags["mesh/git_branch"] == "feature/\\u202ebackwards"
    deleted = git_plan.execute_in_process(run_config=request.run_config, instance=instance)
    assert "Branch feature/\\u202ebackwards deleted: it had no environment" in _log(instance, deleted.run_id)
    (output,) = [e for e in deleted.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["branch"].value == "feature/\\u202ebackwards"

    monkeypatch.setenv("MESH_USER", "bob@example.com")
    (pending,) = Context(location).plan_records()
    Context(location).decide(pending.plan_id, "approve", f"fine, {HIDDEN}")
    with dg.build_sensor_context(instance=instance) as context:
        events = defs.resolve_sensor_def("plan_status_prod_sensor").evaluate_tick(context).asset_events
    assert events and {e.metadata["mesh/note"].value for e in events} == {f"fine, {SHOWN}"}


def test_a_project_that_does_not_load_quotes_its_file_escaped(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL, audits (`never_\u202ezero`));\n\nSELECT 1 AS id\n",
        "audits/never_zero.sql": "AUDIT (name `never_\u202ezero`);\n\nSELECT * FROM @this_model WHERE id = 0\n"})
    with pytest.raises(ProjectLoadError) as e:
        definitions(root, shared_spark=False)
    assert "audits/never_zero.sql:1: Audit name 'never_\\u202ezero' is not supported" in str(e.value)
    assert "\u202e" not in str(e.value)


def test_a_tables_text_is_escaped_and_a_table_without_any_is_kept():
    """A table metadata value (a plan's data diff: its notes can quote a failed query)."""
    schema = dg.TableSchema(columns=[dg.TableColumn("model"), dg.TableColumn("rows", "int")])
    table = dg.MetadataValue.table([dg.TableRecord(data={"model": f"s.a {HIDDEN}", "rows": 3})], schema=schema)
    shown = shown_value(table)
    assert [r.data for r in shown.records] == [{"model": f"s.a {SHOWN}", "rows": 3}] and shown.schema == schema
    plain = dg.MetadataValue.table([dg.TableRecord(data={"model": "s.a", "rows": 3})], schema=schema)
    assert shown_value(plain) is plain
