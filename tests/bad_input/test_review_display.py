"""What a reviewer is shown is what the files hold: control characters in user text (a model's
comment, a note, a name) are shown as escapes, never obeyed by the reviewer's terminal or browser.

An escape sequence on a changed line (`ESC[1A ESC[2K` moves up and erases the line above, `ESC[8m`
hides what follows) used to reach the terminal raw in the `mesh plan` diff and `mesh plans show`,
and Dagster's Markdown summary, so a line of the diff being approved could vanish. Bidi overrides
(U+202E) reorder what is read the same way, and a ``` in a model could close the Markdown fence
of its diff and show the rest as Markdown or HTML.

The state is written without Spark (the fake engine, as tests/state do): `mesh plan` on a
protected prod only records the plan, so the CLI runs for real here, in process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from bad_input.harness import assert_refused, mesh, nothing_written
from mesh_dagster.context import Context
from tests.execution.fake_engine import FakeEngine

WHEN = "2020-01-03"
CONFIG = "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n"
PROTECTED = CONFIG + "protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"
MODEL = "MODEL (name s.a, kind FULL);\n\nSELECT\n  1 AS id,\n  2 AS value\n"
HIDING = "\x1b[1A\x1b[2K\x1b[8m hidden"
SHOWN = "\\x1b[1A\\x1b[2K\\x1b[8m hidden"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose prod holds MODEL, now protected, with a changed line that hides itself."""
    root = write_project(tmp_path / "p", {"models/a.sql": MODEL}, CONFIG)
    ctx = Context(root, engine=FakeEngine())
    record_plan(ctx.plans.plan("prod", execution_time=WHEN), ctx.state)
    ctx.close()
    (root / "config.yaml").write_text(PROTECTED)
    (root / "models" / "a.sql").write_text(MODEL.replace("1 AS id,", f"5 AS id, -- {HIDING}"))
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    return root


def _recorded(root: Path):
    ctx = Context(root, engine=FakeEngine())
    try:
        (record,) = ctx.plan_records()
        return record
    finally:
        ctx.close()


def test_the_plan_diff_shows_escape_sequences_instead_of_obeying_them(project: Path) -> None:
    result = mesh(project, "plan", "--no-prompts", "--execution-time", WHEN)
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert f"+  5 AS id, -- {SHOWN}" in result.stdout
    assert "-  1 AS id," in result.stdout  # the line the escapes would erase is still there


def test_plans_show_and_the_markdown_summary_show_escape_sequences(project: Path) -> None:
    assert mesh(project, "plan", "--no-prompts", "--execution-time", WHEN).exit_code == 0
    record = _recorded(project)
    markdown = record.summary.markdown("prod")  # what Dagster's run page shows
    assert "\x1b" not in markdown and f"+  5 AS id, -- {SHOWN}" in markdown
    result = mesh(project, "plans", "show", record.plan_id[:8])
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and f"+  5 AS id, -- {SHOWN}" in result.stdout


def test_notes_and_bidi_overrides_are_shown_as_escapes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert mesh(project, "plan", "--no-prompts", "--execution-time", WHEN).exit_code == 0
    plan_id = _recorded(project).plan_id[:8]
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    note = "looks fine \u202eevah\x9b2K\rapproved"
    assert mesh(project, "plans", "approve", plan_id, "-m", note).exit_code == 0
    result = mesh(project, "plans", "show", plan_id)
    assert result.exit_code == 0, result.stderr
    for raw in ("\u202e", "\x9b", "\r"):
        assert raw not in result.stdout
    assert "looks fine \\u202eevah\\x9b2K\\rapproved" in result.stdout


def test_a_diff_cannot_close_its_markdown_fence(project: Path) -> None:
    (project / "models" / "a.sql").write_text(MODEL.replace(
        "1 AS id,", "5 AS id, -- ```\n  -- </code><img src=x onerror=alert(1)>\n  -- ````\n"))
    assert mesh(project, "plan", "--no-prompts", "--no-diff", "--execution-time", WHEN).exit_code == 0
    lines = _recorded(project).summary.markdown("prod").splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("diff") and line.startswith("`"))
    fence = lines[start].removesuffix("diff")
    assert set(fence) == {"`"} and len(fence) == 5  # longer than the model's longest run of backticks
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    assert lines[end] == fence  # only the closing fence closes it: what follows is the data diff section
    assert lines[end + 1:end + 3] == ["", "**Data diff**"] and not any(line.startswith("`") for line in lines[end + 1:])
    assert any("<img src=x" in line for line in lines[start:end])


def test_an_error_quoting_user_text_shows_its_escapes(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"models/a.sql": MODEL},
                         CONFIG + 'default_gateway: "local\\e[1A\\e[2K\\e[8m hidden"\n')
    with nothing_written(root):
        result = mesh(root, "plan", "--explain")
    line = assert_refused(result, "config.yaml:4:", "unknown gateway")
    assert "\x1b" not in result.stderr and f"'local{SHOWN}'" in line


def test_a_failed_git_plan_shows_its_error_as_text_in_dagster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The git_plan job's summary of a commit whose project does not load is the error quoting the
    project: shown in a code block with its escapes, never rendered or obeyed."""
    import dagster as dg

    from mesh_dagster.dagster import definitions
    from tests.state.test_git_plans import MODELS, WATCHER_CONFIG, Repo

    monkeypatch.setenv("MESH_USER", "alice@example.com")
    repo = Repo(tmp_path)
    sha = repo.commit({**MODELS, "models/x.sql": "MODEL (name s.x, kind FULL, grain (`\x1b[2K```x`));\n"
                                                 "SELECT 1 AS a\n"}, "broken")
    repo.push("main")
    location = write_project(tmp_path / "location", {}, WATCHER_CONFIG)
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    run = definitions(location, "prod", shared_spark=False).resolve_job_def("git_plan").execute_in_process(
        run_config={"ops": {"git_plan_commit": {"config": {"branch": "main", "sha": sha}}}}, instance=instance,
        raise_on_error=False)
    assert not run.success
    (output,) = [e for e in run.all_events if e.event_type_value == "STEP_OUTPUT"]
    summary = output.event_specific_data.metadata["summary"].value
    lines = summary.splitlines()
    assert "\x1b" not in summary and "\\x1b[2K" in summary
    assert lines[0] == lines[-1] == "````" and len(lines) == 3  # one code block no backtick in it can close

