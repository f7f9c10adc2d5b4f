"""The Context API: what both front doors (the `mesh` CLI and Dagster) call.

A thin facade: Context builds one project's parts lazily (the project, `config.yaml`, the state
store, Spark) and hands them to the services of execution/ that do the work (below) and to the
plain functions of the others. Building a plan loads the project and reads the state store but
never starts Spark; only commands that touch data create a session. Commands that only need the
state store or Spark's connection read `config.yaml` alone, so a broken model file does not stop
`mesh environments`, `invalidate`, `migrate` or `fetchdf`.

Its services are attributes, and callers use them: `ctx.plans` (execution/plans/planning.py: plans,
restatements, categories, gaps), `ctx.reviews` (execution/plans/reviews.py: recording, review,
apply, promotion, git pushes; `ctx.reviews.records` the records' life), `ctx.runs`
(execution/intervals/runs.py: `mesh run`, Dagster's materializations), `ctx.inspection`
(execution/inspection.py: rendering, evaluating, auditing, diffing data) and `ctx.upkeep`
(execution/apply/upkeep.py: migrate, invalidate, the janitor). Context's own methods are those that
add something: a lazily built part, the shared Spark server, the lint gate, a choice of front door.
Only planning is imported with this module: the other services, and the modules that only some
methods use, are imported on first use, so `mesh plan` loads nothing of applying and running
(tests/unit/test_command_imports.py).

The front doors (cli/, dagster/) go through Context only, so it also hands out the types of its
API: the imports marked `noqa: F401` below, and those of `_LAZY`, imported when first taken.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.connections import MESH_DIR, SparkConnectionConfig
from mesh_dagster.core.config.names import normalize_environment
from mesh_dagster.core.config.spark_settings import spark_settings_refusal, with_spark_settings
from mesh_dagster.core.errors import ConfigError, MeshError, PlanError
from mesh_dagster.core.models.audit_sample import AuditSample  # noqa: F401 - for dagster/mapping/outcomes.py
from mesh_dagster.core.plan.backfills import interval_count  # noqa: F401 - for dagster/mapping/graph.py
from mesh_dagster.core.plan.explanation import PlanExplanation  # noqa: F401 - for the CLI
from mesh_dagster.core.plan.identity import current_user
from mesh_dagster.core.plan.lint_outcome import LintOutcome
from mesh_dagster.core.plan.manual_categories import CHOICES as CATEGORY_CHOICES  # noqa: F401 - for the CLI
from mesh_dagster.core.plan.options import FROM_COMMIT, PlanOptions  # noqa: F401 - for the front doors
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.plan.review import PlanRecord
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.lineage import ColumnRef, Lineage, column_upstream, model_lineage
from mesh_dagster.core.project.linter import LinterErrors, LintReport, lint, refuse_errors  # noqa: F401 - for the front doors
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory  # noqa: F401 - for dagster/mapping/model_asset.py

# The warm server's record: no PySpark, so `mesh spark status` stays quick (its process: `_server_process`).
from mesh_dagster.engine.server_record import INFO_FILE, ServerInfo, idle_left_s
from mesh_dagster.execution.events import ApplyListener, LogLines  # noqa: F401
from mesh_dagster.execution.plans.git_worker import (  # noqa: F401 - cli/git_worker.py, dagster/ui/pushed_python.py
    STAND_IN_URL,
    GitPlanRequest,
    WorkerVariables,
    open_channel,
    worker_variables,
)
from mesh_dagster.execution.plans.planning import Planning, select
from mesh_dagster.state.store import StateStore

if TYPE_CHECKING:  # imported on first use (`_LAZY`, the services below); here for type checkers
    from mesh_dagster.execution.apply.promote import PromotionRefused  # noqa: F401 - for dagster/jobs/promotion.py
    from mesh_dagster.execution.apply.upkeep import Upkeep
    from mesh_dagster.execution.evaluate.verdicts import HeldVerdicts, Holding, VerdictKey  # noqa: F401
    from mesh_dagster.execution.inspection import Inspection
    from mesh_dagster.execution.intervals.materialize import ModelMaterialization, Outcome  # noqa: F401
    from mesh_dagster.execution.intervals.physical_check import MissingTable
    from mesh_dagster.execution.intervals.runs import IntervalRuns
    from mesh_dagster.execution.intervals.statement_runs import StatementRun  # noqa: F401 - for dagster/assets.py
    from mesh_dagster.execution.notify import Notifier
    from mesh_dagster.execution.plans.reviews import Reviews

# Names of the API that only applying, running and judging data use (Dagster's steps and jobs):
# taken from here like the others, but imported when first taken (see the module docstring).
_LAZY = {
    "PromotionRefused": "mesh_dagster.execution.apply.promote",
    "HeldVerdicts": "mesh_dagster.execution.evaluate.verdicts",
    "Holding": "mesh_dagster.execution.evaluate.verdicts",
    "VerdictKey": "mesh_dagster.execution.evaluate.verdicts",
    "ModelMaterialization": "mesh_dagster.execution.intervals.materialize",
    "Outcome": "mesh_dagster.execution.intervals.materialize",
    "MissingTable": "mesh_dagster.execution.intervals.physical_check",
    "StatementRun": "mesh_dagster.execution.intervals.statement_runs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


logger = logging.getLogger("mesh_dagster")


def _log_warning(message: str) -> None:
    logger.warning(message)


def _spark() -> tuple[ModuleType, ModuleType]:
    """engine/'s Spark session and shared-server modules, imported on first use. engine/ loads
    pyspark when imported, and `mesh --help`, `mesh plan` and Dagster's code server must never pay
    for it (tests/unit/test_layers.py checks planning)."""
    from mesh_dagster.engine import adapter, connect_server

    return adapter, connect_server


def _server_process() -> ModuleType:
    """engine/'s module asking the warm server's process (and its clients), imported on first use:
    it loads psutil, which a project without a running server never needs."""
    from mesh_dagster.engine import server_process

    return server_process


class Context:
    """The API of one project: its parts, each built on first use, its services, and the project's
    shared Spark server."""

    def __init__(self, path: str | Path = ".", gateway: str | None = None, *, state_url: str | None = None,
                 engine: Any = None, on_warning: Callable[[str], None] | None = None, home: str | Path | None = None,
                 spark_config: Mapping[str, Any] | None = None, spark_config_source: str = "spark_config",
                 config: ProjectConfig | None = None, repos: Sequence[str | Path] = ()):
        self.path = Path(path).resolve()
        # The other repositories of a multi-repo project (core/project/repos.py), loaded with `path`'s.
        self.repos = [Path(repo).resolve() for repo in repos]
        # Where `.mesh/` lives (state file, warehouse, metastore, shared Spark server): the project's
        # own folder, except for a commit's files planned on behalf of a watched project.
        self.home = Path(home).resolve() if home is not None else self.path
        # Where the project's warnings go (e.g. tables read that nobody declared): the CLI prints
        # them; by default they are logged, which is what Dagster's code server shows.
        self._on_warning = on_warning or _log_warning
        self.gateway = gateway
        self._state_url = state_url
        self._project: Project | None = None
        # Settings given instead of `config.yaml`'s: the rules a git worker is handed (execution/plans/git_worker.py).
        self._config: ProjectConfig | None = config
        self._state: StateStore | None = None
        self._notifier: Notifier | None = None
        self._engine = engine
        # Spark settings a front door was given (Dagster's PySparkResource), merged with the gateway's.
        self._spark_config = dict(spark_config or {})
        self._spark_config_source = spark_config_source
        # What the last lint gate did (`lint_gate`, `skip_lint_gate`): the plans made next carry it
        # into their review (execution/plans/planning.py); None: no gate ran.
        self.linted: LintOutcome | None = None
        self.plans = Planning(self)

    # -- the services that apply, run and look at data: built, and their modules imported, on first
    # use, so that a command that only plans (`mesh plan --explain`) loads none of their machinery.
    @cached_property
    def reviews(self) -> Reviews:
        from mesh_dagster.execution.plans.reviews import Reviews  # the apply's machinery, on first use

        return Reviews(self, self.plans, self._files)

    @cached_property
    def inspection(self) -> Inspection:
        from mesh_dagster.execution.inspection import Inspection  # the evaluator's machinery, on first use

        return Inspection(self, self.plans)

    @cached_property
    def runs(self) -> IntervalRuns:
        from mesh_dagster.execution.intervals.runs import IntervalRuns  # the scheduler's machinery, on first use

        return IntervalRuns(self)

    @cached_property
    def upkeep(self) -> Upkeep:
        from mesh_dagster.execution.apply.upkeep import Upkeep  # the janitor's machinery, on first use

        return Upkeep(self)

    @property
    def project(self) -> Project:
        if self._project is None:
            self._project = load_project(self.path, self.gateway, repos=self.repos)
            for warning in self._project.warnings:
                self._on_warning(warning)
        return self._project

    def reload(self) -> Project:
        self._project = None
        self._config = None
        return self.project

    @property
    def config(self) -> ProjectConfig:
        """`config.yaml` alone (the loaded project's, once there is one): what the state store
        and Spark need, without reading a single model."""
        if self._project is not None:
            return self._project.config
        if self._config is None:
            if not self.path.is_dir():
                raise ConfigError(f"Project directory not found: {self.path}")
            config = load_config(self.path)
            config.gateway(self.gateway)  # validates the gateway name
            self._config = config
        return self._config

    @property
    def state_url(self) -> str:
        return self._state_url or self.config.state_connection_for(self.gateway).to_url(self.home)

    @property
    def state(self) -> StateStore:
        if self._state is None:
            self._state = StateStore(self.state_url)
        return self._state

    @property
    def engine(self):
        if self._engine is None:
            adapter, connect_server = _spark()
            # Embedded Spark, or a client of the project's shared Connect server when it runs.
            self._engine = adapter.SparkEngine(connect_server.project_session(self.connection, self._mesh_dir),
                                              files_here=self.connection.is_local)
        return self._engine

    @property
    def connection(self) -> SparkConnectionConfig:
        """The gateway's Spark connection, with the settings given to this Context merged in; a
        setting both give differently, or one a running shared server cannot apply, is refused."""
        conn = self.config.gateway(self.gateway).connection
        if not self._spark_config:
            return conn
        refusal = spark_settings_refusal(conn, self._spark_config, self._spark_config_source)
        if refusal is not None:
            loc, message = refusal
            if loc is None:  # a setting no connection may have: config.yaml is not where it is
                raise ConfigError(message)
            name = self.gateway or self.config.default_gateway or next(iter(self.config.gateways), None)
            path, line = self.config.where(("gateways", name, "connection", *loc) if name else ())
            raise ConfigError(message, path, line)
        return with_spark_settings(conn, self._spark_config)

    def close(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None

    @property
    def notifier(self) -> Notifier:
        """Where the project's events go (`notification_targets`): one for its plan records and its runs."""
        if self._notifier is None:
            from mesh_dagster.execution.notify import Notifier  # urllib's HTTP client: no plan needs it

            self._notifier = Notifier(self.config.notification_targets, self.path.name)
        return self._notifier

    @property
    def user(self) -> str:
        """Who acts: `MESH_USER`, else the project repository's git user e-mail, else the OS user."""
        return current_user(self.path)

    # -- the project's warm Spark server (Spark Connect) ---------------------------------------
    # Only `start` reads `config.yaml` (for the connection); `status` and `stop` read the
    # server's record alone, so they work while the configuration is broken, and without PySpark.
    @property
    def _mesh_dir(self) -> Path:
        return self.home / MESH_DIR

    def spark_server(self) -> ServerInfo | None:
        """The project's warm server if it is running and answering; without a record of one, its
        process is not asked (nor psutil loaded: `mesh plan` asks this of a local project)."""
        if not self.spark_server_record.exists():
            return None
        return _server_process().server_status(self._mesh_dir)

    @staticmethod
    def spark_server_use(info: ServerInfo) -> tuple[int, float | None]:
        """(clients connected to the server now, seconds before it stops itself: None while a
        client is connected)."""
        connected = _server_process().clients(info.pid, info.port)
        return connected, idle_left_s(info, in_use=connected > 0)

    def start_spark_early(self) -> None:
        """For a command that will need Spark: start the project's warm server in the background now,
        if it is the project's way to Spark and not running, so that loading and planning overlap the
        JVM's start. Nothing happens when the configuration cannot be read (the command says why)."""
        if self._engine is not None:
            return
        try:
            conn = self.connection
        except MeshError:
            return
        if conn.has_server:
            _spark()[1].start_early(conn, self._mesh_dir)

    def start_spark_server(self, port: int | None = None, timeout_s: float = 120) -> ServerInfo:
        """The project's warm server, started first if there is none (restarted if stale)."""
        return _spark()[1].start_server(self.connection, self._mesh_dir, port=port,
                                        timeout_s=timeout_s)

    def stop_spark_server(self) -> bool:
        """Stop the warm server; False when none was running."""
        return _spark()[1].stop_server(self._mesh_dir)

    @property
    def spark_server_record(self) -> Path:
        """The file recording the running server (its token included, readable by its owner only)."""
        return self._mesh_dir / INFO_FILE

    @property
    def spark_at_hand(self) -> bool:
        """Whether asking Spark starts no JVM: this Context holds its session already (the plan's
        unit tests ran on it), the gateway is a Spark Connect server of its own (`remote:`), or the
        project's shared server answers."""
        if self._engine is not None:
            return True
        conn = self.connection
        return conn.remote is not None or (conn.is_local and self.spark_server() is not None)

    @staticmethod
    def prefer_shared_spark() -> None:
        """Use the project's warm Spark server in this process and its children, even where the
        project opted out of it (`server.enabled: false`, `MESH_SPARK_SERVER=0`): Dagster's webserver,
        daemon and run workers run at once, and only the server lets them reach one Derby metastore."""
        os.environ[_spark()[1].SERVER_ENV] = "1"

    def missing_tables(self, plan: Plan) -> list[MissingTable]:
        """The physical tables of `plan`'s snapshots that are gone while the state store records
        their history: applying the plan rebuilds them (execution/intervals/physical_check.py). Spark's
        catalog is asked only when it is at hand (`spark_at_hand`: a plan never starts Spark for
        it; the apply checks anyway) and some snapshot has recorded intervals."""
        if not self.spark_at_hand:
            return []
        from mesh_dagster.execution.intervals.physical_check import missing_tables  # Spark at hand: a plan seldom is

        return missing_tables(self.state, lambda: self.engine, plan.snapshots.values())

    def lint_gate(self, skip: str | None = None) -> LintReport:
        """The linter run a front door makes before it plans (`mesh plan`; Dagster's plan, promote
        and restate jobs; a git push's plan runs it on the commit's files, in plans/reviews.py): the
        report, whose warnings the caller shows; an error of `linter.rules` raises LinterErrors
        (`report` attached), so nothing is planned. `skip`: how the caller skips it, if it can. The
        plans made next say what it did in their review (`linted`)."""
        report = refuse_errors(lint(self.project), skip)
        self.linted = LintOutcome.of(report)
        return report

    def skip_lint_gate(self, how: str) -> None:
        """The caller skips the lint gate (`how`: its flag): the plans made next say so, and who."""
        self.linted = LintOutcome.skipped(how, self.user)

    def plan_records(self, environment: str | None = None, statuses: list[str] | None = None, limit: int = 50):
        return self.state.plans.list_plan_records(normalize_environment(environment) if environment else None,
                                            statuses, limit)

    def decide(self, plan_id: str, action: str, note: str | None = None) -> PlanRecord:
        """approve, reject or cancel a recorded plan as the current user."""
        return self.reviews.records.decide(plan_id, action, self.user, note)

    @contextmanager
    def _files(self, path: Path) -> Iterator[Context]:
        """A Context over other files of this project (a pushed commit's), sharing this one's
        state store, warehouse and Spark."""
        if self.repos:
            raise PlanError("Plans of pushed commits are for projects of one repository: this project loads "
                            f"{len(self.repos) + 1} (-p); plan it from its folders (mesh -p ... plan)")
        other = Context(path, self.gateway, state_url=self.state_url, home=self.home, engine=self._engine,
                        on_warning=self._on_warning)
        try:
            yield other
        finally:
            other.close()

    def verdicts(self, keys: list[tuple[str, str]]) -> dict[VerdictKey, HeldVerdicts]:
        """The audit verdicts that hold on these `(model, version)`s: {(model, version, audit digest):
        HeldVerdicts} (execution/evaluate/verdicts.py)."""
        from mesh_dagster.execution.evaluate.verdicts import holding  # Dagster's: the evaluator's module

        return holding(self.state.verdicts.history(keys))

    def audit_digests(self, plan: Plan) -> dict[str, list[str]]:
        """Each model's audits as the digests of their definitions, in the model's order."""
        from mesh_dagster.execution.evaluate.verdicts import audit_digest, snapshot_audits  # Dagster's, as above

        return {name: [audit_digest(ref, snapshot_audits(snap, self.project.audits)) for ref in snap.model.audits]
                for name, snap in plan.snapshots.items()}

    def deployed_project(self, environment: str) -> Path | None:
        """The project files of the commit a git push deployed to `environment` (what it serves),
        exported once under `.mesh/dagster/deployed/`; None without a `git:` section or when the
        environment was planned from this working tree."""
        if self.config.git is None:
            return None
        from mesh_dagster.execution.plans.deployed import deployed_files  # Dagster's: git's exports

        return deployed_files(self.state, normalize_environment(environment), self.config.git, self.path, self.home)

    def column_lineage(self, model: str) -> Lineage | None:
        """Each output column of `model` -> the upstream columns (model, column) it is computed from;
        a column left out has an unknown upstream, None: nothing known (core/project/lineage.py)."""
        return model_lineage(self.project, self.project.model_name(model))

    def column_upstream(self, model: str, column: str) -> tuple[ColumnRef, ...] | None:
        """One column's upstream columns (None: unknown); an error names a column `model` lacks."""
        return column_upstream(self.project, self.project.model_name(model), column)

    def select(self, selectors: Sequence[str], flag: str) -> set[str]:
        """The project's models `selectors` choose (core/plan/selectors.py); errors name `flag`."""
        return select(self.project, selectors, flag) if selectors else set()

    def lint(self, models: Sequence[str] | None = None) -> LintReport:
        """Run the project's linter (`linter:` in the config) over its models, or those `models`
        selects; `enabled: false` (the default) runs nothing. Never starts Spark."""
        names = sorted(self.select(models, "--model")) if models else None
        return lint(self.project, names)

    def test(self, names: list[str] | None = None, pattern: str | None = None):
        # Deliberately lazy, like Spark (`_spark`): the YAML unit tests' models cost every other
        # command ~0.1 s, and planning never needs them (`mesh plan` imports them only to run tests).
        from mesh_dagster.testing.runner import run_tests

        return run_tests(self.project, lambda: self.engine, names=names, pattern=pattern)
