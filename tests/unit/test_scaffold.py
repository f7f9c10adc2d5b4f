"""`mesh init`: the files written, the configuration, and refusals (no Spark)."""

from __future__ import annotations

import csv
from datetime import date
from pathlib import Path

import pytest
import yaml

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.models.kinds import KindName
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.project import load_project
from mesh_dagster.scaffold import CLI_MODES, ENGINES, PROJECT_TYPES, check_engine, init_project, next_steps_message
from mesh_dagster.testing import load_tests

TODAY = date(2025, 6, 22)
DEFAULT_FILES = {
    "config.yaml",
    ".gitignore",
    "macros/__init__.py",
    "models/seed_model.sql",
    "models/incremental_model.sql",
    "models/full_model.sql",
    "seeds/seed_data.csv",
    "audits/assert_positive_order_ids.sql",
    "tests/test_full_model.yaml",
}


def relative(paths: list[Path], root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in paths}


def test_default_project_files(tmp_path: Path) -> None:
    created = init_project(tmp_path / "sqlmesh-example", today=TODAY)
    root = tmp_path / "sqlmesh-example"
    assert relative(created, root) == DEFAULT_FILES
    assert all(p.is_file() for p in created)
    for directory in ("models", "seeds", "audits", "tests", "macros"):
        assert (root / directory).is_dir()
    assert (root / "macros" / "__init__.py").read_text() == ""
    assert ".mesh/" in (root / ".gitignore").read_text().splitlines()


def test_seed_csv_has_header_and_seven_rows(tmp_path: Path) -> None:
    init_project(tmp_path, today=TODAY)
    with (tmp_path / "seeds" / "seed_data.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", "item_id", "event_date"]
    assert rows[1:] == [
        ["1", "2", "2020-01-01"], ["2", "1", "2020-01-01"], ["3", "3", "2020-01-03"], ["4", "1", "2020-01-04"],
        ["5", "1", "2020-01-05"], ["6", "1", "2020-01-06"], ["7", "1", "2020-01-07"],
    ]


def test_config_for_spark(tmp_path: Path) -> None:
    init_project(tmp_path, today=TODAY)
    text = (tmp_path / "config.yaml").read_text()
    raw = yaml.safe_load(text)
    assert raw["gateways"] == {"local": {"connection": {"type": "spark", "master": "local[*]"}}}
    assert raw["default_gateway"] == "local"
    assert raw["model_defaults"] == {"dialect": "spark", "start": date(2025, 6, 12), "cron": "@daily"}
    assert "plan" not in raw
    # the optional settings are there, commented out
    for line in ("# remote: sc://127.0.0.1:15002", "# config:", "# state_connection:", "#   type: sqlite",
                 "#   database: .mesh/state.db", "#   type: postgres"):
        assert line in text
    config = load_config(tmp_path)
    assert config.gateway().connection.master == "local[*]"
    assert config.model_defaults.start == "2025-06-12"


def test_commented_examples_are_valid_config(tmp_path: Path) -> None:
    """Uncommenting the examples must give a configuration mesh accepts."""
    init_project(tmp_path, today=TODAY)
    text = (tmp_path / "config.yaml").read_text()
    text = text.replace("      # remote: sc://127.0.0.1:15002", "      remote: sc://127.0.0.1:15002")
    text = text.replace("      # config:", "      config:")
    for key in ("spark.sql.shuffle.partitions", "spark.driver.memory", "spark.sql.warehouse.dir"):
        text = text.replace(f"      #   {key}", f"        {key}")
    postgres = text.index("    # state_connection:\n    #   type: postgres")
    block = text[postgres:].split("\n\n")[0]
    uncommented = "\n".join(line.replace("    # ", "    ", 1) for line in block.splitlines())
    text = text.replace(block, uncommented)
    (tmp_path / "config.yaml").write_text(text)
    config = load_config(tmp_path)
    gateway = config.gateway()
    assert gateway.connection.remote == "sc://127.0.0.1:15002"
    assert gateway.connection.config["spark.sql.shuffle.partitions"] == 8
    assert gateway.state_connection is not None and gateway.state_connection.type == "postgres"


