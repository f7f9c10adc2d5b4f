"""Evaluating one snapshot: creating its physical object, writing an interval, auditing it.

This is the only code that turns a snapshot into Spark work, so the CLI (`mesh plan`, `mesh run`)
and Dagster materializations write exactly the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from mesh_dagster.core.audits import audit_query
from mesh_dagster.core.dates import ms_to_datetime, now_ms
from mesh_dagster.core.errors import AuditError, EngineError, ModelError
from mesh_dagster.core.model import KindName, Model
from mesh_dagster.core.project import Project
from mesh_dagster.core.renderer import RenderContext, render_query, render_statements
from mesh_dagster.core.snapshot import Snapshot


@dataclass
class AuditResult:
    name: str
    count: int
    blocking: bool

    @property
    def passed(self) -> bool:
        return self.count == 0


class SnapshotEvaluator:
    """Renders snapshots against the physical tables of their parents and runs them on Spark."""

    def __init__(self, project: Project, engine, snapshots: dict[str, Snapshot]):
        self.project = project
        self.engine = engine
        self.snapshots = snapshots  # the snapshots in play, by model name
        # Per-apply memo of Spark catalog answers: each costs a round trip per batch otherwise.
        self._created: set[str] = set()
        self._column_types: dict[str, dict[str, str]] = {}

    # -- rendering -------------------------------------------------------------------------
    def parents(self, snapshot: Snapshot) -> list[Snapshot]:
        return [self.snapshots[p.name] for p in snapshot.parents if p.name in self.snapshots]

    def table_mapping(self, snapshot: Snapshot) -> dict[str, str]:
        return {p.name: p.table_name for p in self.parents(snapshot) if not p.model.kind.is_symbolic}

    def schemas(self, snapshot: Snapshot) -> dict[str, dict[str, str | None]]:
        """Parents' columns, when the local project still defines those same snapshots."""
        if snapshot.name not in self.project.models:
            return {}
        return self.project.parent_schemas(snapshot.name)

    def render_context(self, snapshot: Snapshot, start: int | None = None, end: int | None = None,
                       execution_time: int | None = None, stage: str = "evaluating") -> RenderContext:
        return RenderContext(
            start=ms_to_datetime(start) if start is not None else None,
            end=ms_to_datetime(end) if end is not None else None,
            execution_time=ms_to_datetime(execution_time if execution_time is not None else now_ms()),
            runtime_stage=stage,
            table_mapping=self.table_mapping(snapshot),
            this_model=snapshot.table_name if not snapshot.model.kind.is_symbolic else None,
            variables=self.project.variables,
            schemas=self.schemas(snapshot),
            embedded={p.name: p.model for p in self.parents(snapshot) if p.model.kind.name == KindName.EMBEDDED},
            gateway=self.project.gateway,
        )

    def render(self, snapshot: Snapshot, start: int | None = None, end: int | None = None,
               execution_time: int | None = None, stage: str = "evaluating") -> str:
        ctx = self.render_context(snapshot, start, end, execution_time, stage)
        return render_query(snapshot.model, ctx, self.project.macros).sql(dialect="spark")

    # -- physical layer --------------------------------------------------------------------
    def create(self, snapshot: Snapshot) -> None:
        """Create the physical table (or view) of a snapshot if it does not exist yet."""
        model = snapshot.model
        if model.kind.name != KindName.VIEW and snapshot.table_name in self._created:
            return
        self.engine.create_schema(snapshot.physical_schema)
        self._created.add(snapshot.table_name)
        if model.kind.name == KindName.VIEW:
            self.engine.create_view(snapshot.table_name, self.render(snapshot, stage="creating"))
        elif model.kind.name == KindName.SEED:
            # Created empty now so children can be validated; filled by `evaluate`.
            types = seed_types(model, self.project.columns(model.name))
            empty = "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS `{c}`" for c, t in types.items())
            self.engine.create_table(snapshot.table_name, empty, [], model.storage_format or "parquet", types)
        elif model.kind.is_materialized:
            query = self.render(snapshot, stage="creating")
            self.engine.create_table(snapshot.table_name, query, model.effective_partitioned_by,
                                     model.storage_format or "parquet", model.columns)

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, snapshot: Snapshot, start: int, end: int, execution_time: int) -> None:
        """Write `[start, end)` of a snapshot into its physical table (idempotent)."""
        model = snapshot.model
        kind = model.kind.name
        if kind == KindName.SEED:
            self.engine.load_seed(snapshot.table_name, read_seed(model, self.project.columns(model.name)),
                                  seed_types(model, self.project.columns(model.name)))
            return
        if kind == KindName.VIEW:
            self.engine.create_view(snapshot.table_name, self.render(snapshot, start, end, execution_time))
            return
        if model.kind.is_symbolic:
            return
        ctx = self.render_context(snapshot, start, end, execution_time)
        for statement in render_statements(model.pre_statements, model, ctx, self.project.macros):
            self.engine.execute(statement)
        query = render_query(model, ctx, self.project.macros).sql(dialect="spark")
        if kind == KindName.FULL:
            self.engine.replace_table(snapshot.table_name, query, model.effective_partitioned_by,
                                      model.storage_format or "parquet", model.columns)
        else:
            self.create(snapshot)
            low, high = self.time_bounds(snapshot, start, end)
            self.engine.insert_overwrite_interval(snapshot.table_name, query, model.kind.time_column, low, high)
        for statement in render_statements(model.post_statements, model, ctx, self.project.macros):
            self.engine.execute(statement)

    def time_bounds(self, snapshot: Snapshot, start: int, end: int) -> tuple[str, str]:
        """SQL literals bounding the time column for `[start, end)`, typed like the column."""
        model = snapshot.model
        column = model.kind.time_column or ""
        if snapshot.table_name not in self._column_types:
            self._column_types[snapshot.table_name] = self.engine.columns(snapshot.table_name)
        col_type = (self._column_types[snapshot.table_name].get(column) or "").lower()
        low_dt = ms_to_datetime(start)
        high_dt = ms_to_datetime(end) - timedelta(microseconds=1)
        if col_type == "date":
            return f"CAST('{low_dt:%Y-%m-%d}' AS DATE)", f"CAST('{high_dt:%Y-%m-%d}' AS DATE)"
        if col_type.startswith("timestamp"):
            cast = "TIMESTAMP_NTZ" if col_type == "timestamp_ntz" else "TIMESTAMP"
            return (f"CAST('{low_dt:%Y-%m-%d %H:%M:%S.%f}' AS {cast})",
                    f"CAST('{high_dt:%Y-%m-%d %H:%M:%S.%f}' AS {cast})")
        if col_type in ("int", "bigint", "smallint", "tinyint", "long"):
            fmt = model.kind.time_column_format
            return low_dt.strftime(fmt), high_dt.strftime(fmt)
        fmt = model.kind.time_column_format
        return f"'{low_dt.strftime(fmt)}'", f"'{high_dt.strftime(fmt)}'"

    # -- audits ----------------------------------------------------------------------------
    def audit(self, snapshot: Snapshot, start: int | None, end: int | None, execution_time: int) -> list[AuditResult]:
        results = []
        model = snapshot.model
        ctx = self.render_context(snapshot, start, end, execution_time, stage="auditing")
        for ref in model.audits:
            sql, blocking = audit_query(ref, model, self.project.audits, ctx, self.project.macros)
            count = int(self.engine.fetchall(f"SELECT COUNT(*) FROM ({sql}) AS audit")[0][0])
            results.append(AuditResult(ref.name, count, blocking))
        return results

    def check_audits(self, snapshot: Snapshot, results: list[AuditResult]) -> None:
        for result in results:
            if result.blocking and not result.passed:
                model = snapshot.model
                raise AuditError(
                    f"Audit '{result.name}' failed for {model.name}: {result.count} row(s) returned. "
                    "Nothing was promoted; the environment's views are unchanged.",
                    audit=result.name, model=model.name, count=result.count, path=model.path, line=model.line,
                )


def read_seed(model: Model, columns: dict[str, str | None] | None):
    """The seed CSV as a pandas DataFrame of strings (typed later by Spark)."""
    import pandas as pd

    settings = {k: v for k, v in model.kind.csv_settings.items()
                if k in ("delimiter", "quotechar", "escapechar", "encoding", "na_values", "keep_default_na")}
    path = Path(model.kind.path or "")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=settings.pop("keep_default_na", True), **settings)
    except (OSError, ValueError) as e:
        raise ModelError(f"Cannot read seed: {e}", str(path), 1) from None
    df.columns = [c.strip().lower() for c in df.columns]
    return df


def seed_types(model: Model, columns: dict[str, str | None] | None) -> dict[str, str]:
    if model.columns:
        return dict(model.columns)
    return {c: (t or "STRING") for c, t in (columns or {}).items()}


def engine_error(exc: Exception) -> EngineError:
    from mesh_dagster.engine.session import spark_error_message

    return EngineError(spark_error_message(exc))
