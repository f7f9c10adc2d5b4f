"""`before_all` / `after_all` as plans capture them (issue 34, point 3), on real SQLite and real Postgres
(the in-memory engine stands for Spark, and records every statement it is given).

A plan captures the statements with the macros they call and the variables they read; the
environment runs what its plan captured — `mesh run`, an approved plan's apply — never config.yaml
as it is now; a change of the statements alone is a plan; a statement reaching another environment's
views or a physical table the environment does not serve is refused at plan time (and again before it
runs), naming its entry, config.yaml's line and the object, with nothing written.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from project_builder import CONFIG, write_project
from sqlalchemy import create_engine, text

from mesh_dagster.cli.main import cli
from mesh_dagster.context import ApplyListener, Context, LogLines
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.plan.review import PlanStatus, summarize
from mesh_dagster.core.project.environment_statements import EnvironmentStatementError
from mesh_dagster.core.snapshots.statement_scope import StatementScopeError
from tests.execution.fake_engine import FakeEngine

MODELS = {
    "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.a\n",
}
STAMP = '''
from mesh_dagster.core.macros.user import macro


@macro()
def stamp(evaluator):
    return f"INSERT INTO audit.log SELECT '{evaluator.var('release')}', '{evaluator.this_env}'"
'''
BEFORE = ["CREATE SCHEMA IF NOT EXISTS audit", "@stamp()"]
AFTER = ["INSERT INTO audit.log SELECT 'done', @views"]
PLANNED = ["CREATE SCHEMA IF NOT EXISTS audit", "INSERT INTO audit.log SELECT 'v1', 'prod'",
           "INSERT INTO audit.log SELECT 'done', ARRAY('s.a', 's.b')"]
PROTECTION = "protected_environments:\n  prod:\n    approvers: [alice@example.com, bob@example.com]\n"


def config(before: list[str] = BEFORE, after: list[str] = AFTER, release: str = "v1", extra: str = "") -> str:
    hooks = {"variables": {"release": release}, "before_all": before, "after_all": after}
    return CONFIG + extra + yaml.safe_dump(hooks, sort_keys=False)


def project(tmp_path: Path, text_: str | None = None, models: dict[str, str] | None = None) -> Path:
    return write_project(tmp_path / "p", {**MODELS, **(models or {}), "macros/__init__.py": "",
                                          "macros/stamp.py": STAMP}, text_ or config())


def line_of(root: Path, fragment: str) -> int:
    """The line of config.yaml holding `fragment` (an entry)."""
    return next(i for i, line in enumerate((root / "config.yaml").read_text().splitlines(), 1) if fragment in line)


def executed(engine: FakeEngine) -> list[str]:
    return [c.args["sql"] for c in engine.calls if c.method == "execute"]


def edit_everything_the_statements_read(root: Path) -> None:
    """After the plan: another entry, another variable value, another macro body."""
    (root / "config.yaml").write_text(config(after=["INSERT INTO audit.log SELECT 'unreviewed', @views"],
                                             release="v2"))
    stamp = root / "macros" / "stamp.py"
    stamp.write_text(stamp.read_text().replace("INSERT INTO audit.log SELECT", "INSERT INTO audit.log SELECT 'edited',"))


def test_mesh_run_runs_what_the_environment_was_planned_with_and_the_edit_is_a_plan(tmp_path, state_url):
    root = project(tmp_path)
    engine = FakeEngine()
    ctx = Context(root, state_url=state_url, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    assert executed(engine) == PLANNED
    edit_everything_the_statements_read(root)

    engine.calls.clear()
    later = Context(root, state_url=state_url, engine=engine)  # a new command: config.yaml read afresh
    assert later.runs.run("prod", execution_time="2020-01-05") > 0
    assert executed(engine) == PLANNED  # not the edited entry, variable or macro

    plan = later.plans.plan("prod", execution_time="2020-01-05")
    assert plan.changed == [] and plan.has_changes and plan.needs_apply
    diff = summarize(plan).statements_diff
    for line in ("-after_all.0: INSERT INTO audit.log SELECT 'done', @views",
                 "+after_all.0: INSERT INTO audit.log SELECT 'unreviewed', @views",
                 "-variable release: v1", "+variable release: v2",
                 """+        return f"INSERT INTO audit.log SELECT 'edited', '{evaluator.var('release')}', '{evaluator.this_env}'\""""):
        assert line in diff.splitlines(), f"{line!r} not in\n{diff}"
    assert " before_all.1: @stamp()" in diff.splitlines()  # what did not change is shown too
    later.reviews.apply(plan)
    assert later.state.environments.get_environment("prod").statements == plan.statements
    assert not later.plans.plan("prod", execution_time="2020-01-05").has_changes


