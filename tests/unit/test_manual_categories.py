"""Manual categorization from the CLI: --no-auto-categorization asks per directly modified model
with its diff, --categorize answers for scripts, and the refusals name what is wrong. Plans need
no Spark: prod is recorded in the state store directly."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from project_builder import CONFIG, record_plan, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.context import Context
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

MODEL = """MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
SELECT 1 AS a, CAST('2020-01-01' AS DATE) AS ds
"""
CHILD = "MODEL (name s.c, kind FULL);\nSELECT a FROM s.m\n"


def _project(tmp_path: Path, config: str = "") -> Path:
    root = write_project(tmp_path / "p", {"models/m.sql": MODEL, "models/c.sql": CHILD}, CONFIG + config)
    ctx = Context(root)
    record_plan(ctx.plans.plan(execution_time="2020-01-04"), ctx.state)
    ctx.close()
    path = root / "models" / "m.sql"
    path.write_text(path.read_text().replace("1 AS a", "2 AS a"))  # breaking
    return root


def _plan(root: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["-p", str(root), "plan", "dev", "--skip-tests", "--execution-time", "2020-01-04",
                                    *args], input=input)


def test_no_auto_categorization_asks_with_the_diff(tmp_path):
    root = _project(tmp_path)
    result = _plan(root, "--no-auto-categorization", input="non-breaking\nn\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.index("+SELECT 2 AS a") < out.index("Category of s__dev.m")
    assert "Directly Modified: s__dev.m (Non-breaking)" in out
    assert "s__dev.c (Indirect Non-breaking)" in out


def test_categorize_for_scripts_and_config_off(tmp_path):
    root = _project(tmp_path, "plan:\n  auto_categorize_changes:\n    sql: off\n")
    refused = _plan(root, "--no-prompts")
    assert refused.exit_code != 0 and "need a category and prompts are off: s.m" in refused.output
    assert "--categorize MODEL=breaking|non-breaking|forward-only" in refused.output
    chosen = _plan(root, "--no-prompts", "--categorize", "s.m=forward-only")
    assert chosen.exit_code == 0, chosen.output
    assert "Directly Modified: s__dev.m (Forward-only)" in chosen.output
    assert "(preview)" in chosen.output


def test_categorize_refusals(tmp_path):
    root = _project(tmp_path)
    bad = _plan(root, "--no-prompts", "--categorize", "s.m=maybe")
    assert bad.exit_code != 0 and "--categorize 's.m=maybe' must be MODEL=CATEGORY" in bad.output
    other = _plan(root, "--no-prompts", "--categorize", "s.c=breaking")
    assert other.exit_code != 0 and "--categorize names s.c, which this plan does not directly modify" in other.output
    ctx = Context(root)
    assert ctx.state.environments.get_environment("dev") is None  # nothing recorded
    ctx.close()


def test_forward_only_model_cannot_be_categorized_breaking(tmp_path):
    root = write_project(tmp_path / "p", {"models/m.sql": MODEL.replace("time_column ds", "time_column ds, forward_only true")},
                         CONFIG)
    ctx = Context(root)
    record_plan(ctx.plans.plan(execution_time="2020-01-04"), ctx.state)
    path = root / "models" / "m.sql"
    path.write_text(path.read_text().replace("1 AS a", "2 AS a"))
    ctx.reload()
    assert ctx.plans.plan("dev", execution_time="2020-01-04").category("s.m") == C.FORWARD_ONLY
    result = _plan(root, "--no-prompts", "--categorize", "s.m=breaking")
    assert result.exit_code != 0 and "s.m is a forward-only model: it cannot be categorized Breaking" in result.output
