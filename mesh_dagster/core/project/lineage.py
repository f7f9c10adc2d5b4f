"""A model's column lineage in the project: each output column's upstream columns, by model name.

The query's own lineage (core/sql/lineage.py) names the tables the rendered query reads; here those
become models, and an EMBEDDED model (inlined into its readers, never a table) is looked through
to the columns it reads itself. A Python model has no query: its declared `columns` and
`depends_on` give lineage only where they say it, a declared column that exactly one of the
`depends_on` models outputs under that name; without declared columns or `depends_on` it has none.
Seeds and external tables have no upstream.

A column missing from the result is one whose upstream is not known; an empty tuple, a column
known to read nothing (a literal, a seed's column). None: nothing is known about the model.
Computed on demand and kept for the project's life (building Dagster's definitions caches it on
disk by snapshot, dagster/mapping/graph.py); a snapshot keeps its model's when it is stored
(core/snapshots/capture.py), which an environment serving that version shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.syntax import lookup
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.lineage import ColumnRef, Lineage, query_lineage
from mesh_dagster.core.sql.renderer import RenderContext, render_query

if TYPE_CHECKING:
    from mesh_dagster.core.project.project import Project

_MAX_EMBEDDING_DEPTH = 32

__all__ = ["ColumnRef", "Lineage", "column_upstream", "model_lineage"]


def model_lineage(project: Project, name: str) -> Lineage | None:
    """The model's output columns -> their upstream columns (model name, column), memoized."""
    memo = project.lineage_memo
    if name not in memo:
        memo[name] = _model_lineage(project, project.models[name], 0)
    return memo[name]


def column_upstream(project: Project, name: str, column: str) -> tuple[ColumnRef, ...] | None:
    """One column's upstream columns (None when not known); an error names a column the model
    does not output."""
    key = column.strip().strip("`").lower()
    columns = project.columns(name)
    found = model_lineage(project, name)
    known = list(columns or {}) or list(found or {})
    if key not in known:
        model = project.models[name]
        shown = ", ".join(known[:20]) or "none known"
        raise ModelError(f"Model {name} has no column '{column}' (its columns: {shown})", model.path, model.line)
    return (found or {}).get(key)


def _model_lineage(project: Project, model: Model, depth: int) -> Lineage | None:
    kind = model.kind
    if kind.seed is not None or kind.is_external:
        return {c.lower(): () for c in project.columns(model.name) or {}}
    if model.is_python:
        return _python_lineage(project, model)
    if model.query is None:
        return None
    direct = project.output(model.name).lineage  # a plain SELECT's, found while loading
    if direct is None:
        schemas = project.parent_schemas(model.name)
        repo = project.repo_of(model.name)
        tree = render_query(model, RenderContext(variables=repo.variables, schemas=schemas), repo.macros)
        direct = query_lineage(tree, schemas)
    if direct is None:
        return None
    return _through_models(project, model, direct, depth)


def _through_models(project: Project, model: Model, direct: Lineage, depth: int) -> Lineage:
    """Tables as models, EMBEDDED models looked through; a column reading an embedded column whose
    upstream is unknown is left out (unknown too). The model's own table (a self-referencing
    model reads its previous state) is no upstream."""
    out: Lineage = {}
    for column, refs in direct.items():
        found = _upstream(project, model, refs, depth)
        if found is not None:
            out[column] = tuple(sorted(found))
    return out


def _upstream(project: Project, model: Model, refs: tuple[ColumnRef, ...], depth: int) -> set[ColumnRef] | None:
    found: set[ColumnRef] = set()
    for ref in refs:
        upstream = lookup(project.models, ref.table)
        if upstream is None:
            found.add(ref)  # read, but no model declares it (an implicit external has a model)
        elif upstream.kind.is_inlined:
            inner = _embedded(project, upstream, depth)
            through = None if inner is None else inner.get(ref.column)
            if through is None:
                return None
            found.update(through)
        elif upstream.name != model.name:
            found.add(ColumnRef(upstream.name, ref.column))
    return found


def _embedded(project: Project, model: Model, depth: int) -> Lineage | None:
    if depth >= _MAX_EMBEDDING_DEPTH:
        raise ModelError(f"Embedded model {model.name} is nested too deeply (does it reference itself?)",
                         model.path, model.line)
    memo = project.lineage_memo
    if model.name not in memo:
        memo[model.name] = _model_lineage(project, model, depth + 1)
    return memo[model.name]


def _python_lineage(project: Project, model: Model) -> Lineage | None:
    """Declared columns that exactly one `depends_on` model outputs under the same name; nothing
    when the model declares no columns or no `depends_on`, or a parent's columns are unknown."""
    if model.columns is None or not model.depends_on:
        return None
    parents: dict[str, set[str]] = {}
    for dep in model.depends_on:
        parent = lookup(project.models, dep.lower())
        if parent is None or parent.kind.is_inlined:
            return None
        columns = project.columns(parent.name)
        if columns is None:
            return None
        parents[parent.name] = {c.lower() for c in columns}
    out: Lineage = {}
    for column in model.columns:
        key = column.lower()
        having = [name for name, columns in parents.items() if key in columns]
        if len(having) == 1:
            out[key] = (ColumnRef(having[0], key),)
    return out