def test_an_approved_plan_runs_the_reviewed_statements_not_config_yaml_as_it_is_now(tmp_path, state_url,
                                                                                    monkeypatch):
    root = project(tmp_path, config(extra=PROTECTION))
    engine = FakeEngine()
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = Context(root, state_url=state_url, engine=engine)
    record = ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-03"))
    assert "**Environment statements** (`before_all` / `after_all`: changed)" in record.summary.markdown("prod")
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(record.plan_id, "approve")
    (root / "config.yaml").write_text(config(after=["DROP VIEW IF EXISTS s.b"], extra=PROTECTION))

    monkeypatch.setenv("MESH_USER", "alice@example.com")
    done = Context(root, state_url=state_url, engine=engine).reviews.apply_recorded(record.plan_id)
    assert done.status == PlanStatus.COMPLETED
    assert executed(engine) == PLANNED and "DROP VIEW" not in " ".join(executed(engine))
    assert ctx.state.environments.get_environment("prod").statements == record.summary.statements


def test_a_change_of_the_statements_alone_is_a_plan_the_cli_shows(tmp_path):
    root = project(tmp_path)
    ctx = Context(root, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    (root / "config.yaml").write_text(config(after=["INSERT INTO audit.log SELECT 'finished', @views"]))

    shown = CliRunner().invoke(cli, ["-p", str(root), "plan", "--no-prompts", "--skip-tests"])
    assert shown.exit_code == 0, shown.output
    assert "No changes to plan" not in shown.output
    assert "Environment statements (before_all / after_all) changed" in shown.output
    assert "+after_all.0: INSERT INTO audit.log SELECT 'finished', @views" in shown.output
    (record,) = [r for r in Context(root).plan_records() if r.status == PlanStatus.PENDING]
    page = CliRunner().invoke(cli, ["-p", str(root), "plans", "show", record.plan_id[:8]])
    assert "+after_all.0: INSERT INTO audit.log SELECT 'finished', @views" in page.output
    assert "-after_all.0: INSERT INTO audit.log SELECT 'done', @views" in page.output
    assert "No model changes." in page.output


REFUSED = {  # a dev statement -> what the refusal names
    "INSERT INTO audit.log SELECT * FROM s.a": "it names s.a, a view of environment 'prod'",
    "CREATE OR REPLACE VIEW s.b AS SELECT 2 AS id": "it names s.b, a view of environment 'prod'",
    "GRANT SELECT ON s.a TO ROLE readers": "it names s.a, a view of environment 'prod'",
    "DROP VIEW IF EXISTS s__other.a": "it names s__other.a, a view of environment 'other'",
    "DROP SCHEMA s CASCADE": "it names s, the schema of the views of environment 'prod'",
    "USE s": "it names s, the schema of the views of environment 'prod'",
    "TRUNCATE TABLE mesh__s.s__a__123": "it names mesh__s.s__a__123, a physical table of a version 'dev' does not serve",
    "MSCK REPAIR TABLE s.a": "it names s.a, a view of environment 'prod' (sqlglot cannot analyse this statement",
    "EXECUTE IMMEDIATE 'DROP VIEW s.a'": "it names s.a, a view of environment 'prod' (sqlglot cannot analyse",
}


@pytest.mark.parametrize("statement", sorted(REFUSED))
def test_a_dev_statement_reaching_outside_dev_is_refused_at_plan_time_with_nothing_written(tmp_path, state_url,
                                                                                         statement):
    root = project(tmp_path, config(before=["CREATE SCHEMA IF NOT EXISTS audit", statement]))
    engine = FakeEngine()
    ctx = Context(root, state_url=state_url, engine=engine)
    with pytest.raises(StatementScopeError) as e:
        ctx.reviews.apply(ctx.plans.plan("dev", execution_time="2020-01-03"))
    where = line_of(root, statement)
    assert str(e.value).startswith(f"config.yaml:{where}: before_all.1: {REFUSED[statement]}"), str(e.value)
    assert "The statements of 'dev' may only reach its own views (@views, in @schemas)" in str(e.value)
    assert "\n" not in str(e.value)
    assert engine.calls == [] and ctx.state.environments.get_environments() == [] and ctx.plan_records() == []
    assert ctx.state.snapshots.all_snapshot_ids() == set()


def test_what_belongs_to_the_environment_or_to_no_environment_stays_allowed(tmp_path, state_url):
    allowed = ["GRANT SELECT ON s__dev.a TO ROLE readers", "@EACH(@views, v -> INSERT INTO audit.seen VALUES (@v))",
               "CREATE TABLE IF NOT EXISTS s__dev.notes (x INT)", "SET spark.sql.shuffle.partitions = 2",
               "MSCK REPAIR TABLE raw.events", "INSERT INTO audit.copy SELECT id FROM raw.events"]
    root = project(tmp_path, config(before=[], after=["INSERT INTO audit.log SELECT * FROM s.a"]))
    engine = FakeEngine()
    ctx = Context(root, state_url=state_url, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))  # prod's own view, from prod
    assert "INSERT INTO audit.log SELECT * FROM s.a" in executed(engine)
    reads_raw = {"models/e.sql": "MODEL (name s.e, kind FULL);\nSELECT id FROM raw.events\n"}  # raw: external
    dev = Context(project(tmp_path / "dev", config(before=allowed), reads_raw), state_url=state_url, engine=engine,
                  on_warning=lambda _: None)
    plan = dev.plans.plan("dev", execution_time="2020-01-03", include_unmodified=True)
    assert "+before_all.0: GRANT SELECT ON s__dev.a TO ROLE readers" in summarize(plan).statements_diff  # reviewed
    dev.reviews.apply(plan)
    assert "INSERT INTO audit.seen VALUES ('s__dev.a')" in executed(engine)