def test_flow_mode_applies_without_prompts(tmp_path: Path) -> None:
    init_project(tmp_path, cli_mode="flow", today=TODAY)
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["plan"] == {"no_prompts": True, "auto_apply": True}
    config = load_config(tmp_path)
    assert config.plan.no_prompts and config.plan.auto_apply


def test_empty_template(tmp_path: Path) -> None:
    created = init_project(tmp_path, template="empty", today=TODAY)
    assert relative(created, tmp_path) == {"config.yaml", ".gitignore", "macros/__init__.py"}
    for directory in ("models", "seeds", "audits", "tests", "macros"):
        assert (tmp_path / directory).is_dir()
    assert list((tmp_path / "models").iterdir()) == []
    project = load_project(tmp_path)
    assert project.models == {}


def test_scaffolded_project_loads(tmp_path: Path) -> None:
    init_project(tmp_path, today=TODAY)
    project = load_project(tmp_path)
    assert set(project.models) == {"sqlmesh_example.seed_model", "sqlmesh_example.incremental_model",
                                   "sqlmesh_example.full_model"}
    seed = project.models["sqlmesh_example.seed_model"]
    assert seed.kind.name == KindName.SEED
    assert seed.columns == {"id": "INT", "item_id": "INT", "event_date": "DATE"}
    incremental = project.models["sqlmesh_example.incremental_model"]
    assert incremental.kind.time_column == "event_date"
    assert incremental.start == "2020-01-01"
    full = project.models["sqlmesh_example.full_model"]
    assert full.kind.name == KindName.FULL
    assert [a.name for a in full.audits] == ["assert_positive_order_ids"]
    assert full.start == "2025-06-12"  # model_defaults.start
    assert set(project.parents("sqlmesh_example.full_model")) == {"sqlmesh_example.incremental_model"}
    assert set(project.parents("sqlmesh_example.incremental_model")) == {"sqlmesh_example.seed_model"}
    assert "assert_positive_order_ids" in project.audits
    assert project.columns("sqlmesh_example.full_model") is not None
    assert list(project.columns("sqlmesh_example.full_model")) == ["item_id", "num_orders"]
    (test,) = load_tests(project)
    assert test.model == "sqlmesh_example.full_model"


def test_refuses_to_overwrite_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model_defaults: {dialect: spark}\n")
    with pytest.raises(MeshError) as info:
        init_project(tmp_path, today=TODAY)
    assert str(info.value) == f"{tmp_path / 'config.yaml'}: A project already exists here: refusing to overwrite its configuration"
    assert (tmp_path / "config.yaml").read_text() == "model_defaults: {dialect: spark}\n"
    assert not (tmp_path / "models").exists()


def test_refuses_config_yml_too(tmp_path: Path) -> None:
    (tmp_path / "config.yml").write_text("{}\n")
    with pytest.raises(MeshError, match="config.yml: A project already exists here"):
        init_project(tmp_path, today=TODAY)


def test_existing_files_are_kept(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "full_model.sql").write_text("-- mine\n")
    (tmp_path / ".gitignore").write_text("*.pyc")
    created = init_project(tmp_path, today=TODAY)
    assert (tmp_path / "models" / "full_model.sql").read_text() == "-- mine\n"
    assert "models/full_model.sql" not in relative(created, tmp_path)
    assert (tmp_path / ".gitignore").read_text().splitlines()[0] == "*.pyc"
    assert ".mesh/" in (tmp_path / ".gitignore").read_text().splitlines()
    # a second project-less run of the gitignore step does not duplicate the entry
    (tmp_path / "config.yaml").unlink()
    init_project(tmp_path, today=TODAY)
    assert (tmp_path / ".gitignore").read_text().splitlines().count(".mesh/") == 1


