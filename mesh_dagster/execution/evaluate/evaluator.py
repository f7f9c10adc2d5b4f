"""Evaluating one snapshot: creating its physical object, writing an interval, auditing it.

This is the only code that turns a snapshot into Spark work, so the CLI (`mesh plan`, `mesh run`)
and Dagster materializations write exactly the same way.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mesh_dagster.core.errors import AuditError, EngineError, MeshError, ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.audit_sample import SAMPLE_ROWS, AuditSample
from mesh_dagster.core.models.materialization import Materialization
from mesh_dagster.core.models.model import Audit, Model
from mesh_dagster.core.plan.backfills import ALL_TIME
from mesh_dagster.core.project.audits import audit_query
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.sql.renderer import RenderContext, render_query, render_statements
from mesh_dagster.core.time.dates import ms_to_datetime, now_ms
from mesh_dagster.core.time.time_column import find_type
from mesh_dagster.execution.evaluate import custom_materialization as _custom  # noqa: F401 - registers the CUSTOM strategy
from mesh_dagster.execution.evaluate.migration import migrate_table, wanted_columns
from mesh_dagster.execution.evaluate.python_evaluation import empty_query, inclusive_interval, python_query
from mesh_dagster.execution.evaluate.session_settings import model_settings
from mesh_dagster.execution.evaluate.shapes import Shapes
from mesh_dagster.execution.evaluate.strategies import strategy_for
from mesh_dagster.execution.ports import Engine, Journal, ShapeState

if TYPE_CHECKING:
    import pandas as pd  # imported when a seed is read: planning never needs it


@dataclass
class AuditResult:
    name: str
    count: int
    blocking: bool
    sample: AuditSample | None = None  # some of the failing rows (core/models/audit_sample.py)

    @property
    def passed(self) -> bool:
        return self.count == 0


class SnapshotEvaluator:
    """Renders snapshots against the physical tables of their parents and runs them on Spark.

    Several models, and batches of one model, may be evaluated from several threads at once
    (`concurrent_tasks`, `batch_concurrency`): the per-apply memos below are guarded by a lock,
    and each table's creation by its own; everything else is per call.
    """

    def __init__(self, project: Project, engine: Engine | None, snapshots: dict[str, Snapshot], *,
                 allow_destructive: frozenset[str] = frozenset(), allow_additive: frozenset[str] = frozenset(),
                 stored_content: Callable[[str], bytes | None] | None = None, shapes: ShapeState | None = None):
        """`shapes`: where what is learned of tables' columns is kept between evaluations (the state
        store's part): without it, every evaluation analyses each query it checks once."""
        self.project = project
        self._engine = engine  # None: rendering only
        self.snapshots = snapshots  # the snapshots in play, by model name
        self._stored_content = stored_content  # digest -> captured seed bytes (the state store's blobs)
        # Models whose schema-change policies a plan overrides (`--allow-*-model`).
        self.allow_destructive, self.allow_additive = allow_destructive, allow_additive
        self.warnings: list[str] = []  # schema changes allowed with a warning, for the caller to show
        self._padding: dict[str, dict[str, str]] = {}  # table -> columns kept that queries no longer output
        # Per-apply memo of Spark catalog answers: each costs a round trip per batch otherwise.
        self._created: set[str] = set()
        self._column_types: dict[str, dict[str, str]] = {}
        self._table_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        # What is known of tables' columns: a query is analysed only when something it reads changed.
        self.shapes = Shapes(snapshots, lambda: self.engine, shapes, lambda s: self.render(s, stage="creating"),
                             _spark_settings(project))
        self._views: dict[str, str] = {}  # view -> what it saw when this evaluation defined it
        self._new: set[str] = set()  # tables this evaluation found missing, then created

    # -- rendering -------------------------------------------------------------------------
    def parents(self, snapshot: Snapshot) -> list[Snapshot]:
        return [self.snapshots[p.name] for p in snapshot.parents if p.name in self.snapshots]

    def sources(self, snapshot: Snapshot) -> list[Snapshot]:
        """Parents, and the parents of EMBEDDED parents (recursively): an embedded model is inlined
        into the query, so what it reads is read by the query too."""
        out: list[Snapshot] = []
        for parent in self.parents(snapshot):
            if parent not in out:
                out.append(parent)
            if parent.model.kind.is_inlined:
                out += [p for p in self.sources(parent) if p not in out]
        return out

    def table_mapping(self, snapshot: Snapshot) -> dict[str, str]:
        """Model names to the physical tables read instead; a self-referencing model's own name is
        its own table (its previous state), never the environment's view."""
        mapping = {p.name: p.table_name for p in self.sources(snapshot) if not p.model.kind.is_symbolic}
        if snapshot.model.self_referencing:
            mapping[snapshot.name] = snapshot.table_name
        return mapping

    # -- what a snapshot captured (core/snapshots/capture.py); the project only for snapshots without one --
    def schemas(self, snapshot: Snapshot) -> dict[str, dict[str, str | None]]:
        """Parents' columns as the snapshot was planned with them."""
        if snapshot.capture is not None:
            return snapshot.capture.parent_schemas
        if snapshot.name not in self.project.models:
            return {}
        return self.project.parent_schemas(snapshot.name)

    def macros(self, snapshot: Snapshot) -> MacroRegistry:
        if snapshot.capture is None:
            return self.project.repo_of(snapshot.name).macros
        return snapshot.capture.macro_registry(self.project.path)

    def variables(self, snapshot: Snapshot) -> dict[str, Any]:
        if snapshot.capture is None:
            return self.project.repo_of(snapshot.name).variables
        return snapshot.capture.variable_values()

    def audits(self, snapshot: Snapshot) -> dict[str, Audit]:
        return snapshot.capture.audits if snapshot.capture is not None else self.project.audits

    def render_context(self, snapshot: Snapshot, start: int | None = None, end: int | None = None,
                       execution_time: int | None = None, stage: str = "evaluating") -> RenderContext:
        low, high = _interval_datetimes(start, end)
        return RenderContext(
            start=low,
            end=high,
            execution_time=ms_to_datetime(execution_time if execution_time is not None else now_ms()),
            runtime_stage=stage,
            table_mapping=self.table_mapping(snapshot),
            this_model=snapshot.table_name if not snapshot.model.kind.is_symbolic else None,
            variables=self.variables(snapshot),
            schemas=self.schemas(snapshot),
            embedded={p.name: p.model for p in self.sources(snapshot) if p.model.kind.is_inlined},
            gateway=self.project.gateway,
        )

    def render(self, snapshot: Snapshot, start: int | None = None, end: int | None = None,
               execution_time: int | None = None, stage: str = "evaluating") -> str:
        """The model's SQL. A Python model has none: its table is created from this typed query of
        its declared columns and no row; its rows come from `query`."""
        model = snapshot.model
        if model.python is not None and model.columns is not None:
            return empty_query(model.columns)
        ctx = self.render_context(snapshot, start, end, execution_time, stage)
        sql = render_query(model, ctx, self.macros(snapshot)).sql(dialect="spark")
        padding = self._padding.get(snapshot.table_name) if not model.kind.is_symbolic else None
        if padding and stage == "evaluating":  # the table keeps columns the query dropped: they read NULL
            nulls = ", ".join(f"CAST(NULL AS {t}) AS `{c}`" for c, t in padding.items())
            sql = f"SELECT _padded.*, {nulls} FROM ({sql}) AS _padded"
        return sql

    def query(self, snapshot: Snapshot, start: int, end: int, execution_time: int) -> AbstractContextManager[str]:
        """The query producing `[start, end)` of a model, usable inside the `with` block: a SQL model's
        rendering, or the output of a Python model run for the interval (execution/evaluate/python_evaluation.py)."""
        model = snapshot.model
        if model.python is None:
            return nullcontext(self.render(snapshot, start, end, execution_time))
        low, high = inclusive_interval(*_interval_datetimes(start, end))
        return python_query(self.engine, model, self.python_tables(snapshot), self.variables(snapshot), low, high,
                            ms_to_datetime(execution_time), self.project.path)

    def python_tables(self, snapshot: Snapshot) -> dict[str, str]:
        """What a Python model's `resolve_table` answers: each parent's table (or view) as a SQL model's
        references are resolved, an external table's own name, and the model's own table."""
        external = {p.name: p.name for p in self.parents(snapshot) if p.model.kind.is_external}
        return {**external, **self.table_mapping(snapshot), snapshot.name: snapshot.table_name}

    def statements(self, snapshot: Snapshot, which: str, start: int, end: int, execution_time: int) -> list[str]:
        """The model's rendered `pre` or `post` statements for an interval."""
        model = snapshot.model
        ctx = self.render_context(snapshot, start, end, execution_time)
        return render_statements(model.pre_statements if which == "pre" else model.post_statements, model, ctx,
                                 self.macros(snapshot))

    def seed(self, snapshot: Snapshot) -> pd.DataFrame:
        """The seed's rows as planned: the captured content, never the file as it is now."""
        return read_seed(snapshot.model, self.seed_content(snapshot))

    def seed_types(self, snapshot: Snapshot) -> dict[str, str]:
        """The types of a seed's columns: what its table is created with and its rows are cast to."""
        model = snapshot.model
        columns = snapshot.capture.columns if snapshot.capture is not None else self.project.columns(model.name)
        return seed_types(model, columns)

    def seed_content(self, snapshot: Snapshot) -> bytes:
        """The bytes a seed snapshot captured, by digest: the project's when its load read those (no
        I/O), else the state store's. A snapshot stored before captures existed reads the project's."""
        model, capture = snapshot.model, snapshot.capture
        loaded = self.project.seeds.get(model.name)
        if capture is None:
            return loaded.data if loaded is not None else _file_content(model)
        assert capture.seed is not None, f"{snapshot.name} captured no seed"
        digest = capture.seed.digest
        if loaded is not None and loaded.content_hash == digest:
            return loaded.data
        stored = self._stored_content(digest) if self._stored_content is not None else None
        if stored is None:
            raise ModelError(f"The content of seed {snapshot.name} planned as {digest[:12]} is not in the state "
                             "store, and its file now holds other rows: re-run `mesh plan` to capture the file as "
                             "it is", model.path, model.line)
        return stored

    def materialization(self, snapshot: Snapshot) -> Materialization:
        """A CUSTOM model's materialization: the class its snapshot captured (the project's only for
        snapshots stored without one), defined afresh from the stored code."""
        stored = snapshot.capture.materialization if snapshot.capture is not None else None
        kind = snapshot.model.kind.custom
        name = kind.materialization.lower() if kind is not None else ""
        stored = stored or self.project.materializations.get(name)
        if stored is None:
            raise ModelError(f"{snapshot.name} names materialization '{name}', which its snapshot did not capture "
                             "and materializations/*.py does not define", snapshot.model.path, snapshot.model.line)
        return stored.instance(self.project.path)

    # -- physical layer --------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise EngineError("This evaluator only renders: it was given no engine")
        return self._engine

    def create(self, snapshot: Snapshot, journal: Journal | None = None) -> None:
        """Create the physical table (or view) of a snapshot if it does not exist yet, or migrate its
        schema (`journal`: what hears how to finish the migration should the process die)."""
        with self._lock_for(snapshot.table_name):  # a concurrent batch must not write before the table exists
            if snapshot.model.kind.is_view or snapshot.table_name not in self._created:
                table = snapshot.table_name
                # One round trip tells whether the table is kept and what it holds (the migration's input).
                current = self.engine.catalog.existing_columns(table) if snapshot.model.kind.is_incremental else None
                if current is not None:
                    self._migrate(snapshot, current, journal)  # kept: CREATE ... IF NOT EXISTS would change nothing
                else:
                    self.shapes.changing(snapshot)  # whatever was known of a table of that name may be no more
                    if snapshot.model.kind.is_incremental:
                        with self._lock:
                            self._new.add(table)
                    self.engine.catalog.create_schema(snapshot.physical_schema)
                    strategy_for(snapshot).create(self, snapshot)
                self._created.add(snapshot.table_name)

    def created(self, snapshot: Snapshot, columns: dict[str, str], inputs: str | None = None,
                output: dict[str, str] | None = None) -> None:
        """A strategy created the snapshot's table with `columns`: known only where the table did not
        exist before (CREATE ... IF NOT EXISTS leaves an existing table as it is, whatever its columns:
        only incremental kinds look first); the analysis (`output` under `inputs`) holds either way."""
        with self._lock:
            new = snapshot.table_name in self._new
        self.shapes.learned(snapshot, columns if new else None, inputs, output)

    def _migrate(self, snapshot: Snapshot, current: dict[str, str], journal: Journal | None) -> None:
        """Fit a kept table (holding `current`) to what the query now outputs, as the model's
        policies allow (the first write of each apply or run checks: the table may have been changed
        since). What the query outputs is analysed only when something it reads changed since the
        last check (shapes.py). Unchanged, its columns are remembered for the writes' time bounds."""
        sql = self.render(snapshot, stage="creating")
        self.shapes.seen(snapshot, current)
        if snapshot.model.columns:  # declared: Spark only spells them
            output, inputs = self.shapes.output("declared", snapshot, sql,
                                                lambda: wanted_columns(self.engine, snapshot, sql))
            wanted = output
        else:  # the same analysis as the table's creation (remembered by it)
            output, inputs = self.query_output(snapshot, sql)
            wanted = wanted_columns(self.engine, snapshot, sql, output)
        migration = migrate_table(self.engine, snapshot, sql, allow_destructive=snapshot.name in self.allow_destructive,
                                  allow_additive=snapshot.name in self.allow_additive, current=current,
                                  journal=journal, wanted=wanted, changing=lambda: self.shapes.changing(snapshot))
        self.shapes.learned(snapshot, migration.columns if migration is not None else current, inputs, output)
        with self._lock:
            if migration is None:
                self._column_types[snapshot.table_name] = current
                return
            self._padding[snapshot.table_name] = migration.padding
            self._column_types.pop(snapshot.table_name, None)
            self.warnings += migration.warnings

    def query_output(self, snapshot: Snapshot, query: str) -> tuple[dict[str, str], str | None]:
        """The columns `query` outputs, analysed only when something it reads changed since the
        last analysis (shapes.py), and the digest of its inputs (None: not remembered)."""
        return self.shapes.output("output", snapshot, query, lambda: self.engine.catalog.query_columns(query))

    def define_view(self, snapshot: Snapshot, sql: str) -> None:
        """(Re)define the snapshot's view as `sql`, unless this evaluation already defined it so and
        nothing it reads changed since (a view created by the physical layer, then written by the
        backfill: one CREATE, issue 36)."""
        stamp = self.shapes.stamp(sql)
        with self._lock:
            if stamp is not None and self._views.get(snapshot.table_name) == stamp:
                return
        self.engine.catalog.create_view(snapshot.table_name, sql, snapshot.model.column_descriptions)
        self.shapes.defined(snapshot)
        if stamp is not None:
            with self._lock:
                self._views[snapshot.table_name] = stamp

    def _lock_for(self, table: str) -> threading.Lock:
        """One lock per table: creating one table never waits for another being created."""
        with self._lock:
            return self._table_locks.setdefault(table, threading.Lock())

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, snapshot: Snapshot, start: int, end: int, execution_time: int,
                 journal: Journal | None = None) -> None:
        """Write `[start, end)` of a snapshot into its physical table (idempotent); `journal` hears,
        before its destructive step, how to finish the write after a crash (execution/intervals/scheduler.py).

        Seeds and views have no interval: they are (re)built whole, whatever the range says.
        """
        with model_settings(self.engine, snapshot.model):  # its session_properties, or beside the others
            strategy_for(snapshot).write(self, snapshot, start, end, execution_time, journal)

    def time_column_type(self, snapshot: Snapshot) -> str | None:
        """The time column's type in the physical table: the rows are stored as that type, so it,
        not the declared or inferred one, decides how an interval is bounded (writes and audits)."""
        return find_type(self.table_columns(snapshot), snapshot.model.time_column or "")

    def table_columns(self, snapshot: Snapshot) -> dict[str, str]:
        """The physical table's columns, read once per apply (its migration check reads them, or
        the first write) and again only after this evaluator migrated the table."""
        table = snapshot.table_name
        with self._lock:
            known = self._column_types.get(table)
        if known is None:
            known = self.engine.catalog.columns(table)
            with self._lock:
                self._column_types[table] = known
        return dict(known)

    # -- audits ----------------------------------------------------------------------------
    def audit(self, snapshot: Snapshot, start: int | None, end: int | None, execution_time: int) -> list[AuditResult]:
        """Run the model's audits; with an interval, an incremental model's audits see only its rows."""
        results: list[AuditResult] = []
        model = snapshot.model
        if not model.audits:
            return results
        ctx = self.render_context(snapshot, start, end, execution_time, stage="auditing")
        if not model.kind.is_symbolic:  # an audit naming its own model (`FROM db.orders`) audits this table
            ctx.table_mapping = {**ctx.table_mapping, snapshot.name: snapshot.table_name}
        if model.time_column and ctx.start is not None:
            ctx.time_column_type = self.time_column_type(snapshot)
        with model_settings(self.engine, model):  # the model's queries: its audits too
            for ref in model.audits:
                sql, blocking = audit_query(ref, model, self.audits(snapshot), ctx, self.macros(snapshot))
                count = int(self.engine.session.fetchall(f"SELECT COUNT(*) FROM ({sql}) AS audit")[0][0])
                results.append(AuditResult(ref.name, count, blocking, self._sample(sql) if count else None))
        return results

    def _sample(self, sql: str) -> AuditSample:
        """Some of the rows a failed audit returns, for whoever looks at the failure."""
        frame = self.engine.session.fetchdf(f"SELECT * FROM ({sql}) AS audit LIMIT {SAMPLE_ROWS}")
        return AuditSample.of(list(frame.columns), frame.itertuples(index=False, name=None))

    def check_audits(self, snapshot: Snapshot, results: list[AuditResult]) -> None:
        for result in results:
            if result.blocking and not result.passed:
                model = snapshot.model
                raise AuditError(
                    f"Audit '{result.name}' failed for {model.name}: {result.count} row(s) returned. "
                    "Nothing was promoted; the environment's views are unchanged.",
                    audit=result.name, model=model.name, count=result.count, path=model.path, line=model.line,
                )


