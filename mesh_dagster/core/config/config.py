"""Project configuration (`config.yaml`).

The embedded default needs no configuration at all: local Spark with a Hive catalog inside the
project's `.mesh/` folder and a SQLite state file beside it. Teams switch either half by
pointing `connection.remote`/`master` at their Spark and `state_connection` at Postgres.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, field_validator

from mesh_dagster.core.config.connections import (
    GatewayConfig,
    Loc,
    StateConnectionConfig,
    Strict,
    connection_refusals,
    state_connection_refusals,
)
from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.config.files import compose_yaml, load_yaml, outside_project, read_text
from mesh_dagster.core.config.names import PROD, EnvironmentNameError, normalize_environment
from mesh_dagster.core.config.python_config import CONFIG_PY, read_python_config
from mesh_dagster.core.config.redaction import redact_text
from mesh_dagster.core.config.spark_settings import check_setting, reserved_refusal
from mesh_dagster.core.config.statements import check_statement
from mesh_dagster.core.config.types import check_dialect, check_storage_format
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.time.cron import IntervalUnit, validate_cron, validate_cron_tz
from mesh_dagster.core.time.dates import parse_ttl, to_datetime

CONFIG_FILES = ("config.yaml", "config.yml")


class SchemaChangePolicy(str, Enum):
    """What a plan or run does when a kept table's schema must change (`on_destructive_change`,
    `on_additive_change`): refuse, warn and go on, go on, or go on without touching the table."""

    ERROR = "error"
    WARN = "warn"
    ALLOW = "allow"
    IGNORE = "ignore"


class ModelDefaults(Strict):
    dialect: str = "spark"
    start: str | None = None
    cron: str = "@daily"
    cron_tz: str | None = None
    interval_unit: str | None = None
    allow_partials: bool = False
    owner: str | None = None
    storage_format: str | None = None
    # Audits attached to every model that holds data, written like a model's `audits` entries.
    audits: list[str] = Field(default_factory=list)
    # Schema-change policies of every incremental model that does not set its own.
    on_destructive_change: SchemaChangePolicy | None = None
    on_additive_change: SchemaChangePolicy | None = None
    # Spark settings of every model's queries (core/models/session_properties.py); a model's own win.
    session_properties: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("session_properties")
    @classmethod
    def _check_session_properties(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            check_setting(key)  # ValueError names the setting and why
        return value

    @field_validator("start", mode="before")
    @classmethod
    def _stringify_start(cls, value: Any) -> Any:
        # YAML turns `start: 2020-01-01` into a date object.
        return None if value is None else str(value)

    @field_validator("start")
    @classmethod
    def _check_start(cls, value: str | None) -> str | None:
        if value is not None:
            to_datetime(value)  # ValueError names the value and what is accepted
        return value

    @field_validator("on_destructive_change", "on_additive_change", mode="before")
    @classmethod
    def _lower_policy(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        return validate_cron(value)

    @field_validator("cron_tz")
    @classmethod
    def _check_cron_tz(cls, value: str | None) -> str | None:
        return None if value is None else validate_cron_tz(value)

    @field_validator("interval_unit")
    @classmethod
    def _check_interval_unit(cls, value: str | None) -> str | None:
        return None if value is None else IntervalUnit.parse(value).value

    @field_validator("dialect")
    @classmethod
    def _check_dialect(cls, value: str) -> str:
        return check_dialect(value)

    @field_validator("storage_format")
    @classmethod
    def _check_storage_format(cls, value: str | None) -> str | None:
        return None if value is None else check_storage_format(value)




CategorizeMode = Literal["full", "semi", "off"]


class AutoCategorize(Strict):
    """Per kind of source: `full` categorizes every directly modified model automatically, `semi`
    asks when the change could not be proven non-breaking, `off` always asks."""

    sql: CategorizeMode = "full"
    python: CategorizeMode = "full"
    seed: CategorizeMode = "full"
    external: CategorizeMode = "full"

    @field_validator("sql", "python", "seed", "external", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML reads a bare `off` as false.
        if value is False:
            return "off"
        return value.strip().lower() if isinstance(value, str) else value


class PlanDefaults(Strict):
    include_unmodified: bool = False
    no_prompts: bool = False
    auto_apply: bool = False
    forward_only: bool = False
    auto_categorize_changes: AutoCategorize = Field(default_factory=AutoCategorize)
    data_diff: DataDiffSettings = Field(default_factory=DataDiffSettings)


class ProtectedEnvironment(Strict):
    """An environment changed only by approved plans (core/plan/review.py)."""

    approvers: list[str] = Field(default_factory=list)  # identities (MESH_USER / git e-mail / OS user)
    allow_self_approval: bool = False

    @field_validator("approvers")
    @classmethod
    def _check_approvers(cls, value: list[str]) -> list[str]:
        blank = [a for a in value if not str(a).strip()]
        if blank:
            raise ValueError("an approver cannot be empty")
        return [str(a).strip() for a in value]


NOTIFICATION_EVENTS = ("plan_pending", "plan_approved", "plan_rejected", "plan_cancelled", "plan_applied",
                       "plan_failed", "plan_superseded", "run_failed")


class NotificationTarget(Strict):
    """A webhook that receives a small JSON body for each of its `events` (all of them by default)."""

    type: str = "webhook"
    url: str
    events: list[str] = Field(default_factory=lambda: list(NOTIFICATION_EVENTS))

    @field_validator("type")
    @classmethod
    def _check_type(cls, value: str) -> str:
        if value != "webhook":
            raise ValueError(f"notification target type '{value}' is not supported: only webhook")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value.strip()):
            raise ValueError(f"'{redact_text(value)}' is not an http(s) URL")
        return value.strip()

    @field_validator("events")
    @classmethod
    def _check_events(cls, value: list[str]) -> list[str]:
        unknown = [e for e in value if e not in NOTIFICATION_EVENTS]
        if unknown:
            raise ValueError(f"unknown event(s) {', '.join(unknown)}; known: {', '.join(NOTIFICATION_EVENTS)}")
        return value

    def wants(self, event: str) -> bool:
        return event in self.events


def _check_env_name(value: str) -> str:
    """`value` if it names an environment variable: settings that name one never hold its value."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):  # not echoed: it may be the secret itself
        raise ValueError("not an environment variable name (write the variable's name: its value never goes here)")
    return value


