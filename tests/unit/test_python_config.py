"""SQLMesh's Python configuration (`config.py`): read when SQLMesh is not installed, as the same
settings config.yaml would give, with the same refusals at the line of the keyword.

SQLMesh's documented form: `config = Config(gateways={...: GatewayConfig(connection=...)},
model_defaults=ModelDefaultsConfig(dialect=...), linter=LinterConfig(...), ...)` built from
`sqlmesh.core.config`'s classes; the object named `config` is the project's configuration.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots

PY_CONFIG = """
from sqlmesh.core.config import (
    AutoCategorizationMode,
    CategorizerConfig,
    Config,
    GatewayConfig,
    LinterConfig,
    ModelDefaultsConfig,
    PlanConfig,
    SparkConnectionConfig,
)

config = Config(
    gateways={
        "local": GatewayConfig(
            connection=SparkConnectionConfig(
                concurrent_tasks=2,
                config={"spark.sql.shuffle.partitions": "2"},
            ),
            variables={"region": "eu"},
        ),
    },
    default_gateway="local",
    model_defaults=ModelDefaultsConfig(dialect="duckdb", start="2020-01-01", cron="@daily", owner="jen"),
    variables={"limit": 3},
    linter=LinterConfig(enabled=True, rules=["noselectstar"], warn_rules="ALL"),
    plan=PlanConfig(auto_categorize_changes=CategorizerConfig(sql=AutoCategorizationMode.SEMI)),
)
"""

YAML_CONFIG = """
gateways:
  local:
    connection:
      type: spark
      concurrent_tasks: 2
      config:
        spark.sql.shuffle.partitions: '2'
    variables:
      region: eu
default_gateway: local
model_defaults:
  dialect: duckdb
  start: 2020-01-01
  cron: '@daily'
  owner: jen
variables:
  limit: 3
linter:
  enabled: true
  rules: [noselectstar]
  warn_rules: ALL
plan:
  auto_categorize_changes:
    sql: semi
"""

MODELS = {"models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT @limit AS a, @region AS r\n"}


def _py_project(root: Path, text: str, files: dict[str, str] | None = None) -> Path:
    write_project(root, {**MODELS, **(files or {})})
    (root / "config.yaml").unlink()
    (root / "config.py").write_text(textwrap.dedent(text).lstrip())
    return root


def _yaml_project(root: Path) -> Path:
    return write_project(root, MODELS, textwrap.dedent(YAML_CONFIG).lstrip())


def _refused(root: Path, *fragments: str) -> str:
    with pytest.raises(MeshError) as e:
        load_config(root)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)
    return str(e.value)


def test_config_py_gives_the_settings_of_the_same_yaml(tmp_path: Path) -> None:
    from_py = load_config(_py_project(tmp_path / "py", PY_CONFIG))
    from_yaml = load_config(_yaml_project(tmp_path / "yaml"))
    assert from_py.model_dump() == from_yaml.model_dump()
    assert from_py.linter.warn_rules == ["all"] and from_py.plan.auto_categorize_changes.sql == "semi"


def test_model_defaults_and_variables_of_config_py_decide_the_data_as_yaml_does(tmp_path: Path) -> None:
    py = build_snapshots(load_project(_py_project(tmp_path / "py", PY_CONFIG), use_cache=False))
    yaml = build_snapshots(load_project(_yaml_project(tmp_path / "yaml"), use_cache=False))
    assert py["s.m"].fingerprint == yaml["s.m"].fingerprint
    changed = _py_project(tmp_path / "py2", PY_CONFIG.replace('{"limit": 3}', '{"limit": 4}'))
    assert build_snapshots(load_project(changed, use_cache=False))["s.m"].fingerprint != py["s.m"].fingerprint


def test_errors_name_config_py_and_the_line_of_the_keyword(tmp_path: Path) -> None:
    bad_cron = PY_CONFIG.replace('cron="@daily", owner="jen"', 'owner="jen",\n        cron="every day"')
    line = textwrap.dedent(bad_cron).lstrip().splitlines().index('        cron="every day"),') + 1
    _refused(_py_project(tmp_path / "a", bad_cron), f"config.py:{line}:", "model_defaults.cron")
    unknown = PY_CONFIG.replace("default_gateway=", "userz=[],\n    default_gateway=")
    line = textwrap.dedent(unknown).lstrip().splitlines().index("    userz=[],") + 1
    _refused(_py_project(tmp_path / "b", unknown), f"config.py:{line}:", "userz: unknown setting")
    same_rule = PY_CONFIG.replace('warn_rules="ALL"', 'warn_rules=["noselectstar"]')
    _refused(_py_project(tmp_path / "c", same_rule), "config.py:", "linter.warn_rules", "also in linter.rules")


TWO_ENGINES_PY = """
    from sqlmesh.core.config import (
        Config, DuckDBConnectionConfig, GatewayConfig, ModelDefaultsConfig, SparkConnectionConfig,
    )

    config = Config(
        gateways={
            "local": GatewayConfig(connection=DuckDBConnectionConfig(database="db.db")),
            "spark": GatewayConfig(connection=SparkConnectionConfig(concurrent_tasks=2)),
        },
        default_gateway="local",
        model_defaults=ModelDefaultsConfig(dialect="duckdb"),
    )
