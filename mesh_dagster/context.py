"""The Context API: what both front doors (the `mesh` CLI and Dagster) call.

Everything is lazy: building a plan loads the project and reads the state store but never starts
Spark; only commands that touch data create a session. Commands that only need the state store or
Spark's connection read `config.yaml` alone, so a broken model file does not stop
`mesh environments`, `invalidate`, `migrate` or `fetchdf`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.connections import MESH_DIR
from mesh_dagster.core.config.names import PROD, normalize_environment, view_name
from mesh_dagster.core.errors import ConfigError, MeshError, PlanError
from mesh_dagster.core.plan.manual_categories import CHOICES as CATEGORY_CHOICES  # noqa: F401 - for the CLI
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.snapshots.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot
from mesh_dagster.core.time.dates import now_ms, time_range, to_end_ms, to_ms
from mesh_dagster.core.time.intervals import Interval

# The types of Context's own API, for the front doors (cli/, dagster/) that go through Context only.
from mesh_dagster.execution.events import ApplyListener, LogLines  # noqa: F401
from mesh_dagster.execution.materialize import ModelMaterialization, Outcome  # noqa: F401
from mesh_dagster.execution.promote import PromotionRefused  # noqa: F401

if TYPE_CHECKING:
    from mesh_dagster.core.project.external_models import ExternalModelsFile
    from mesh_dagster.core.time.cron import IntervalUnit
    from mesh_dagster.engine.connect_server import ServerInfo
    from mesh_dagster.state.store import StateStore

logger = logging.getLogger("mesh_dagster")


def _log_warning(message: str) -> None:
    logger.warning(message)


@dataclass
class TableDiff:
    source: str
    target: str
    on: list[str]
    source_count: int
    target_count: int
    source_only: int
    target_only: int
    joined: int
    column_mismatches: dict[str, int] = field(default_factory=dict)
    schema_added: list[str] = field(default_factory=list)
    schema_removed: list[str] = field(default_factory=list)
    sample: Any = None


@dataclass
class TableDiffs:
    """What `table_diff -m` compared, and the selected models it did not (model -> why)."""

    diffs: list[TableDiff] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _EnvironmentViews:
    """An environment record, looked up by model."""

    name: str
    snapshots: dict[str, EnvironmentSnapshot]
    promoted: set[str]

    @classmethod
    def of(cls, record: Environment) -> _EnvironmentViews:
        return cls(record.name, record.snapshot_by_name(), set(record.promoted))


def _not_diffable(name: str, envs: list[_EnvironmentViews], keys: list[str]) -> str | None:
    """Why a model cannot or need not be diffed between two environments, if so."""
    tables = []
    for env in envs:
        ref = env.snapshots.get(name)
        if ref is None:
            return f"not in '{env.name}'"
        if ref.table_name is None:
            return f"{ref.kind}: it has no table"
        if name not in env.promoted:
            return f"no view in '{env.name}'"
        tables.append(ref.table_name)
    if tables[0] == tables[1]:
        return "both environments read the same table"
    if not keys:
        return "no grain: pass the join columns with --on"
    return None


@dataclass(frozen=True)
class PlanExplanation:
    """What applying a plan would do to the two layers (what `plan --explain` shows)."""

    creating: list[Snapshot]  # physical tables and views the apply may have to create
    promote: list[Snapshot]  # views of the environment to create or replace
    demote: list[str]  # models whose views go away


# The plan option that says a recorded plan was made from a pushed commit (its sha).
FROM_COMMIT = "from_commit"  # execution/deployed.py reads it back


def recordable_options(options: dict[str, Any]) -> dict[str, Any]:
    """`build_plan`'s keywords as JSON: what rebuilds the plan when its record is applied."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "choices":
            out[key] = {name: category.name for name, category in (value or {}).items()}
        elif isinstance(value, (set, frozenset, tuple, list)):
            out[key] = sorted(value) if isinstance(value, (set, frozenset)) else list(value)
        elif value is None or isinstance(value, (str, int, float, bool)):
            out[key] = value
        else:
            raise TypeError(f"plan option {key}={value!r} cannot be recorded")
    return out