EnvName = Annotated[str, AfterValidator(_check_env_name)]  # the name of an environment variable


class GitWatchConfig(Strict):
    """A git repository whose pushes become plans (the Dagster git sensor, dagster/jobs/git_sensor.py)."""

    repo: str  # a local repository or a bare one people push to, relative to the project
    branches: list[str] = Field(default_factory=lambda: ["*"])  # fnmatch patterns of branches to watch
    protected: list[str] = Field(default_factory=lambda: ["main"])  # their pushes make a pending plan for prod
    project_path: str = "."  # where the project lives inside the repository
    tick_timeout_s: float = Field(30.0, gt=0)  # a sensor tick never takes longer than this
    poll_interval_s: int = Field(30, ge=1)  # seconds between the sensor's looks at the repository
    # Seconds a push's git worker may take (loading, planning and, outside protected branches,
    # applying): it is stopped then and its plan settled (execution/plans/git_worker.py). None: no limit.
    plan_timeout_s: float | None = Field(None, gt=0)
    # Environment variables the git worker gets besides its fixed few (those the project's
    # config.yaml reads for its Spark connection, say): nothing else of this process reaches it.
    worker_env: list[EnvName] = Field(default_factory=list)

    def repo_path(self, project_dir: Path) -> Path:
        path = Path(self.repo).expanduser()
        return path if path.is_absolute() else (project_dir / path).resolve()


# -- the Dagster instance `mesh ui` runs on (dagster/ui/workspace.py writes its dagster.yaml) -------------


class DagsterStorageConfig(Strict):
    """Where `mesh ui`'s Dagster instance keeps runs, the event log and schedules: SQLite files in
    `.mesh/dagster/` (the default, one person), or a Postgres database a team shares."""

    type: Literal["sqlite", "postgres"] = "sqlite"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str | None = None
    user: str = "postgres"
    # The NAME of an environment variable holding the password: dagster.yaml refers to it
    # (`password: {env: NAME}`), so no secret is written to disk.
    password_env: EnvName | None = None
    # Asset events Dagster writes per statement (DAGSTER_EVENT_BATCH_SIZE); Postgres only, 0 = off.
    event_batch_size: int = Field(default=1000, ge=0)


class DagsterConfig(Strict):
    storage: DagsterStorageConfig = Field(default_factory=DagsterStorageConfig)
    # How often the re-stamp and plan status sensors look at the state store (their minimum interval):
    # how soon Dagster shows what was done elsewhere (a `mesh plan`, a promotion, a revert).
    sensor_interval_s: int = Field(default=30, ge=5, le=3600)