"""
TWO_ENGINES_YAML = """gateways:
  local:
    connection:
      type: duckdb
      database: db.db
  spark:
    connection:
      type: spark
      concurrent_tasks: 2
default_gateway: local
model_defaults:
  dialect: duckdb
"""
PLAIN = {"models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT 1 AS a\n"}


def _two_engine_projects(tmp_path: Path) -> list[Path]:
    py = _py_project(tmp_path / "py", TWO_ENGINES_PY)
    (py / "models" / "m.sql").write_text(PLAIN["models/m.sql"])
    return [py, write_project(tmp_path / "yaml", PLAIN, TWO_ENGINES_YAML)]


def test_a_gateway_of_another_engine_is_accepted_while_another_is_selected(tmp_path: Path) -> None:
    """SQLMesh connects to the selected gateway only: a DuckDB `default_gateway` for local work beside
    a Spark gateway is a usual SQLMesh project, run here with `--gateway spark`."""
    for root in _two_engine_projects(tmp_path):
        config = load_config(root)
        assert (config.gateway_names, list(config.gateways)) == (["local", "spark"], ["spark"])
        project = load_project(root, gateway="spark", use_cache=False)
        assert project.concurrent_tasks == 2 and list(project.models) == ["s.m"]


def test_a_gateway_of_another_engine_is_refused_when_selected_at_its_line(tmp_path: Path) -> None:
    py, yaml_root = _two_engine_projects(tmp_path)
    expected = ("Gateway 'local' connects to duckdb: mesh_dagster runs models on Spark only; select a Spark "
                "gateway (spark) with --gateway or default_gateway")
    for root, where in ((py, "config.py:7: "), (yaml_root, "config.yaml:4: ")):
        for gateway in (None, "local"):  # by default_gateway, or by name
            with pytest.raises(MeshError) as e:
                load_project(root, gateway=gateway, use_cache=False)
            assert str(e.value) == where + expected
    only = write_project(tmp_path / "only", PLAIN, "gateways:\n  local:\n    connection:\n      type: duckdb\n")
    with pytest.raises(MeshError) as e:  # no default_gateway: the first gateway is selected
        load_project(only, use_cache=False)
    assert str(e.value) == ("config.yaml:4: Gateway 'local' connects to duckdb: mesh_dagster runs models on Spark "
                            "only; add a gateway with `connection: {type: spark}`")
    with pytest.raises(MeshError, match="Unknown gateway 'nope'. Known: local, spark"):
        load_project(yaml_root, gateway="nope", use_cache=False)


def test_a_config_py_that_raises_is_refused_at_its_line(tmp_path: Path) -> None:
    raising = "from sqlmesh.core.config import Config\n\nlimit = int('x')\nconfig = Config()\n"
    _refused(_py_project(tmp_path / "a", raising), "config.py:3:", "ValueError")
    _refused(_py_project(tmp_path / "b", "config = Config(\n"), "config.py:1:", "Invalid Python")
    missing = "from sqlmesh.core.config import Config, AirflowSchedulerConfig\nconfig = Config()\n"
    _refused(_py_project(tmp_path / "c", missing), "config.py:1:", "AirflowSchedulerConfig",
             "sqlmesh.core.config (Config, ModelDefaultsConfig")


def test_config_py_imports_the_project_s_own_modules(tmp_path: Path) -> None:
    text = "from sqlmesh.core.config import Config, ModelDefaultsConfig\nfrom settings import DIALECT\n\n" \
           "config = Config(model_defaults=ModelDefaultsConfig(dialect=DIALECT))\n"
    root = _py_project(tmp_path / "p", text, {"settings.py": "DIALECT = 'hive'\n"})
    assert load_config(root).model_defaults.dialect == "hive"


def test_the_config_object_must_be_named_config(tmp_path: Path) -> None:
    text = "from sqlmesh.core.config import Config\n\nprod_config = Config()\ndev_config = Config()\n"
    _refused(_py_project(tmp_path / "a", text), "config.py:1:", "no `config`", "dev_config, prod_config")
    _refused(_py_project(tmp_path / "b", "config = {'model_defaults': {}}\n"), "config.py:1:",
             "`config` in config.py is a dict, not a sqlmesh.core.config.Config")


def test_config_py_beside_config_yaml_is_refused(tmp_path: Path) -> None:
    root = _yaml_project(tmp_path / "p")
    (root / "config.py").write_text(textwrap.dedent(PY_CONFIG).lstrip())
    _refused(root, "config.py:1:", "Both config.yaml and config.py configure this project")


def test_settings_changed_after_the_call_count(tmp_path: Path) -> None:
    text = PY_CONFIG + "\nconfig.variables = {'limit': 5}\nconfig.model_defaults.dialect = 'hive'\n"
    config = load_config(_py_project(tmp_path / "p", text))
    assert config.variables == {"limit": 5} and config.model_defaults.dialect == "hive"


SEVERAL_CONFIGS = """
from sqlmesh.core.config import (
    BigQueryConnectionConfig, Config, GatewayConfig, ModelDefaultsConfig, SnowflakeConnectionConfig,
    SparkConnectionConfig,
)
from sqlmesh.core.config.common import EnvironmentSuffixTarget, VirtualEnvironmentMode
from sqlmesh.core.config.connection import DuckDBConnectionConfig, PostgresConnectionConfig
from sqlmesh.core.config.linter import LinterConfig
from sqlmesh.core.notification_target import NotificationEvent, SlackWebhookNotificationTarget
from sqlmesh.core.user import User, UserRole

