"""Project-level features without Spark: `before_all` / `after_all` (config, rendering with
`@this_env` / `@views` / `@schemas`, when they run on the in-memory engine), implicit external
models (the warning, the dependency, the Dagster asset), and the merge behind
`mesh create_external_models`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from mesh_dagster.context import ApplyListener, Context
from mesh_dagster.core.errors import ConfigError, EngineError, MeshError, ModelError
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.environment_statements import (
    EnvironmentNaming,
    EnvironmentStatementError,
    Stage,
    StatementSource,
    render_environment_statements,
)
from mesh_dagster.core.project.external_models import merge_entries, write_external_models
from mesh_dagster.core.project.project import load_project
from tests.execution.fake_engine import FakeEngine
from tests.project_builder import CONFIG, write_project

MODELS = {
    "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, CAST('2024-01-01' AS DATE) AS ds\n",
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.a\n",
    "models/v.sql": "MODEL (name t.v, kind VIEW);\nSELECT id FROM s.b\n",
}
GRANTS = '''
from mesh_dagster.core.macros.user import macro


@macro()
def grants(evaluator):
    """One GRANT per view, and the environment the evaluator says it renders for."""
    return [f"GRANT SELECT ON {view} TO ROLE {evaluator.this_env}_readers;" for view in evaluator.views] + [
        f"INSERT INTO audit.schemas VALUES ('{','.join(evaluator.schemas)}')"]
'''


def hooks_config(before: list[str] | None = None, after: list[str] | None = None, extra: str = "") -> str:
    data = {k: v for k, v in (("before_all", before), ("after_all", after)) if v is not None}
    return CONFIG + extra + (yaml.safe_dump(data, sort_keys=False) if data else "")


def project(tmp_path: Path, config: str, files: dict[str, str] | None = None, name: str = "p") -> Path:
    return write_project(tmp_path / name, {**MODELS, "macros/__init__.py": "", "macros/grants.py": GRANTS,
                                          **(files or {})}, config)


def render(root: Path, stage: Stage, environment: str, models: list[str]) -> list[tuple[int, str]]:
    loaded = load_project(root, use_cache=False)
    return render_environment_statements(
        stage, loaded.config.statements(stage.value), EnvironmentNaming.of(environment, models),
        macros=loaded.macros, variables=loaded.variables, dialect=loaded.config.model_defaults.dialect,
        source=StatementSource.of_config(root, loaded.config))


def executed(engine: FakeEngine) -> list[str]:
    return [c.args["sql"] for c in engine.calls if c.method == "execute"]


# ---------------------------------------------------------------------------------------------
# config.yaml


def test_config_keeps_the_entries_in_order(tmp_path):
    root = project(tmp_path, hooks_config(["CREATE SCHEMA IF NOT EXISTS audit", "@grants()"], ["SELECT 1"]))
    config = load_config(root)
    assert config.before_all == ["CREATE SCHEMA IF NOT EXISTS audit", "@grants()"]
    assert config.statements("after_all") == ["SELECT 1"]
    assert load_config(project(tmp_path, CONFIG, name="plain")).before_all == []


@pytest.mark.parametrize("body, fragments", [
    ("before_all:\n  - SELECT 1\n  - 42\n", ("config.yaml:7:", "before_all.1", "valid string")),
    ("after_all:\n  - '  '\n", ("config.yaml:6:", "after_all.0", "the statement is empty")),
    ("after_all:\n  - SELECT 1\n  - SELECT FROM WHERE\n", ("config.yaml:7:", "after_all.1", "Cannot parse statement")),
    ("before_all: CREATE SCHEMA audit\n", ("config.yaml:5:", "before_all", "valid list")),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, body, fragments):
    root = project(tmp_path, CONFIG + body)
    with pytest.raises(ConfigError) as e:
        load_config(root)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_entries_with_macros_are_checked_when_rendered(tmp_path):
    root = project(tmp_path, hooks_config(["SELECT 1", "@nope(1)"]))
    load_project(root, use_cache=False)  # loads: a macro can only be rendered for an environment
    with pytest.raises(EnvironmentStatementError) as e:
        render(root, Stage.BEFORE_ALL, "prod", ["s.a"])
    assert str(e.value).startswith("config.yaml:7: before_all.1: Unknown macro @nope"), str(e.value)


def test_a_rendered_entry_that_does_not_parse_names_its_entry(tmp_path):
    root = project(tmp_path, hooks_config(after=["SELECT 1", "SELECT @this_env FROM WHERE"]))
    with pytest.raises(EnvironmentStatementError) as e:
        render(root, Stage.AFTER_ALL, "dev", ["s.a"])
    assert str(e.value).startswith("config.yaml:7: after_all.1: Cannot parse statement"), str(e.value)


# ---------------------------------------------------------------------------------------------
# Rendering


def test_runtime_values_are_sql_literals_and_arrays(tmp_path):
    root = project(tmp_path, hooks_config(
        ["INSERT INTO audit.log SELECT @this_env, @views, @schemas, @runtime_stage, @owner"],
        extra="variables:\n  owner: data_team\n"))
    assert render(root, Stage.BEFORE_ALL, "prod", ["s.a", "t.v", "s.b"]) == [
        (0, "INSERT INTO audit.log SELECT 'prod', ARRAY('s.a', 't.v', 's.b'), ARRAY('s', 't'), 'before_all', "
            "'data_team'")]
    assert render(root, Stage.BEFORE_ALL, "dev", ["s.b"]) == [
        (0, "INSERT INTO audit.log SELECT 'dev', ARRAY('s__dev.b'), ARRAY('s__dev'), 'before_all', 'data_team'")]


def test_python_macros_see_the_environment_and_may_return_several_statements(tmp_path):
    root = project(tmp_path, hooks_config(after=[
        "@grants()",
        "@IF(@this_env = 'prod', CREATE TABLE IF NOT EXISTS audit.prod_only (x INT))",
        "@EACH(@views, v -> INSERT INTO audit.views VALUES (@v))",
        "CREATE SCHEMA IF NOT EXISTS a; CREATE SCHEMA IF NOT EXISTS b",
    ]))
    assert render(root, Stage.AFTER_ALL, "dev", ["s.a", "t.v"]) == [
        (0, "GRANT SELECT ON s__dev.a TO ROLE dev_readers"),
        (0, "GRANT SELECT ON t__dev.v TO ROLE dev_readers"),
        (0, "INSERT INTO audit.schemas VALUES ('s__dev,t__dev')"),
        # entry 1, @IF(false, ...) without an else, vanishes; @EACH gives one statement per view
        (2, "INSERT INTO audit.views VALUES ('s__dev.a')"),
        (2, "INSERT INTO audit.views VALUES ('t__dev.v')"),
        (3, "CREATE SCHEMA IF NOT EXISTS a"),
        (3, "CREATE SCHEMA IF NOT EXISTS b"),
    ]
    prod = render(root, Stage.AFTER_ALL, "prod", ["s.a"])
    assert (1, "CREATE TABLE IF NOT EXISTS audit.prod_only (x INT)") in prod
    assert (0, "GRANT SELECT ON s.a TO ROLE prod_readers") in prod


def test_entries_are_written_in_the_project_dialect(tmp_path):
    root = project(tmp_path, hooks_config(["CREATE TABLE IF NOT EXISTS audit.t AS SELECT LIST_VALUE(1, 2) AS xs"])
                   .replace("dialect: spark", "dialect: duckdb"))
    assert render(root, Stage.BEFORE_ALL, "prod", []) == [
        (0, "CREATE TABLE IF NOT EXISTS audit.t AS SELECT ARRAY(1, 2) AS xs")]


def test_spark_statements_sqlglot_has_no_grammar_for_run_as_written_without_a_warning(tmp_path, caplog):
    root = project(tmp_path, hooks_config(["MSCK REPAIR TABLE raw.events", "ADD JAR /opt/udfs.jar"]))
    with caplog.at_level("WARNING"):
        load_config(root)
        rendered = render(root, Stage.BEFORE_ALL, "prod", [])
    assert rendered == [(0, "MSCK REPAIR TABLE raw.events"), (1, "ADD JAR /opt/udfs.jar")]
    assert caplog.records == []


# ---------------------------------------------------------------------------------------------
# When they run (the in-memory engine)


class FailingEngine(FakeEngine):
    """Fails every statement holding `fails`, as Spark would."""

    def __init__(self, fails: str):
        super().__init__()
        self.fails = fails

    def execute(self, sql: str) -> None:
        super().execute(sql)
        if self.fails in sql:
            raise EngineError(f"Spark SQL failed: [TABLE_OR_VIEW_NOT_FOUND] {self.fails} cannot be found")


HOOKS = hooks_config(["CREATE SCHEMA IF NOT EXISTS audit", "INSERT INTO audit.log SELECT 'start', @this_env"],
                     ["INSERT INTO audit.log SELECT 'end', @views"])


def test_apply_runs_before_all_first_and_after_all_last(tmp_path):
    engine = FakeEngine()
    context = Context(project(tmp_path, HOOKS), engine=engine)
    context.reviews.apply(context.plans.plan("dev", start="2024-01-01", end="2024-01-01", execution_time="2024-01-02"))
    assert [c.method for c in engine.calls[:2]] == ["execute", "execute"]
    assert executed(engine)[:2] == ["CREATE SCHEMA IF NOT EXISTS audit", "INSERT INTO audit.log SELECT 'start', 'dev'"]
    assert engine.calls[-1].args["sql"] == "INSERT INTO audit.log SELECT 'end', ARRAY('s__dev.a', 's__dev.b', 't__dev.v')"
    assert "create_view" in [c.method for c in engine.calls[2:-1]]  # everything else ran in between


def test_failing_before_all_stops_the_apply_before_anything_is_written(tmp_path):
    engine = FailingEngine("audit.log")
    context = Context(project(tmp_path, HOOKS), engine=engine)
    with pytest.raises(EnvironmentStatementError) as e:
        context.reviews.apply(context.plans.plan("prod", execution_time="2024-01-02"))
    assert str(e.value) == (
        "config.yaml:7: before_all.1: failed: Spark SQL failed: [TABLE_OR_VIEW_NOT_FOUND] audit.log cannot be found "
        "(nothing was written; fix the statement and try again)")
    assert [c.method for c in engine.calls] == ["execute", "execute"]
    assert context.state.environments.get_environment("prod") is None
    assert context.state.snapshots.all_snapshot_ids() == set()


def test_failing_after_all_says_the_rest_completed(tmp_path):
    engine = FailingEngine("'end'")
    context = Context(project(tmp_path, HOOKS), engine=engine)
    with pytest.raises(EnvironmentStatementError) as e:
        context.reviews.apply(context.plans.plan("prod", execution_time="2024-01-02"))
    assert str(e.value).startswith("config.yaml:9: after_all.0: failed: Spark SQL failed:")
    assert "everything before it completed" in str(e.value)
    env = context.state.environments.get_environment("prod")
    assert env is not None and env.finalized_ts is not None


def test_run_runs_them_around_its_batches_and_not_when_nothing_is_due(tmp_path):
    engine = FakeEngine()
    context = Context(project(tmp_path, HOOKS), engine=engine)
    context.reviews.apply(context.plans.plan("prod", execution_time="2024-01-02"))
    engine.calls.clear()
    assert context.runs.run("prod", execution_time="2024-01-02") == 0
    assert executed(engine) == []
    assert context.runs.run("prod", execution_time="2024-01-04") > 0
    assert executed(engine)[:2] == ["CREATE SCHEMA IF NOT EXISTS audit", "INSERT INTO audit.log SELECT 'start', 'prod'"]
    assert engine.calls[-1].args["sql"] == "INSERT INTO audit.log SELECT 'end', ARRAY('s.a', 's.b', 't.v')"


def test_a_run_of_one_step_per_model_runs_them_once_around_all_its_steps(tmp_path):
    engine = FakeEngine()
    context = Context(project(tmp_path, HOOKS), engine=engine)
    context.reviews.apply(context.plans.plan("prod", execution_time="2024-01-02"))
    engine.calls.clear()
    run = context.runs.run_statements("run-1", "prod", ["s.a", "s.b"], ApplyListener())
    for name in ("s.a", "s.b"):  # one step per model, as a Dagster run has them
        results = list(context.runs.materialize([name], "2024-01-02", "2024-01-03", "prod", execution_time="2024-01-03",
                                           before_write=run.before_write))
        assert [r.error for r in results] == [None]
        run.step_succeeded(name)
    ran = executed(engine)
    assert ran[:2] == ["CREATE SCHEMA IF NOT EXISTS audit", "INSERT INTO audit.log SELECT 'start', 'prod'"]
    assert [sql for sql in ran if "audit" in sql] == ran[:2] + [ran[-1]]  # each once
    assert ran[-1] == "INSERT INTO audit.log SELECT 'end', ARRAY('s.a', 's.b', 't.v')"
    run.step_succeeded("s.b")  # a retried step that succeeds again counts once
    assert executed(engine) == ran


def test_materializing_nothing_runs_nothing(tmp_path):
    engine = FakeEngine()
    context = Context(project(tmp_path, HOOKS), engine=engine)
    results = list(context.runs.materialize(["s.a"], "2019-01-01", "2019-01-02", "prod", execution_time="2024-01-02"))
    assert [r.outcome.value for r in results] == ["empty"]  # before the project's start (2020-01-01)
    assert engine.calls == []


# ---------------------------------------------------------------------------------------------
# Implicit external models


READS_UNDECLARED = {
    "models/orders.sql": "MODEL (name s.orders, kind FULL);\n\nSELECT e.id\nFROM raw.events AS e\n"
                         "JOIN s.custmers AS c ON e.id = c.id\n",
    "models/customers.sql": "MODEL (\n  name s.customers,\n  kind FULL,\n  depends_on (raw.crm)\n);\n"
                            "SELECT id FROM `raw`.`events`\n",
}


def test_an_undeclared_table_is_an_external_model_with_a_warning(tmp_path):
    root = write_project(tmp_path / "p", READS_UNDECLARED)
    loaded = load_project(root, use_cache=False)
    assert {n: m.kind.name.value for n, m in loaded.models.items() if m.kind.is_external} == {
        "raw.events": "EXTERNAL", "s.custmers": "EXTERNAL", "raw.crm": "EXTERNAL"}
    assert loaded.models["raw.events"].columns is None and loaded.models["raw.events"].path is None
    assert set(loaded.parents("s.orders")) == {"raw.events", "s.custmers"}
    assert set(loaded.parents("s.customers")) == {"raw.events", "raw.crm"}
    assert loaded.warnings == [
        "models/customers.sql:4: s.customers reads raw.crm, which is neither a model nor declared in "
        "external_models.yaml: it is treated as an external table whose columns are unknown "
        "(`mesh create_external_models` declares it).",
        "models/customers.sql:6: s.customers reads raw.events (also read by s.orders), which is neither a model nor "
        "declared in external_models.yaml: it is treated as an external table whose columns are unknown "
        "(`mesh create_external_models` declares it).",
        "models/orders.sql:5: s.orders reads s.custmers, which is neither a model nor declared in "
        "external_models.yaml: it is treated as an external table whose columns are unknown "
        "(`mesh create_external_models` declares it). Did you mean s.customers?",
    ]


def test_the_warning_comes_with_every_load_and_reaches_the_context_once(tmp_path):
    root = write_project(tmp_path / "p", READS_UNDECLARED)
    first = load_project(root).warnings
    assert load_project(root).warnings == first  # read from the parse cache: still warned
    seen: list[str] = []
    context = Context(root, on_warning=seen.append)
    context.project  # noqa: B018
    context.project  # noqa: B018
    assert seen == first


def test_a_plan_over_an_undeclared_table_works_and_declaring_it_changes_no_version(tmp_path):
    root = write_project(tmp_path / "p", READS_UNDECLARED)
    context = Context(root, on_warning=lambda _: None)
    plan = context.plans.plan("prod", execution_time="2024-01-02")
    assert plan.snapshots["raw.events"].model.kind.is_external
    assert set(plan.backfills) == {"s.orders", "s.customers"}
    (root / "external_models.yaml").write_text("- name: raw.events\n- name: s.custmers\n- name: raw.crm\n")
    declared = Context(root)
    assert declared.project.warnings == []
    assert {n: s.version for n, s in declared.plans.plan("prod", execution_time="2024-01-02").snapshots.items()} == \
        {n: s.version for n, s in plan.snapshots.items()}


def test_a_table_that_cannot_be_external_is_refused(tmp_path):
    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT id FROM c.raw.t\n"})
    with pytest.raises(ModelError) as e:
        load_project(root, use_cache=False)
    assert str(e.value).startswith("models/a.sql:3: Model s.a reads c.raw.t, which cannot be an external table")


def test_an_implicit_external_is_a_dagster_source_asset_like_a_declared_one(tmp_path):
    import dagster as dg

    from mesh_dagster.dagster import definitions

    root = write_project(tmp_path / "p", READS_UNDECLARED)
    graph = definitions(root, shared_spark=False).resolve_asset_graph()
    events = graph.get(dg.AssetKey(["raw", "events"]))
    assert not events.is_materializable and events.group_name == "external"
    assert graph.get(dg.AssetKey(["s", "orders"])).parent_keys == {events.key, dg.AssetKey(["s", "custmers"])}


# ---------------------------------------------------------------------------------------------
# external_models.yaml


EXISTING = textwrap.dedent("""\
    - name: raw.zeta
      description: Kept first, with its description
      columns:
        old: int
    - name: raw.gone
      description: Nobody reads it any more
    - name: raw.bq
      dialect: bigquery
      description: Typed in BigQuery
    - name: raw.missing
      columns:
        kept: string
    """)


def test_merge_keeps_entries_and_their_keys_and_appends_new_tables_sorted():
    entries = yaml.safe_load(EXISTING)
    catalog = {
        "raw.zeta": {"id": "bigint", "tags": "array<string>"},
        "raw.bq": {"id": "bigint", "amount": "decimal(10,2)", "name": "string"},
        "raw.missing": None,
        "raw.b_new": {"ds": "date"},
        "raw.a_new": None,
        "raw.odd": {"a.b": "int"},
    }
    merged, report = merge_entries(entries, catalog)
    assert merged == [
        {"name": "raw.zeta", "description": "Kept first, with its description",
         "columns": {"id": "bigint", "tags": "array<string>"}},
        {"name": "raw.gone", "description": "Nobody reads it any more"},
        {"name": "raw.bq", "dialect": "bigquery", "description": "Typed in BigQuery",
         "columns": {"id": "INT64", "amount": "NUMERIC(10, 2)", "name": "STRING"}},
        {"name": "raw.missing", "columns": {"kept": "string"}},  # not in the catalog: as it was
        {"name": "raw.a_new"},
        {"name": "raw.b_new", "columns": {"ds": "date"}},
        {"name": "raw.odd"},
    ]
    assert report.missing == ["raw.a_new", "raw.missing"]
    assert report.with_columns == ["raw.zeta", "raw.bq", "raw.b_new"]
    assert list(report.unsupported) == ["raw.odd"] and "'a.b'" in report.unsupported["raw.odd"]
    assert entries == yaml.safe_load(EXISTING)  # the input is not changed


def test_the_written_file_loads_back_with_the_columns(tmp_path):
    root = write_project(tmp_path / "p", {"external_models.yaml": EXISTING, **READS_UNDECLARED})
    report = write_external_models(root, {"raw.events": {"id": "int", "ts": "timestamp"}, "raw.crm": None,
                                          "s.custmers": {"id": "int", "payload": "struct<a:int,b:string>"},
                                          "raw.bq": {"id": "bigint"}})
    assert report.shown == "external_models.yaml" and report.missing == ["raw.crm"]
    names = [e["name"] for e in yaml.safe_load((root / "external_models.yaml").read_text())]
    assert names == ["raw.zeta", "raw.gone", "raw.bq", "raw.missing", "raw.crm", "raw.events", "s.custmers"]
    loaded = load_project(root, use_cache=False)
    assert loaded.models["raw.events"].columns == {"id": "INT", "ts": "TIMESTAMP"}
    assert loaded.models["raw.bq"].columns == {"id": "BIGINT"}
    assert loaded.models["raw.zeta"].description == "Kept first, with its description"
    assert loaded.warnings == []


def test_invalid_yaml_is_refused_with_its_line_and_nothing_written(tmp_path):
    text = "- name: raw.a\n  columns:\n    id: int\n  - name: [\n"
    root = write_project(tmp_path / "p", {"external_models.yaml": text})
    with pytest.raises(ModelError) as e:
        write_external_models(root, {"raw.a": {"id": "int"}})
    assert str(e.value).startswith("external_models.yaml:4: Invalid YAML")
    assert (root / "external_models.yaml").read_text() == text
    assert sorted(p.name for p in root.iterdir()) == ["config.yaml", "external_models.yaml"]


def test_a_project_without_external_tables_gets_no_file(tmp_path):
    root = write_project(tmp_path / "p", {"models/a.sql": MODELS["models/a.sql"]})
    report = write_external_models(root, {})
    assert report.written == [] and not (root / "external_models.yaml").exists()


class CatalogEngine(FakeEngine):
    def __init__(self, tables: dict[str, dict[str, str]]):
        super().__init__()
        self.tables.update(tables)


def test_context_reads_the_catalog_and_strict_refuses_missing_tables(tmp_path):
    root = write_project(tmp_path / "p", READS_UNDECLARED)
    engine = CatalogEngine({"raw.events": {"id": "int"}, "s.custmers": {"id": "int", "name": "string"}})
    with pytest.raises(MeshError) as e:
        Context(root, engine=engine).inspection.create_external_models(strict=True)
    assert str(e.value) == "Tables not found in the catalog: raw.crm. Nothing was written to external_models.yaml."
    assert not (root / "external_models.yaml").exists()
    report = Context(root, engine=engine).inspection.create_external_models()
    assert report.missing == ["raw.crm"] and report.with_columns == ["raw.events", "s.custmers"]
    assert yaml.safe_load((root / "external_models.yaml").read_text()) == [
        {"name": "raw.crm"},
        {"name": "raw.events", "columns": {"id": "int"}},
        {"name": "s.custmers", "columns": {"id": "int", "name": "string"}},
    ]
