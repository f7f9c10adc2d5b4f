"""Looking at a project's models and data for Context: rendering and evaluating a query, running
audits, diffing an environment's tables with another's, and describing the project.

Spark is reached through `parts.engine`, built only when a command really reads data: rendering
needs no Spark, and a bad time range or selector is refused before it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mesh_dagster.core.config.names import PROD, normalize_environment, view_name
from mesh_dagster.core.config.redaction import redact_settings
from mesh_dagster.core.errors import MeshError, PlanError
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.plan.selectors import ModelIndex, select_models
from mesh_dagster.core.project.external_models import (
    ExternalModelsFile,
    external_models_path,
    write_external_models,
)
from mesh_dagster.core.snapshots.environment import Environment, EnvironmentSnapshot
from mesh_dagster.core.snapshots.table_diff import table_diff_queries
from mesh_dagster.core.sql.renderer import render_query
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import now_ms, time_range, to_end_ms, to_ms
from mesh_dagster.execution.evaluate.evaluator import SnapshotEvaluator
from mesh_dagster.execution.evaluate.external_tables import catalog_columns
from mesh_dagster.execution.intervals.run import environment_snapshots
from mesh_dagster.execution.parts import Parts
from mesh_dagster.execution.plans.planning import Planning


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


class Inspection:
    """Reads one project's models and data; writes nothing but `external_models.yaml`."""

    def __init__(self, parts: Parts, planning: Planning):
        self.parts = parts
        self.planning = planning

    def render(self, model: str, start: str | None = None, end: str | None = None,
               execution_time: str | None = None, pretty: bool = True) -> str:
        """The query as it would run: macros expanded, references pointing at physical tables."""
        project = self.parts.project
        name = project.model_name(model)
        definition = project.models[name]
        if definition.python is not None:
            return (f"-- {name} is a Python model ({definition.where()}): it has no SQL to render.\n"
                    f"-- `mesh evaluate {name}` runs it and shows its rows.")
        if definition.query is None:
            raise MeshError(f"Model {name} is a {definition.kind.name.value} model and has no query")
        s, e = _range(definition.interval_unit, start, end)  # a bad range is refused before state is read
        snapshots = self.planning.local_snapshots()
        snap = snapshots[name]
        evaluator = SnapshotEvaluator(project, None, snapshots)
        ctx = evaluator.render_context(snap, s, e, to_ms(execution_time) if execution_time else None)
        return render_query(snap.model, ctx, evaluator.macros(snap)).sql(dialect="spark", pretty=pretty)

    def evaluate(self, model: str, start: str | None = None, end: str | None = None,
                 execution_time: str | None = None, limit: int = 1000):
        """Run a model's query (a Python model's function) and return rows, without writing anything."""
        project = self.parts.project
        name = project.model_name(model)
        definition = project.models[name]
        if definition.python is None:
            sql = self.render(model, start, end, execution_time, pretty=False)
            return self.parts.engine.session.fetchdf(f"SELECT * FROM ({sql}) AS _q LIMIT {int(limit)}")
        s, e = _range(definition.interval_unit, start, end)
        snapshots = self.planning.local_snapshots()
        engine = self.parts.engine
        evaluator = SnapshotEvaluator(project, engine, snapshots)
        with evaluator.query(snapshots[name], s, e, to_ms(execution_time) if execution_time else now_ms()) as sql:
            return engine.session.fetchdf(f"SELECT * FROM ({sql}) AS _q LIMIT {int(limit)}")

    def audit(self, models: list[str] | None = None, environment: str = PROD) -> list[tuple[str, str, int, bool]]:
        """Run the audits of an environment's models on their current data."""
        _, snapshots = environment_snapshots(self.parts.state, normalize_environment(environment))
        project = self.parts.project
        names = [project.model_name(m) for m in models] if models else sorted(snapshots)
        evaluator = SnapshotEvaluator(project, self.parts.engine, snapshots)
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
        name = self.parts.project.model_name(model)
        keys = on or self.parts.project.models[name].grain
        if not keys:
            raise MeshError(f"Model {name} has no grain: pass the join columns with --on")
        engine = self.parts.engine
        src, tgt = view_name(name, source), view_name(name, target)
        src_cols = engine.catalog.columns(src)
        tgt_cols = engine.catalog.columns(tgt)
        both = {c.lower() for c in src_cols} & {c.lower() for c in tgt_cols}
        absent = [k for k in keys if k.lower() not in both]
        if absent:
            how = "--on names" if on else "its grain names"
            raise MeshError(f"Cannot diff {name} on {', '.join(keys)}: {how} {', '.join(absent)}, not a column of both "
                            f"{src} and {tgt}: pass the join columns with --on")
        common = [c for c in src_cols if c in tgt_cols]
        q = table_diff_queries(src, tgt, keys, [c for c in common if c not in keys])
        counts = engine.session.fetchall(q.summary)[0]
        mismatches = {}
        if q.columns:
            row = engine.session.fetchall(q.columns)[0]
            mismatches = {c: int(n or 0) for c, n in zip([c for c in common if c not in keys], row)}
        return TableDiff(
            source=src, target=tgt, on=keys, source_count=int(counts[0]), target_count=int(counts[1]),
            source_only=int(counts[2]), target_only=int(counts[3]), joined=int(counts[4]),
            column_mismatches=mismatches,
            schema_added=[c for c in tgt_cols if c not in src_cols],
            schema_removed=[c for c in src_cols if c not in tgt_cols],
            sample=engine.session.fetchdf(q.sample(limit)) if limit else None,
        )

    def table_diffs(self, source: str, target: str, selectors: Sequence[str], on: list[str] | None = None,
                    limit: int = 20) -> TableDiffs:
        """`table_diff` of every project model `selectors` select that the two environments show
        from different tables; the others are listed with the reason (no view in one of them, one
        table for both, no grain and no `on`). Selection errors come before Spark starts."""
        envs = []
        for env in (normalize_environment(source), normalize_environment(target)):
            record = self.parts.state.environments.get_environment(env)
            if record is None:
                raise PlanError(f"Environment '{env}' does not exist")
            envs.append(_EnvironmentViews.of(record))
        project = self.parts.project
        selected = select_models(selectors, ModelIndex.of_models(project.models, project.dag), flag="--select-model")
        result = TableDiffs()
        for name in (n for n in project.dag.sorted() if n in selected):
            reason = _not_diffable(name, envs, on or project.models[name].grain)
            if reason:
                result.skipped[name] = reason
            else:
                result.diffs.append(self.table_diff(envs[0].name, envs[1].name, name, on, limit))
        return result

    def physical_table(self, model: str) -> str:
        snap = self.planning.local_snapshots()[self.parts.project.model_name(model)]
        if snap.model.kind.is_symbolic:
            raise MeshError(f"{snap.name} is {snap.model.kind.name.value}: it has no physical table")
        return snap.table_name

    def create_external_models(self, strict: bool = False) -> ExternalModelsFile:
        """Write every external table of the project (declared or only read) to
        `external_models.yaml` with its columns from Spark's catalog, keeping what the file says
        otherwise (core/project/external_models.py). `strict`: a table missing from the catalog is an
        error and nothing is written; otherwise it is written without columns and reported."""
        path = self.parts.path
        tables = sorted(n for n, m in self.parts.project.models.items() if m.kind.is_external)
        catalog = catalog_columns(self.parts.engine, tables)
        missing = sorted(n for n, columns in catalog.items() if columns is None)
        if strict and missing:
            shown = relative_path(external_models_path(path), path)
            raise MeshError(f"Tables not found in the catalog: {', '.join(missing)}. Nothing was written to {shown}.")
        return write_external_models(path, catalog)

    def info(self) -> dict[str, Any]:
        project = self.parts.project
        kinds: dict[str, int] = {}
        for m in project.models.values():
            kinds[m.kind.name.value] = kinds.get(m.kind.name.value, 0) + 1
        state = self.parts.state
        return {
            "path": str(project.path),
            "models": len(project.models),
            "kinds": kinds,
            "macros": len(project.macros.names()) if hasattr(project.macros, "names") else 0,
            "audits": len(project.audits),
            "tests": len(project.test_files),
            "state": state.url,  # the password hidden
            "connection": redact_settings(self.parts.config.gateway(self.parts.gateway).connection
                                          .model_dump(exclude_none=True)),
            "environments": [e.name for e in state.environments.get_environments()],
        }


def _range(unit: IntervalUnit, start: str | None, end: str | None) -> tuple[int, int]:
    """`[start, end)` to render: by default the model's last complete interval."""
    end_ms = to_end_ms(end) if end else unit.floor(now_ms())
    return time_range(start or unit.start_of(unit.index_of(end_ms) - 1), end or end_ms)


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