SLACK = SlackWebhookNotificationTarget(notify_on=[NotificationEvent.APPLY_FAILURE], url="https://hooks/x")
ADMINS = [User(username="ana", roles=[UserRole.REQUIRED_APPROVER])]
base = Config(
    gateways={
        "spark": GatewayConfig(connection=SparkConnectionConfig(concurrent_tasks=2)),
        "bigquery": GatewayConfig(connection=BigQueryConnectionConfig(project="p"),
                                  state_connection=PostgresConnectionConfig(host="db")),
        "snowflake": GatewayConfig(connection=SnowflakeConnectionConfig(account="a")),
        "duck": GatewayConfig(connection=DuckDBConnectionConfig(database="local.db")),
    },
    default_gateway="spark",
    model_defaults=ModelDefaultsConfig(dialect="spark", start="2020-01-01"),
    linter=LinterConfig(enabled=False),
)
bigquery_config = base.copy(update={"default_gateway": "bigquery"})
config = base.model_copy(update={"variables": {"limit": 7}})
{more}
"""


def test_several_configs_derived_by_copy_load_and_only_the_selected_gateway_runs(tmp_path: Path) -> None:
    """A usual SQLMesh config.py: several engines' connections, configs derived with `.copy(update=...)`
    / `.model_copy(update=...)`, SQLMesh's enums, users and notification targets defined but unused."""
    config = load_config(_py_project(tmp_path / "p", SEVERAL_CONFIGS.replace("{more}", "")))
    assert config.gateway_names == ["spark", "bigquery", "snowflake", "duck"] and list(config.gateways) == ["spark"]
    assert config.variables == {"limit": 7} and config.gateway().connection.concurrent_tasks == 2
    assert config.linter.enabled is False


@pytest.mark.parametrize("more, where, fragments", [
    ("config = base.copy(update={'default_gateway': 'snowflake'})", "config.py:", (
        "Gateway 'snowflake' connects to snowflake: mesh_dagster runs models on Spark only",)),
    ("config = base.model_copy(update={'notification_targets': [SLACK]})", "config.py:11: ", (
        "notification target type 'slack_webhook' is not supported: only webhook",)),
    ("config = base.copy(update={'users': ADMINS})", "config.py:", ("users: unknown setting",)),
    ("config = base.copy(update={'virtual_environment_mode': VirtualEnvironmentMode.DEV_ONLY})", "config.py:", (
        "virtual_environment_mode",)),
])
def test_what_a_derived_config_cannot_run_is_refused_when_selected(tmp_path: Path, more: str, where: str,
                                                                   fragments: tuple[str, ...]) -> None:
    root = _py_project(tmp_path / "p", SEVERAL_CONFIGS.replace("{more}", more))
    with pytest.raises(MeshError) as e:
        load_project(root, use_cache=False)
    assert str(e.value).startswith(where) and all(f in str(e.value) for f in fragments), str(e.value)