_DAGSTER_POSTGRES_ONLY = ("host", "port", "database", "user", "password_env", "event_batch_size")


def _dagster_refusals(config: DagsterConfig) -> list[tuple[Loc, str]]:
    storage, loc = config.storage, ("dagster", "storage")
    given = storage.model_fields_set
    if storage.type == "sqlite":
        for key in _DAGSTER_POSTGRES_ONLY:
            if key in given:
                return [(loc + (key,), "applies to `type: postgres` only (the sqlite instance lives in "
                                       ".mesh/dagster/)")]
    elif not storage.database:
        return [(loc + ("database",), "`type: postgres` needs the database holding Dagster's runs and events")]
    return []


ALL_RULES = "all"  # `rules: ALL`: every built-in and user rule


class LinterSettings(Strict):
    """`linter`: SQLMesh's linter, off unless `enabled`. Each list names rules (built-in or in the
    project's `linter/`) or is `ALL`; a rule may be in one list only (core/project/linter.py runs them)."""

    enabled: bool = False
    rules: list[str] = Field(default_factory=list)  # violations are errors: they block the plan
    warn_rules: list[str] = Field(default_factory=list)  # violations are printed as warnings
    ignored_rules: list[str] = Field(default_factory=list)  # never run (with `rules: ALL`, the exceptions)

    @field_validator("rules", "warn_rules", "ignored_rules", mode="before")
    @classmethod
    def _rule_names(cls, value: Any) -> Any:
        # `rules: ALL` (any case) or a list of names; rule names are case-insensitive, like SQLMesh's.
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)):
            return [item.strip().lower() if isinstance(item, str) else item for item in value]
        return value


