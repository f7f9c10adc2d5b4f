"""Project configuration (`config.yaml`).

The embedded default needs no configuration at all: local Spark with a Hive catalog inside the
project's `.mesh/` folder and a SQLite state file beside it. Teams switch either half by
pointing `connection.remote`/`master` at their Spark and `state_connection` at Postgres.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mesh_dagster.core.errors import ConfigError

CONFIG_FILES = ("config.yaml", "config.yml")
MESH_DIR = ".mesh"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SparkConnectionConfig(_Strict):
    """How to reach Spark: embedded `local[*]` (default), a cluster `master`, or Spark Connect."""

    type: Literal["spark"] = "spark"
    master: str = "local[*]"
    remote: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    catalog: str | None = None
    concurrent_tasks: int = 1

    @property
    def is_local(self) -> bool:
        return self.remote is None and self.master.startswith("local")


class StateConnectionConfig(_Strict):
    """Where plans, snapshots, environments and intervals live. Never Spark."""

    type: Literal["sqlite", "postgres"] = "sqlite"
    database: str | None = None
    host: str = "127.0.0.1"
    port: int = 5432
    user: str | None = None
    password: str | None = None
    url: str | None = None

    def to_url(self, project_dir: Path) -> str:
        if self.url:
            return self.url
        if self.type == "sqlite":
            db = Path(self.database or f"{MESH_DIR}/state.db")
            if not db.is_absolute():
                db = project_dir / db
            return f"sqlite:///{db}"
        auth = self.user or "postgres"
        if self.password:
            auth += f":{self.password}"
        return f"postgresql+psycopg://{auth}@{self.host}:{self.port}/{self.database or 'postgres'}"


class GatewayConfig(_Strict):
    connection: SparkConnectionConfig = Field(default_factory=SparkConnectionConfig)
    state_connection: StateConnectionConfig | None = None
    variables: dict[str, Any] = Field(default_factory=dict)


class ModelDefaults(_Strict):
    dialect: str = "spark"
    start: str | None = None
    cron: str = "@daily"
    owner: str | None = None
    storage_format: str | None = None
    audits: list[str] = Field(default_factory=list)

    @field_validator("start", mode="before")
    @classmethod
    def _stringify_start(cls, value: Any) -> Any:
        # YAML turns `start: 2020-01-01` into a date object.
        return None if value is None else str(value)


class PlanDefaults(_Strict):
    include_unmodified: bool = False
    no_prompts: bool = False
    auto_apply: bool = False


class ProjectConfig(_Strict):
    gateways: dict[str, GatewayConfig] = Field(default_factory=lambda: {"local": GatewayConfig()})
    default_gateway: str | None = None
    model_defaults: ModelDefaults = Field(default_factory=ModelDefaults)
    variables: dict[str, Any] = Field(default_factory=dict)
    snapshot_ttl: str = "in 1 week"
    environment_ttl: str = "in 1 week"
    pinned_environments: list[str] = Field(default_factory=list)
    default_target_environment: str = "prod"
    plan: PlanDefaults = Field(default_factory=PlanDefaults)
    state_connection: StateConnectionConfig | None = None
    linter: dict[str, Any] = Field(default_factory=dict)

    def gateway(self, name: str | None = None) -> GatewayConfig:
        name = name or self.default_gateway or next(iter(self.gateways), None)
        if name is None:
            return GatewayConfig()
        if name not in self.gateways:
            raise ConfigError(f"Unknown gateway '{name}'. Known: {', '.join(self.gateways)}")
        return self.gateways[name]

    def state_connection_for(self, gateway: str | None = None) -> StateConnectionConfig:
        return self.gateway(gateway).state_connection or self.state_connection or StateConnectionConfig()

    def variables_for(self, gateway: str | None = None) -> dict[str, Any]:
        return {**{k.lower(): v for k, v in self.variables.items()},
                **{k.lower(): v for k, v in self.gateway(gateway).variables.items()}}


_ENV_VAR = re.compile(r"\{\{\s*env_var\(\s*['\"]([^'\"]+)['\"]\s*(?:,\s*['\"]([^'\"]*)['\"]\s*)?\)\s*\}\}")


def _expand_env_vars(text: str) -> str:
    """Support `{{ env_var('NAME', 'default') }}` like SQLMesh's templated YAML."""
    return _ENV_VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), text)


def find_config_file(project_dir: Path) -> Path | None:
    for name in CONFIG_FILES:
        path = project_dir / name
        if path.is_file():
            return path
    return None


def load_config(project_dir: Path) -> ProjectConfig:
    """Read and validate config.yaml; a missing file means all defaults."""
    path = find_config_file(project_dir)
    if path is None:
        raise ConfigError(f"No config.yaml found in {project_dir}. Run `mesh init spark` to create a project.")
    try:
        raw = yaml.safe_load(_expand_env_vars(path.read_text())) or {}
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise ConfigError(f"Invalid YAML: {getattr(e, 'problem', e)}", path, line + 1 if line is not None else None) from None
    if not isinstance(raw, dict):
        raise ConfigError("The configuration must be a mapping", path, 1)
    try:
        return ProjectConfig.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{loc}: {err['msg']}", path, _line_of_key(path, str(err["loc"][0]))) from None


def _line_of_key(path: Path, key: str) -> int | None:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith(f"{key}:"):
            return i
    return None