def test_a_physical_table_is_allowed_only_for_the_versions_the_environment_serves(tmp_path, state_url):
    root = project(tmp_path, config(before=[]))
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    prods = ctx.state.environments.get_environment("prod").snapshot_by_name()["s.a"].table_name
    (root / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 2 AS id\n")
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    devs = ctx.plans.plan("dev", execution_time="2020-01-03").snapshots["s.a"].table_name
    assert devs != prods

    (root / "config.yaml").write_text(config(before=[], after=[f"TRUNCATE TABLE {prods}"]))
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    with pytest.raises(StatementScopeError) as e:
        ctx.plans.plan("dev", execution_time="2020-01-03")
    assert str(e.value).startswith(f"config.yaml:{line_of(root, 'TRUNCATE')}: after_all.0: it names {prods}, a "
                                   "physical table of a version 'dev' does not serve"), str(e.value)
    (root / "config.yaml").write_text(config(before=[], after=[f"ANALYZE TABLE {devs} COMPUTE STATISTICS"]))
    assert Context(root, state_url=state_url, engine=FakeEngine()).plans.plan("dev", execution_time="2020-01-03")


def test_a_statement_that_renders_outside_the_environment_later_is_refused_before_anything_runs(tmp_path,
                                                                                               state_url):
    later = "@IF(@execution_ds >= '2020-01-05', INSERT INTO audit.log SELECT * FROM s.a)"
    root = project(tmp_path, config(before=["CREATE SCHEMA IF NOT EXISTS audit", later]))
    engine = FakeEngine()
    ctx = Context(root, state_url=state_url, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("dev", execution_time="2020-01-03", include_unmodified=True))  # in scope that day
    engine.calls.clear()
    with pytest.raises(StatementScopeError) as e:
        ctx.runs.run("dev", execution_time="2020-01-06")
    assert str(e.value).startswith(f"config.yaml:{line_of(root, 'IF(')}: before_all.1: it names s.a, a view of "
                                   "environment 'prod'"), str(e.value)
    assert executed(engine) == []  # not even the first entry ran


def test_an_environment_recorded_before_statements_were_captured_runs_none_until_planned(tmp_path, state_url):
    root = project(tmp_path)
    engine = FakeEngine()
    ctx = Context(root, state_url=state_url, engine=engine)
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    with create_engine(state_url).begin() as conn:
        payload = json.loads(conn.execute(text("SELECT payload FROM mesh_environments")).scalar())
        payload.pop("statements")  # as an earlier mesh_dagster stored it
        conn.execute(text("UPDATE mesh_environments SET payload = :p"), {"p": json.dumps(payload)})

    engine.calls.clear()
    log = LogLines()
    ctx = Context(root, state_url=state_url, engine=engine)
    assert ctx.runs.run("prod", execution_time="2020-01-05", listener=log) > 0
    assert executed(engine) == []
    assert "'prod' was planned before plans captured before_all/after_all: none run until `mesh plan prod` " \
           "captures config.yaml's for review" in log.lines
    plan = ctx.plans.plan("prod", execution_time="2020-01-05")
    assert plan.statements_changed and plan.changed == []
    assert all(line.startswith(("+", "---", "+++", "@@")) for line in summarize(plan).statements_diff.splitlines())
    ctx.reviews.apply(plan)
    assert ctx.state.environments.get_environment("prod").statements == plan.statements


def _step(root: str, state_url: str, model: str, fail: str | None, out) -> None:
    """One model's step of a run, in a process of its own: before its first write, then its success."""
    engine = FakeEngine() if fail is None else _Failing(fail)
    ctx = Context(root, state_url=state_url, engine=engine)
    run = ctx.runs.run_statements("run-7", "prod", ["s.a", "s.b"], ApplyListener())
    try:
        run.before_write()
        run.step_succeeded(model)
    except EnvironmentStatementError as e:
        out.put((model, executed(engine), str(e)))
        return
    out.put((model, executed(engine), None))


class _Failing(FakeEngine):
    def __init__(self, fails: str) -> None:
        super().__init__()
        self.fails = fails

    def execute(self, sql: str) -> None:
        super().execute(sql)
        if self.fails in sql:
            raise EngineError("Spark SQL failed: [TABLE_OR_VIEW_NOT_FOUND] audit.log cannot be found")


def _steps(root: Path, state_url: str, fail: str | None = None) -> dict[str, tuple[list[str], str | None]]:
    """Two steps of one run in two processes at once."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    steps = [spawn.Process(target=_step, args=(str(root), state_url, m, fail, out)) for m in ("s.a", "s.b")]
    for p in steps:
        p.start()
    found = {model: (ran, error) for model, ran, error in (out.get(timeout=120) for _ in steps)}
    for p in steps:
        p.join(60)
    return found


def test_two_steps_of_one_run_in_two_processes_run_each_stage_once(tmp_path, state_url):
    root = project(tmp_path)
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    found = _steps(root, state_url)
    assert all(error is None for _, error in found.values())
    ran = sorted(sql for statements, _ in found.values() for sql in statements)
    assert ran == sorted(PLANNED)  # each stage once, whichever step ran it


def test_a_failed_before_all_fails_every_step_of_the_run_and_no_after_all_runs(tmp_path, state_url):
    root = project(tmp_path)
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    ctx.reviews.apply(ctx.plans.plan("prod", execution_time="2020-01-03"))
    found = _steps(root, state_url, fail="'v1'")
    errors = sorted(error for _, error in found.values())
    assert errors[0].startswith("Not run: this run's before_all failed in an earlier step, and nothing may be "
                                "written without it: config.yaml:")
    assert errors[1].startswith("config.yaml:") and "before_all.1: failed: Spark SQL failed" in errors[1]
    ran = [sql for statements, _ in found.values() for sql in statements]
    assert ran == PLANNED[:2]  # before_all once (the failing entry last), after_all never