class ProjectConfig(Strict):
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
    linter: LinterSettings = Field(default_factory=LinterSettings)
    # SQL (macros allowed) run at the start / end of every apply and run: core/project/environment_statements.py.
    before_all: list[str] = Field(default_factory=list)
    after_all: list[str] = Field(default_factory=list)
    # Environments whose plans wait for an approver (opt-in: the quickstart applies prod directly).
    protected_environments: dict[str, ProtectedEnvironment] = Field(default_factory=dict)
    notification_targets: list[NotificationTarget] = Field(default_factory=list)
    git: GitWatchConfig | None = None
    dagster: DagsterConfig = Field(default_factory=DagsterConfig)
    # The repository's name in a multi-repo project (core/project/repos.py): its models carry it,
    # and a plan that loads some of the repositories knows which models of an environment are
    # another repository's.
    project: str = ""
    # Where each setting was written (the file as shown, and a key's line): `where`.
    _source: tuple[str, Any] | None = PrivateAttr(default=None)
    # Gateways of another engine (name → its connection type), not in `gateways`: accepted as
    # SQLMesh accepts gateways it does not use, refused when selected (`gateway`). `_names`: every
    # gateway's name as written, in order (the first is the default without `default_gateway`).
    _other_engines: dict[str, str] = PrivateAttr(default_factory=dict)
    _names: list[str] | None = PrivateAttr(default=None)

    @field_validator("protected_environments", mode="before")
    @classmethod
    def _protected_names(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        try:
            return {normalize_environment(str(k)): ({} if v is None else v) for k, v in value.items()}
        except EnvironmentNameError as e:
            raise ValueError(str(e)) from None

    @field_validator("snapshot_ttl", "environment_ttl")
    @classmethod
    def _check_ttl(cls, value: str) -> str:
        parse_ttl(value)
        return value

    @field_validator("default_target_environment")
    @classmethod
    def _check_environment(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an environment, e.g. prod or dev")
        return value

    @property
    def gateway_names(self) -> list[str]:
        """Every gateway's name, in the order written, those of other engines included."""
        return list(self.gateways) if self._names is None else list(self._names)

    def selected_gateway(self, name: str | None = None) -> str | None:
        """The gateway `name` (`--gateway`) selects: it, else `default_gateway`, else the first."""
        return name or self.default_gateway or next(iter(self.gateway_names), None)

    def gateway(self, name: str | None = None) -> GatewayConfig:
        """The selected gateway's settings. One of another engine is refused here, at its line:
        models run on Spark."""
        name = self.selected_gateway(name)
        if name is None:
            return GatewayConfig()
        if name in self._other_engines:
            shown, line = self.where(("gateways", name, "connection", "type"))
            spark = [n for n in self.gateway_names if n in self.gateways]
            hint = (f"select a Spark gateway ({', '.join(spark)}) with --gateway or default_gateway" if spark
                    else "add a gateway with `connection: {type: spark}`")
            raise ConfigError(f"Gateway '{name}' connects to {self._other_engines[name]}: mesh_dagster runs models "
                              f"on Spark only; {hint}", shown, line)
        if name not in self.gateways:
            raise ConfigError(f"Unknown gateway '{name}'. Known: {', '.join(self.gateway_names)}")
        return self.gateways[name]

    def state_connection_for(self, gateway: str | None = None) -> StateConnectionConfig:
        return self.gateway(gateway).state_connection or self.state_connection or StateConnectionConfig()

    def protection(self, environment: str) -> ProtectedEnvironment | None:
        """The rules of a protected environment (None: plans apply directly)."""
        return self.protected_environments.get(environment)

    def statements(self, key: str) -> list[str]:
        """The `before_all` or `after_all` entries."""
        return list(self.before_all if key == "before_all" else self.after_all)

    def where(self, loc: Loc) -> tuple[str | None, int | None]:
        """The configuration file (as the user sees it) and the line of the setting at `loc` (a path
        of keys and list indexes, as in config.yaml), for messages about it found after loading."""
        if self._source is None:
            return None, None
        shown, locate = self._source
        return shown, locate(loc)

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


def read_config(project_dir: Path) -> ProjectConfig:
    """Read and validate config.yaml (or SQLMesh's Python `config.py`): every key is honoured, or
    refused with its file and line.

    All but `model_defaults.audits`, which reads like a model's audits: the project layer's
    `load_config` checks those too (`core/project/config_file.py`). A `config.py` imports SQLMesh's
    names: the project layer installs them (and the project root on the import path) first."""
    path = find_config_file(project_dir)
    for file in filter(None, [path, project_dir / CONFIG_PY]):
        if (refusal := outside_project(file, project_dir, file.name)) is not None:
            raise ConfigError(refusal)
    if (project_dir / CONFIG_PY).is_file():
        if path is not None:  # SQLMesh would overlay one on the other: never one passed over in silence
            raise ConfigError(f"Both {path.name} and config.py configure this project: mesh_dagster reads one "
                              f"configuration file, move the settings of one into the other and remove it",
                              CONFIG_PY, 1)
        raw, source = read_python_config(project_dir)
        return validate_config(raw, CONFIG_PY, source.line)
    if path is None:
        raise ConfigError(f"No config.yaml found in {project_dir}. Run `mesh init spark` to create a project.")
    shown = path.name  # errors name the file as the user sees it in the project
    text = _expand_env_vars(read_text(path, shown, ConfigError))
    try:
        raw = load_yaml(text) or {}
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise ConfigError(
            f"Invalid YAML: {getattr(e, 'problem', e)}", shown, line + 1 if line is not None else None
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError("The configuration must be a mapping", shown, 1)
    return validate_config(raw, shown, lambda loc: line_of(text, loc))


def validate_config(raw: dict[str, Any], shown: str, locate: Callable[[Loc], int | None]) -> ProjectConfig:
    """The configuration `raw` (config.yaml's mapping, or what config.py's object stands for),
    validated; an error names `shown` and the line `locate` gives for the key's path."""
    raw, other_engines, names = _without_other_engines(raw)
    try:
        config = ProjectConfig.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfigError(_describe(err), shown, locate(err["loc"])) from None
    if other_engines:
        config._other_engines, config._names = other_engines, names
    for loc, message in _refusals(config):
        raise ConfigError(f"{'.'.join(map(str, loc))}: {message}", shown, locate(loc))
    config._source = (shown, locate)
    return config


def _without_other_engines(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """`raw` without its gateways whose connection is another engine's (`type: duckdb`, ...), those
    gateways' engines by name, and every gateway's name in order. SQLMesh connects to the selected
    gateway only, so a project may keep a DuckDB gateway for local work beside its Spark one: it is
    refused only when selected."""
    gateways = raw.get("gateways")
    if not isinstance(gateways, dict):
        return raw, {}, []
    other: dict[str, str] = {}
    for name, gateway in gateways.items():
        conn = gateway.get("connection") if isinstance(gateway, dict) else None
        kind = conn.get("type") if isinstance(conn, dict) else None
        if isinstance(kind, str) and kind.strip().lower() != "spark":
            other[str(name)] = kind
    if not other:
        return raw, {}, []
    kept = {n: g for n, g in gateways.items() if str(n) not in other}
    return {**raw, "gateways": kept}, other, [str(n) for n in gateways]


def _describe(err: Mapping[str, Any]) -> str:
    """pydantic's error as `dotted.key: what is wrong`."""
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown setting"
    if err["type"] == "literal_error" and tuple(err["loc"][-2:]) == ("connection", "type"):
        return f"{loc}: connection type '{err.get('input')}' is not supported: mesh_dagster runs models on Spark " \
               f"(type: spark)"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}"




def _linter_refusals(linter: LinterSettings) -> list[tuple[Loc, str]]:
    """A rule in two of `rules`, `warn_rules` and `ignored_rules` (SQLMesh refuses it too: they are
    mutually exclusive), at its second list. Unknown rule names are the project's to refuse: only it
    knows the rules of `linter/` (core/project/linter.py)."""
    seen: dict[str, str] = {}
    for key in ("rules", "warn_rules", "ignored_rules"):
        for index, rule in enumerate(getattr(linter, key)):
            first = seen.setdefault(rule, key)
            if first != key:
                return [(("linter", key, index), f"'{rule}' is also in linter.{first}: a rule goes in one of "
                                                 f"rules, warn_rules and ignored_rules")]
    return []


def _refusals(config: ProjectConfig) -> list[tuple[Loc, str]]:
    """Settings that parse but that mesh_dagster cannot honour (the first one is reported)."""
    out: list[tuple[Loc, str]] = []
    out += _linter_refusals(config.linter)
    if config.default_gateway is not None and config.default_gateway not in config.gateway_names:
        out.append((("default_gateway",), f"unknown gateway '{config.default_gateway}'. "
                                          f"Known: {', '.join(config.gateway_names) or 'none'}"))
    out += _variable_clashes(config.variables, ("variables",))
    out += _statement_refusals(config)
    out += _dagster_refusals(config.dagster)
    out += _git_refusals(config)
    if config.state_connection is not None:
        out += state_connection_refusals(config.state_connection, ("state_connection",))
    for name, gateway in config.gateways.items():
        out += _variable_clashes(gateway.variables, ("gateways", name, "variables"))
        out += connection_refusals(gateway.connection, ("gateways", name, "connection"))
        out += [(("gateways", name, "connection", "config", key), refusal) for key in gateway.connection.config
                if (refusal := reserved_refusal(key, "in a connection's config")) is not None]
        if gateway.state_connection is not None:
            out += state_connection_refusals(gateway.state_connection, ("gateways", name, "state_connection"))
    return out


def _git_refusals(config: ProjectConfig) -> list[tuple[Loc, str]]:
    """A protected branch deploys prod through a reviewed plan only: prod must then be a protected
    environment (its approvers decide), or a push would be applied unreviewed."""
    git = config.git
    if git is None or not git.protected or config.protection(PROD) is not None:
        return []
    loc: Loc = ("git", "protected") if "protected" in git.model_fields_set else ("git",)
    branches = ", ".join(git.protected)
    return [(loc, f"pushes to {branches} plan prod for review, but protected_environments does not list prod, so "
                  f"they would be applied unreviewed: add `protected_environments: {{prod: {{approvers: [...]}}}}`, "
                  f"or set `git.protected: []` to deploy those pushes without review")]


def _statement_refusals(config: ProjectConfig) -> list[tuple[Loc, str]]:
    """`before_all` / `after_all` entries that cannot run: empty, or SQL that does not parse."""
    out: list[tuple[Loc, str]] = []
    for key in ("before_all", "after_all"):
        for index, text in enumerate(config.statements(key)):
            problem = check_statement(text, config.model_defaults.dialect)
            if problem is not None:
                out.append(((key, index), f"{problem}"))
    return out


def _variable_clashes(variables: dict[str, Any], loc: Loc) -> list[tuple[Loc, str]]:
    """Variable names are case-insensitive: `A` and `a` would silently overwrite each other."""
    seen: dict[str, str] = {}
    for key in variables:
        other = seen.setdefault(str(key).lower(), str(key))
        if other != key:
            return [(loc + (key,), f"clashes with '{other}' (variable names are case-insensitive)")]
    return []


def line_of(text: str, loc: Loc) -> int | None:
    """1-based line of the YAML key at `loc` (a path of keys and list indexes), or of its closest
    enclosing key that exists."""
    try:
        node = compose_yaml(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