def _capture_restated(plan: Plan, local: dict[str, Snapshot]) -> None:
    """A restatement evaluates stored snapshots from what they captured. One stored before captures
    existed is captured from the project only while the project still defines it exactly (same
    fingerprint); otherwise restating it would run code nobody planned, so it is refused."""
    for name in plan.backfills:
        stored, mine = plan.snapshots[name], local.get(name)
        if stored.capture is not None:
            continue
        if mine is None or mine.identifier != stored.identifier or mine.capture is None:
            raise PlanError(f"Cannot restate {name}: '{plan.environment}' holds it as planned by an earlier "
                            f"mesh_dagster, which did not capture its macros, variables and seed content, and the "
                            f"project defines it differently now. Run `mesh plan {plan.environment}` first (it "
                            "captures them), then restate.")
        plan.snapshots[name] = stored.model_copy(update={"capture": mine.capture})
        plan.recaptured.append(plan.snapshots[name])


class Context:
    def __init__(self, path: str | Path = ".", gateway: str | None = None, *, state_url: str | None = None,
                 engine: Any = None, on_warning: Callable[[str], None] | None = None, home: str | Path | None = None):
        self.path = Path(path).resolve()
        # Where `.mesh/` lives (state file, warehouse, metastore, shared Spark server): the project's
        # own folder, except for a commit's files planned on behalf of a watched project.
        self.home = Path(home).resolve() if home is not None else self.path
        # Where the project's warnings go (e.g. tables read that nobody declared): the CLI prints
        # them; by default they are logged, which is what Dagster's code server shows.
        self._on_warning = on_warning or _log_warning
        self.gateway = gateway
        self._state_url = state_url
        self._project: Project | None = None
        self._config: ProjectConfig | None = None
        self._state: StateStore | None = None
        self._engine = engine
        self._reviews: Any = None

    # -- lazily built parts ------------------------------------------------------------------
    @property
    def project(self) -> Project:
        if self._project is None:
            self._project = load_project(self.path, self.gateway)
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
            from mesh_dagster.state.store import StateStore

            self._state = StateStore(self.state_url)
        return self._state

    @property
    def engine(self):
        if self._engine is None:
            from mesh_dagster.engine.adapter import SparkEngine
            from mesh_dagster.engine.connect_server import project_session

            # Embedded Spark, or a client of the project's shared Connect server when it runs.
            conn = self.config.gateway(self.gateway).connection
            self._engine = SparkEngine(project_session(conn, self._mesh_dir))
        return self._engine

    def close(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None

    # -- plans -------------------------------------------------------------------------------
    def plan(self, environment: str = PROD, **options) -> Plan:
        plan = build_plan(self.project, self.state, environment, **options)
        plan.options = recordable_options(options)
        return plan

    def restate(self, environment: str, models: list[str] | tuple[str, ...], *, start: str | None = None,
                end: str | None = None, execution_time: str | int | None = None) -> Plan:
        """A plan recomputing `models` (and everything below them) over `[start, end]` in the
        environment, as the environment has them: local changes are not part of it."""
        from mesh_dagster.core.plan.restatement import build_restatement
        from mesh_dagster.core.time.dates import now_ms, to_end_ms, to_ms

        execution_ms = now_ms() if execution_time is None else to_ms(execution_time)
        plan = build_restatement(self.state, environment, list(models), start_ms=to_ms(start) if start else None,
                                 end_ms=to_end_ms(end) if end else None, execution_ms=execution_ms)
        plan.options = {"restate": list(models), "start": start, "end": end}
        recorded = {s.name: s.identifier for s in plan.snapshots.values()}
        local = self.local_snapshots()
        _capture_restated(plan, local)
        edited = sorted(n for n, s in local.items() if recorded.get(n, s.identifier) != s.identifier)
        if edited:
            plan.warnings.append(f"Local changes to {', '.join(edited[:5])}{'...' if len(edited) > 5 else ''} are not "
                                 f"part of this restatement: it recomputes what '{plan.environment}' has")
        return plan

    def parse_categories(self, texts: list[str] | tuple[str, ...]) -> dict[str, ChangeCategory]:
        """`--categorize MODEL=CATEGORY` values, by model name."""
        from mesh_dagster.core.plan.manual_categories import parse_choice

        return {self.model_name(name): category for name, category in map(parse_choice, texts)}

    def categories_to_choose(self, plan: Plan, ask_all: bool = False) -> list[str]:
        """Directly modified models whose category the user chooses (see core/plan/manual_categories.py)."""
        from mesh_dagster.core.plan.manual_categories import needs_choice

        return needs_choice(plan, self.project.config.plan.auto_categorize_changes, ask_all=ask_all)

    def apply(self, plan: Plan, listener: ApplyListener | None = None) -> None:
        """Apply a plan made just now, recording it (and its outcome) if it is not yet. A protected
        environment's plans are applied only as approved records (`apply_recorded`)."""
        from mesh_dagster.execution.apply import apply_plan

        self.reviews.refuse_unreviewed(plan)
        record = self.state.get_plan_record(plan.plan_id) or self.record(plan)
        self.reviews.run(record, plan, self.user, lambda p: apply_plan(p, self.project, self.state, self.engine,
                                                                         listener))

    # -- plan records (execution/reviews.py) -------------------------------------------------
    @property
    def user(self) -> str:
        """Who acts: `MESH_USER`, else the project repository's git user e-mail, else the OS user."""
        from mesh_dagster.core.plan.identity import current_user

        return current_user(self.path)

    @property
    def reviews(self):
        from mesh_dagster.execution.notify import Notifier
        from mesh_dagster.execution.reviews import PlanReviews

        if self._reviews is None:
            self._reviews = PlanReviews(self.state, self.config, Notifier(self.config.notification_targets,
                                                                          self.path.name))
        return self._reviews

    def record(self, plan: Plan):
        """Store `plan` for review (pending), with its author and the project's git commit."""
        from mesh_dagster.core.plan.identity import git_branch, git_commit

        return self.reviews.record(plan, author=self.user, git_commit=git_commit(self.path),
                                   git_branch=git_branch(self.path))

    def plan_records(self, environment: str | None = None, statuses: list[str] | None = None, limit: int = 50):
        return self.state.list_plan_records(normalize_environment(environment) if environment else None,
                                            statuses, limit)

    def plan_record(self, plan_id: str):
        return self.reviews.find(plan_id)

    def decide(self, plan_id: str, action: str, note: str | None = None):
        """approve, reject or cancel a recorded plan as the current user."""
        return self.reviews.decide(plan_id, action, self.user, note)

    def apply_recorded(self, plan_id: str, listener: ApplyListener | None = None):
        """Apply a recorded plan: approved (protected environments), and still the plan reviewed.
        A plan made from a pushed commit is rebuilt and applied from that commit's files."""
        from mesh_dagster.execution.apply import apply_plan

        record = self.reviews.find(plan_id)
        sha = record.summary.options.get(FROM_COMMIT)
        if sha is None:
            return self.reviews.apply(plan_id, self.user, self._rebuild,
                                      lambda p: apply_plan(p, self.project, self.state, self.engine, listener))
        head = self.git_heads().get(record.git_branch or "")
        # A newer push is what the branch holds now: a plan of an older commit is outdated.
        moved = None if head == sha else f"branch {record.git_branch} moved on to {head[:8] if head else 'nothing'}"
        with self._commit_context(sha) as commit:
            return self.reviews.apply(plan_id, self.user, commit._rebuild,
                                      lambda p: apply_plan(p, commit.project, commit.state, commit.engine, listener),
                                      outdated=moved)

    # -- git-driven plans (dagster/git_sensor.py) -------------------------------------------
    def git_heads(self) -> dict[str, str]:
        """{branch: sha} of the watched repository's branches that `git.branches` selects."""
        from fnmatch import fnmatchcase

        from mesh_dagster.execution.git_repo import branch_heads

        watch = self._git_watch()
        heads = branch_heads(watch.repo_path(self.path), watch.tick_timeout_s)
        return {b: sha for b, sha in heads.items() if any(fnmatchcase(b, p) for p in watch.branches)}

    def plan_git_commit(self, branch: str, sha: str, listener: ApplyListener | None = None):
        """Plan commit `sha` of `branch` from its own files (never this project's working tree):
        a protected branch records a pending plan for prod; any other branch's plan is applied to
        the environment named after it. A commit whose project does not load is a failed record."""
        from mesh_dagster.core.plan.review import environment_for_branch
        from mesh_dagster.execution.apply import apply_plan
        from mesh_dagster.execution.git_repo import commit_author

        watch = self._git_watch()
        environment = environment_for_branch(branch, watch.protected, list(self.config.protected_environments))
        author = commit_author(watch.repo_path(self.path), sha, watch.tick_timeout_s)
        # The protection rules, approvers and notification targets are this project's, never the
        # pushed commit's: a push cannot lift the protection it is subject to.
        with self._commit_context(sha) as commit:
            try:
                plan = commit.plan(environment, allow_empty=True)
            except MeshError as e:
                return self.reviews.record_failure(environment, f"commit {sha[:8]}: {e}", author=author,
                                                   git_commit=sha, git_branch=branch)
            plan.options[FROM_COMMIT] = sha
            protected = self.config.protection(environment) is not None
            failed = None if protected else self._failed_audits(commit, plan)  # what it would promote as it is
            if failed:
                return self.reviews.record_failure(environment, f"commit {sha[:8]}: {failed}", author=author,
                                                   git_commit=sha, git_branch=branch)
            record = self.reviews.record(plan, author=author, git_commit=sha, git_branch=branch)
            if protected:
                return record
            return self.reviews.run(record, plan, author,
                                    lambda p: apply_plan(p, commit.project, commit.state, commit.engine, listener))

    @contextmanager
    def _commit_context(self, sha: str) -> Iterator[Context]:
        """A Context over the files of commit `sha` of the watched repository, sharing this one's
        state store, warehouse and Spark."""
        import tempfile

        from mesh_dagster.execution.git_repo import export_commit

        watch = self._git_watch()
        with tempfile.TemporaryDirectory(prefix="mesh_git_") as tmp:
            files = export_commit(watch.repo_path(self.path), sha, Path(tmp) / "commit", watch.tick_timeout_s * 4)
            commit = Context(files / watch.project_path, self.gateway, state_url=self.state_url, home=self.home,
                             engine=self._engine, on_warning=self._on_warning)
            try:
                yield commit
            finally:
                commit.close()

    def git_branch_deleted(self, branch: str) -> str | None:
        """Invalidate the environment of a deleted branch (the janitor removes it); its name, if any."""
        from mesh_dagster.core.plan.review import environment_for_branch

        watch = self._git_watch()
        environment = environment_for_branch(branch, watch.protected, list(self.config.protected_environments))
        if environment == PROD or not self.environment_exists(environment):
            return None
        self.state.invalidate_environment(environment, now_ms())
        return environment

    def _git_watch(self):
        if self.config.git is None:
            raise ConfigError("No `git:` section in config.yaml: nothing to watch (see the README's Reviewed plans)")
        return self.config.git

    def _rebuild(self, record) -> Plan:
        """The recorded plan, built again from the project and state as they are now."""
        options = dict(record.summary.options)
        options.pop(FROM_COMMIT, None)
        when = record.summary.execution_time
        if "restate" in options:
            return self.restate(record.environment, options["restate"], start=options.get("start"),
                                end=options.get("end"), execution_time=when)
        options.pop("execution_time", None)
        if options.get("choices"):
            options["choices"] = {n: ChangeCategory[c] for n, c in options["choices"].items()}
        return self.plan(record.environment, execution_time=when, **options)

    @staticmethod
    def explain(plan: Plan) -> PlanExplanation:
        """What `apply(plan)` would create and which views it would move, without doing it."""
        from mesh_dagster.execution.apply import changed_views, physical_snapshots

        promote, demote = changed_views(plan)
        return PlanExplanation(physical_snapshots(plan) if plan.new_snapshots else [], promote, demote)

    def run(self, environment: str = PROD, listener: ApplyListener | None = None, **options) -> int:
        """`mesh run`; `select` (selectors) and `auto_upstream` limit the models it processes."""
        from mesh_dagster.execution.run import environment_snapshots, run_environment, run_scope

        if options.get("start") and options.get("end"):
            time_range(options["start"], options["end"])
        if options.get("select"):  # a selector that selects nothing fails before Spark starts
            _, snapshots = environment_snapshots(self.state, normalize_environment(environment))
            run_scope(snapshots, options["select"], auto_upstream=options.get("auto_upstream", True))
        try:
            return run_environment(self.project, self.state, self.engine, environment, listener=listener, **options)
        except Exception as e:
            self.reviews.notifier.send("run_failed", {"environment": normalize_environment(environment),
                                                      "error": str(e) or type(e).__name__, "actor": self.user})
            raise

    # -- materializing and promoting (what Dagster calls) ----------------------------------
    def materialize(self, models: list[str], start: int | str, end: int | str, environment: str = PROD,
                    listener: ApplyListener | None = None, execution_time: int | str | None = None):
        """Evaluate `models` (names) of `environment` for `[start, end)` into their current
        versions' tables and record the intervals; views do not move. A lazy iterator of
        `ModelMaterialization`s, parents first; a model that fails is reported FAILED, the models
        reading it BLOCKED, and the others are still evaluated."""
        from mesh_dagster.execution.materialize import materialize

        return materialize(self.project, self.state, lambda: self.engine, normalize_environment(environment),
                           [self.model_name(m) for m in models], start, end, execution_time=execution_time,
                           listener=listener)

    def gaps(self, environment: str = PROD):
        """Intervals the environment's current snapshots still miss (what promotion waits for)."""
        from mesh_dagster.execution.promote import environment_gaps

        return environment_gaps(self.plan(environment, allow_empty=True))

    def promote(self, environment: str = PROD, listener: ApplyListener | None = None) -> Plan:
        """Virtual update of `environment` to the current snapshots; refuses while any has gaps."""
        from mesh_dagster.execution.promote import promote_environment

        def track(plan: Plan, apply: Callable[[Plan], None]) -> object:
            return self.reviews.run(self.record(plan), plan, self.user, apply)

        return promote_environment(self.project, self.state, lambda: self.engine, environment, listener, track=track)

    @staticmethod
    def _failed_audits(context: Context, plan: Plan) -> str | None:
        """Why promoting `plan` as it is would serve data a blocking audit failed on (the models it
        recomputes run their audits again), or None."""
        from mesh_dagster.execution.verdicts import AuditsFailed, failed_audits

        kept = {n: s for n, s in plan.snapshots.items() if n not in plan.backfills}
        failed = failed_audits(context.state, kept, context.project.audits)
        return str(AuditsFailed(plan.environment, failed)) if failed else None

    def verdicts(self, keys: list[tuple[str, str]]) -> dict:
        """The audit verdicts that hold on these `(model, version)`s: {(model, version, audit digest):
        [Holding(interval, verdict)]} (execution/verdicts.py)."""
        from mesh_dagster.execution.verdicts import holding, verdicts_of

        store = verdicts_of(self.state)
        return holding(store.history(keys)) if store is not None else {}

    def audit_digests(self, plan: Plan) -> dict[str, list[str]]:
        """Each model's audits as the digests of their definitions, in the model's order."""
        from mesh_dagster.execution.verdicts import audit_digest, snapshot_audits

        return {name: [audit_digest(ref, snapshot_audits(snap, self.project.audits)) for ref in snap.model.audits]
                for name, snap in plan.snapshots.items()}

    def deployed_project(self, environment: str) -> Path | None:
        """The project files of the commit a git push deployed to `environment` (what it serves),
        exported once under `.mesh/dagster/deployed/`; None without a `git:` section or when the
        environment was planned from this working tree."""
        from mesh_dagster.execution.deployed import deployed_files

        if self.config.git is None:
            return None
        return deployed_files(self.state, normalize_environment(environment), self.config.git, self.path, self.home)

    def materialization_windows(self, environment: str, model: str) -> list[Interval]:
        """What one materialization of a model without partitions processes (execution/materialize.py)."""
        from mesh_dagster.execution.materialize import unpartitioned_windows

        return unpartitioned_windows(self.project, self.state, normalize_environment(environment),
                                     self.model_name(model), engine_factory=lambda: self.engine)

    def pending_intervals(self, environment: str = PROD, models: list[str] | None = None,
                          execution_time: int | str | None = None, listener: ApplyListener | None = None):
        """Due, missing intervals of the current snapshots by model (what a scheduled run fills),
        less those waiting for a signal (each reported to `listener`)."""
        from mesh_dagster.execution.materialize import pending_intervals

        names = [self.model_name(m) for m in models] if models is not None else None
        return pending_intervals(self.project, self.state, normalize_environment(environment), names,
                                 execution_time=execution_time, engine_factory=lambda: self.engine, listener=listener)

    # -- looking at data ---------------------------------------------------------------------
    def fetchdf(self, sql: str):
        return self.engine.fetchdf(sql)

    def model_name(self, name: str) -> str:
        """Accept `schema.model`, or a view name of any environment (`schema__dev.model`)."""
        key = name.strip().strip("`").lower()
        if key in self.project.models:
            return key
        schema, _, table = key.rpartition(".")
        base = schema.split("__")[0]
        if f"{base}.{table}" in self.project.models:
            return f"{base}.{table}"
        raise MeshError(f"Unknown model '{name}'. Models: {', '.join(sorted(self.project.models)[:20])}")

    def select(self, selectors: tuple[str, ...] | list[str], flag: str) -> set[str]:
        """The project's models `selectors` choose (core/plan/selectors.py); errors name `flag`."""
        from mesh_dagster.core.plan.selectors import ModelIndex, select_models

        if not selectors:
            return set()
        return select_models(list(selectors), ModelIndex.of_models(self.project.models, self.project.dag), flag=flag)

    def local_snapshots(self) -> dict[str, Snapshot]:
        """The project's snapshots, categorised against prod (or fresh) so they have versions."""
        return self.plan(PROD, allow_empty=True).snapshots if self._has_prod() else self._fresh_snapshots()

    def _has_prod(self) -> bool:
        return self.environment_exists(PROD)

    def _fresh_snapshots(self) -> dict[str, Snapshot]:
        from mesh_dagster.core.snapshots.fingerprint import build_snapshots
        from mesh_dagster.core.snapshots.snapshot import ChangeCategory

        snaps = build_snapshots(self.project)
        for s in snaps.values():
            s.categorize(ChangeCategory.BREAKING, None)
        return snaps

    def render(self, model: str, start: str | None = None, end: str | None = None,
               execution_time: str | None = None, pretty: bool = True) -> str:
        """The query as it would run: macros expanded, references pointing at physical tables."""
        from mesh_dagster.core.sql.renderer import render_query
        from mesh_dagster.execution.evaluator import SnapshotEvaluator

        name = self.model_name(model)
        definition = self.project.models[name]
        if definition.python is not None:
            return (f"-- {name} is a Python model ({definition.where()}): it has no SQL to render.\n"
                    f"-- `mesh evaluate {name}` runs it and shows its rows.")
        if definition.query is None:
            raise MeshError(f"Model {name} is a {definition.kind.name.value} model and has no query")
        s, e = self._range(definition.interval_unit, start, end)  # a bad range is refused before state is read
        snapshots = self.local_snapshots()
        snap = snapshots[name]
        evaluator = SnapshotEvaluator(self.project, None, snapshots)
        ctx = evaluator.render_context(snap, s, e, to_ms(execution_time) if execution_time else None)
        return render_query(snap.model, ctx, evaluator.macros(snap)).sql(dialect="spark", pretty=pretty)

    def evaluate(self, model: str, start: str | None = None, end: str | None = None,
                 execution_time: str | None = None, limit: int = 1000):
        """Run a model's query (a Python model's function) and return rows, without writing anything."""
        from mesh_dagster.execution.evaluator import SnapshotEvaluator

        name = self.model_name(model)
        definition = self.project.models[name]
        if definition.python is None:
            sql = self.render(model, start, end, execution_time, pretty=False)
            return self.engine.fetchdf(f"SELECT * FROM ({sql}) AS _q LIMIT {int(limit)}")
        s, e = self._range(definition.interval_unit, start, end)
        snapshots = self.local_snapshots()
        evaluator = SnapshotEvaluator(self.project, self.engine, snapshots)
        with evaluator.query(snapshots[name], s, e, to_ms(execution_time) if execution_time else now_ms()) as sql:
            return self.engine.fetchdf(f"SELECT * FROM ({sql}) AS _q LIMIT {int(limit)}")

    @staticmethod
    def _range(unit: IntervalUnit, start: str | None, end: str | None) -> tuple[int, int]:
        """`[start, end)` to render: by default the model's last complete interval."""
        end_ms = to_end_ms(end) if end else unit.floor(now_ms())
        return time_range(start or unit.start_of(unit.index_of(end_ms) - 1), end or end_ms)

    def audit(self, models: list[str] | None = None, environment: str = PROD) -> list[tuple[str, str, int, bool]]:
        """Run the audits of an environment's models on their current data."""
        from mesh_dagster.execution.evaluator import SnapshotEvaluator
        from mesh_dagster.execution.run import environment_snapshots

        _, snapshots = environment_snapshots(self.state, normalize_environment(environment))
        names = [self.model_name(m) for m in models] if models else sorted(snapshots)
        evaluator = SnapshotEvaluator(self.project, self.engine, snapshots)
        out = []
        for name in names:
            snap = snapshots.get(name)
            if snap is None or not snap.model.audits:
                continue
            for result in evaluator.audit(snap, None, None, now_ms()):
                out.append((name, result.name, result.count, result.blocking))
        return out

    def table_diff(self, source: str, target: str, model: str, on: list[str] | None = None,
                   limit: int = 20) -> TableDiff:
        """Row and column differences of one model between two environments, joined on its grain."""
        from mesh_dagster.core.snapshots.table_diff import table_diff_queries

        name = self.model_name(model)
        keys = on or self.project.models[name].grain
        if not keys:
            raise MeshError(f"Model {name} has no grain: pass the join columns with --on")
        src, tgt = view_name(name, source), view_name(name, target)
        src_cols = self.engine.columns(src)
        tgt_cols = self.engine.columns(tgt)
        common = [c for c in src_cols if c in tgt_cols]
        q = table_diff_queries(src, tgt, keys, [c for c in common if c not in keys])
        counts = self.engine.fetchall(q.summary)[0]
        mismatches = {}
        if q.columns:
            row = self.engine.fetchall(q.columns)[0]
            mismatches = {c: int(n or 0) for c, n in zip([c for c in common if c not in keys], row)}
        return TableDiff(
            source=src, target=tgt, on=keys, source_count=int(counts[0]), target_count=int(counts[1]),
            source_only=int(counts[2]), target_only=int(counts[3]), joined=int(counts[4]),
            column_mismatches=mismatches,
            schema_added=[c for c in tgt_cols if c not in src_cols],
            schema_removed=[c for c in src_cols if c not in tgt_cols],
            sample=self.engine.fetchdf(q.sample(limit)) if limit else None,
        )

    def table_diffs(self, source: str, target: str, selectors: Sequence[str], on: list[str] | None = None,
                    limit: int = 20) -> TableDiffs:
        """`table_diff` of every project model `selectors` select that the two environments show
        from different tables; the others are listed with the reason (no view in one of them, one
        table for both, no grain and no `on`). Selection errors come before Spark starts."""
        from mesh_dagster.core.plan.selectors import ModelIndex, select_models

        envs = []
        for env in (normalize_environment(source), normalize_environment(target)):
            record = self.state.get_environment(env)
            if record is None:
                raise PlanError(f"Environment '{env}' does not exist")
            envs.append(_EnvironmentViews.of(record))
        project = self.project
        selected = select_models(selectors, ModelIndex.of_models(project.models, project.dag), flag="--select-model")
        result = TableDiffs()
        for name in (n for n in project.dag.sorted() if n in selected):
            reason = _not_diffable(name, envs, on or project.models[name].grain)
            if reason:
                result.skipped[name] = reason
            else:
                result.diffs.append(self.table_diff(envs[0].name, envs[1].name, name, on, limit))
        return result

    # -- environments ------------------------------------------------------------------------
    def environments(self):
        return self.state.get_environments()

    def environment_exists(self, environment: str) -> bool:
        return self.state.get_environment(normalize_environment(environment)) is not None

    def intervals(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[Interval]]:
        """Processed intervals per `(model, version)` as the state store records them."""
        return self.state.get_intervals(keys)

    def migrate(self) -> int:
        """Bring the state store's schema up to this version; returns the schema version."""
        from mesh_dagster.state.store import StateStore

        store = StateStore(self.state_url, check_version=False)
        try:
            store.migrate()
        finally:
            store.close()
        return store.schema_version

    def invalidate(self, environment: str, sync: bool = False) -> None:
        environment = normalize_environment(environment)
        if environment == PROD:
            raise PlanError("The prod environment cannot be invalidated")
        if not self.environment_exists(environment):
            raise PlanError(f"Environment '{environment}' does not exist")
        self.state.invalidate_environment(environment, now_ms())
        if sync:
            self.janitor(ignore_ttl=False)

    def janitor(self, ignore_ttl: bool = False) -> dict[str, list[str]]:
        from mesh_dagster.execution.janitor import run_janitor

        return run_janitor(self.config, self.state, lambda: self.engine, ignore_ttl=ignore_ttl)

    def test(self, names: list[str] | None = None, pattern: str | None = None):
        from mesh_dagster.testing.runner import run_tests

        return run_tests(self.project, lambda: self.engine, names=names, pattern=pattern)

    def info(self) -> dict[str, Any]:
        from mesh_dagster.core.config.redaction import redact_settings

        project = self.project
        kinds: dict[str, int] = {}
        for m in project.models.values():
            kinds[m.kind.name.value] = kinds.get(m.kind.name.value, 0) + 1
        return {
            "path": str(project.path),
            "models": len(project.models),
            "kinds": kinds,
            "macros": len(project.macros.names()) if hasattr(project.macros, "names") else 0,
            "audits": len(project.audits),
            "tests": len(project.test_files),
            "state": self.state.url,  # the password hidden
            "connection": redact_settings(self.config.gateway(self.gateway).connection.model_dump(exclude_none=True)),
            "environments": [e.name for e in self.environments()],
        }

    def create_external_models(self, strict: bool = False) -> ExternalModelsFile:
        """Write every external table of the project (declared or only read) to
        `external_models.yaml` with its columns from Spark's catalog, keeping what the file says
        otherwise (core/project/external_models.py). `strict`: a table missing from the catalog is an
        error and nothing is written; otherwise it is written without columns and reported."""
        from mesh_dagster.core.models.definition import relative_path
        from mesh_dagster.core.project.external_models import external_models_path, write_external_models
        from mesh_dagster.execution.external_tables import catalog_columns

        tables = sorted(n for n, m in self.project.models.items() if m.kind.is_external)
        catalog = catalog_columns(self.engine, tables)
        missing = sorted(n for n, columns in catalog.items() if columns is None)
        if strict and missing:
            shown = relative_path(external_models_path(self.path), self.path)
            raise MeshError(f"Tables not found in the catalog: {', '.join(missing)}. Nothing was written to {shown}.")
        return write_external_models(self.path, catalog)

    def physical_table(self, model: str) -> str:
        snap = self.local_snapshots()[self.model_name(model)]
        if snap.model.kind.is_symbolic:
            raise MeshError(f"{snap.name} is {snap.model.kind.name.value}: it has no physical table")
        return snap.table_name

    # -- the project's shared Spark Connect server -------------------------------------------
    # Only `start` reads `config.yaml` (for the connection); `status` and `stop` read the
    # server's record alone, so they work while the configuration is broken.
    @property
    def _mesh_dir(self) -> Path:
        return self.home / MESH_DIR

    def spark_server(self) -> ServerInfo | None:
        """The project's shared server if it is running and answering."""
        from mesh_dagster.engine.connect_server import server_status

        return server_status(self._mesh_dir)

    def start_spark_server(self, port: int | None = None, timeout_s: float = 120) -> ServerInfo:
        """The project's shared server, started first if there is none."""
        from mesh_dagster.engine.connect_server import start_server

        return start_server(self.config.gateway(self.gateway).connection, self._mesh_dir, port=port,
                            timeout_s=timeout_s)

    def stop_spark_server(self) -> bool:
        """Stop the shared server; False when none was running."""
        from mesh_dagster.engine.connect_server import stop_server

        return stop_server(self._mesh_dir)

    @property
    def spark_server_record(self) -> Path:
        """The file recording the running server (its token included, readable by its owner only)."""
        from mesh_dagster.engine.connect_server import INFO_FILE

        return self._mesh_dir / INFO_FILE

    @property
    def needs_shared_spark(self) -> bool:
        """Whether concurrent processes of this project need the shared Connect server to reach one
        catalog: only the embedded Derby metastore admits one process. A Postgres metastore, a cluster
        `master` or `remote` Spark Connect lets every process open its own session."""
        conn = self.config.gateway(self.gateway).connection
        return conn.is_local and not conn.shared_catalog

    @staticmethod
    def prefer_shared_spark() -> None:
        """Ask, for this process and its children, for the project's shared Spark Connect server
        (an explicit `MESH_SPARK_SHARED` in the environment wins): Dagster run workers then reach
        one warehouse with concurrent runs and the `mesh` CLI instead of fighting over Derby."""
        from mesh_dagster.engine.connect_server import SHARED_ENV

        os.environ.setdefault(SHARED_ENV, "1")