def _spark_settings(project: Project) -> dict[str, object]:
    """The Spark settings every session of the project gets (they may change what a query outputs)."""
    try:
        return dict(project.config.gateway(project.gateway).connection.config)
    except (AttributeError, KeyError, MeshError):
        return {}


def _interval_datetimes(start: int | None, end: int | None) -> tuple[datetime | None, datetime | None]:
    """An interval as datetimes; `ALL_TIME` (and any end past it) means no interval at all: its end,
    the year 10000, is no datetime, and a timeless build has no `@start_ds` to speak of."""
    if end is not None and end >= ALL_TIME[1]:
        return None, None
    return (ms_to_datetime(start) if start is not None else None), (ms_to_datetime(end) if end is not None else None)


def read_seed(model: Model, content: bytes) -> pd.DataFrame:
    """A seed's CSV content as a pandas DataFrame of strings (typed later by Spark)."""
    import pandas as pd

    seed = model.kind.seed
    if seed is None:
        raise ModelError(f"{model.name} is not a seed", model.path, model.line)
    settings = {k: v for k, v in seed.csv_settings.items()
                if k in ("delimiter", "quotechar", "escapechar", "encoding", "na_values", "keep_default_na")}
    try:
        df = pd.read_csv(io.BytesIO(content), dtype=str, keep_default_na=settings.pop("keep_default_na", True),
                         **settings)
    except (OSError, ValueError) as e:
        raise ModelError(f"Cannot read seed: {e}", seed.path or model.path, 1) from None
    df.columns = [c.strip().lower() for c in df.columns]
    return df


def seed_types(model: Model, columns: dict[str, str | None] | None) -> dict[str, str]:
    if model.columns:
        return dict(model.columns)
    return {c: (t or "STRING") for c, t in (columns or {}).items()}



def _file_content(model: Model) -> bytes:
    """A seed's file as it is now: only for a snapshot stored before captures existed, evaluated by
    a project that no longer loads that seed."""
    path = Path(getattr(model.kind.seed, "path", None) or "")
    try:
        return path.read_bytes()
    except OSError as e:
        raise ModelError(f"Cannot read seed: {e}", str(path), 1) from None