def test_other_engines_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(MeshError) as info:
        init_project(tmp_path, engine="duckdb", today=TODAY)
    assert str(info.value).startswith("mesh_dagster runs models on Apache Spark only; DuckDB is not supported.")
    assert "`mesh init spark`" in str(info.value)
    assert not (tmp_path / "config.yaml").exists()
    with pytest.raises(MeshError, match="Oracle is not supported"):
        check_engine("Oracle")
    check_engine("spark")
    init_project(tmp_path / "upper", engine="Spark", today=TODAY)
    assert (tmp_path / "upper" / "config.yaml").is_file()


def test_unknown_template_and_mode(tmp_path: Path) -> None:
    with pytest.raises(MeshError, match="Unknown project template 'dbt'. Choose one of: default, empty"):
        init_project(tmp_path, template="dbt")
    with pytest.raises(MeshError, match="Unknown CLI mode 'fast'. Choose one of: default, flow"):
        init_project(tmp_path, cli_mode="fast")


def test_questions() -> None:
    assert list(PROJECT_TYPES) == ["default", "empty"]
    assert PROJECT_TYPES["default"].startswith("DEFAULT")
    assert list(ENGINES.values()) == ["DuckDB", "Snowflake", "Databricks", "BigQuery", "MotherDuck", "ClickHouse",
                                      "Redshift", "Spark", "Trino", "Azure SQL", "MSSQL", "Postgres", "GCP Postgres",
                                      "MySQL", "Athena", "RisingWave"]
    assert list(CLI_MODES) == ["default", "flow"]
    assert CLI_MODES["flow"].startswith("FLOW")


def test_next_steps_message(tmp_path: Path) -> None:
    message = next_steps_message(tmp_path)
    assert message.startswith("Your mesh_dagster project is ready!")
    assert str(tmp_path / "config.yaml") in message
    assert "- Run command in CLI: mesh plan" in message
    assert "- (Optional) Explain a plan: mesh plan --explain" in message


def test_macros_in_the_scaffolded_package_init_are_usable(tmp_path: Path) -> None:
    """`mesh init` writes macros/__init__.py; what a user defines there is a macro like any other."""
    init_project(tmp_path, today=TODAY)
    (tmp_path / "macros" / "__init__.py").write_text(
        "from mesh_dagster import macro\n\n\n@macro()\ndef positive(evaluator, column):\n"
        "    return f'{column.sql()} > 0'\n")
    (tmp_path / "models" / "positive_items.sql").write_text(
        "MODEL (name sqlmesh_example.positive_items, kind VIEW);\n\n"
        "SELECT item_id FROM sqlmesh_example.full_model WHERE @positive(num_orders)\n")
    project = load_project(tmp_path, use_cache=False)
    assert project.macros.names() == ["positive"]
    assert project.parents("sqlmesh_example.positive_items") == ["sqlmesh_example.full_model"]


def test_an_existing_gitignore_in_another_encoding_is_appended_to_untouched(tmp_path: Path) -> None:
    original = "# r\xe9sum\xe9 files\n*.pdf\n".encode("latin-1")
    (tmp_path / ".gitignore").write_bytes(original)
    init_project(tmp_path, template="empty", today=TODAY)
    data = (tmp_path / ".gitignore").read_bytes()
    assert data.startswith(original) and b".mesh/" in data.splitlines()


def test_the_commented_server_block_is_valid_config(tmp_path: Path) -> None:
    init_project(tmp_path, today=TODAY)
    text = (tmp_path / "config.yaml").read_text()
    for key in ("server:", "  enabled: true", "  idle_minutes: 30"):
        text = text.replace(f"      # {key}", f"      {key}")
    (tmp_path / "config.yaml").write_text(text)
    server = load_config(tmp_path).gateway().connection.server
    assert server.model_fields_set == {"enabled", "idle_minutes"}
    assert (server.enabled, server.idle_minutes) == (True, 30)
