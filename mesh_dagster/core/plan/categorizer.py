"""Change categories: what a change means for data already built.

Only added projections that keep the row count are non-breaking; everything else a query change
can do is breaking. The check walks the old and new trees in lockstep and stops descending as
soon as two subtrees are equal, so it costs little even on very large queries — unlike a general
tree diff, whose cost explodes with query size. Queries that differ only in how they are written
are recognised in canonical form (core/sql/canonical.py), built only when the raw trees disagree.
When unsure, the answer is BREAKING: a change called breaking costs a rebuild, a change wrongly
called non-breaking leaves wrong data downstream.
"""

from __future__ import annotations

import difflib

from sqlglot import exp

from mesh_dagster.core.models.model import Model
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot
from mesh_dagster.core.sql.canonical import Schemas, canonical_query, parse_query

_UDTF = (exp.Explode, exp.Posexplode, exp.Inline, exp.Unnest, exp.ExplodeOuter)
_BREAKING = (ChangeCategory.BREAKING, ChangeCategory.INDIRECT_BREAKING)


def only_projection_additions(old: exp.Expr, new: exp.Expr) -> bool:
    """True when `new` equals `old` but for projections added safely to some SELECTs."""
    return old != new and _compatible(old, new)


def _compatible(old, new) -> bool:
    if old == new:
        return True
    if isinstance(old, list) or isinstance(new, list):
        if not (isinstance(old, list) and isinstance(new, list)) or len(old) != len(new):
            return False
        return all(_compatible(a, b) for a, b in zip(old, new))
    if not isinstance(old, exp.Expression) or not isinstance(new, exp.Expression) or type(old) is not type(new):
        return False
    keys = set(old.args) | set(new.args)
    for key in keys:
        a, b = old.args.get(key), new.args.get(key)
        if isinstance(old, exp.Select) and isinstance(new, exp.Select) and key == "expressions":
            if not _projections_added_safely(old, new):
                return False
        elif not _compatible(_norm(a), _norm(b)):
            return False
    return True


def _norm(value):
    """Missing args and empty lists/False are the same thing in sqlglot trees."""
    if value in (None, False, []):
        return None
    return value


def _projections_added_safely(old: exp.Select, new: exp.Select) -> bool:
    before, after = old.expressions, new.expressions
    i = 0
    inserted_before_existing = False
    added: list[exp.Expr] = []
    for projection in after:
        if i < len(before) and (projection == before[i] or _compatible(before[i], projection)):
            i += 1
            continue
        if i < len(before):
            inserted_before_existing = True
        added.append(projection)
    if i != len(before) or not added:
        return not added and i == len(before)
    if old.args.get("distinct"):
        return False
    aggregated = bool(old.args.get("group")) or any(_has_aggregate(p) for p in before)
    for projection in added:
        if isinstance(projection, exp.Star) or projection.find(exp.Star) and not projection.find(exp.Count):
            return False
        if projection.find(*_UDTF):
            return False
        if not aggregated and _has_aggregate(projection):
            return False
    if inserted_before_existing and _uses_ordinals(old):
        return False
    return True


def _has_aggregate(node: exp.Expr) -> bool:
    for agg in node.find_all(exp.AggFunc):
        if not agg.find_ancestor(exp.Window, exp.Subquery):
            return True
    return False


def _uses_ordinals(select: exp.Select) -> bool:
    for key in ("group", "order"):
        clause = select.args.get(key)
        if clause and any(isinstance(e, exp.Literal) and e.is_int for e in clause.expressions
                          if not isinstance(e, exp.Ordered)) or (
            clause and any(isinstance(e, exp.Ordered) and isinstance(e.this, exp.Literal) and e.this.is_int
                           for e in clause.expressions)
        ):
            return True
    return False


def categorize_direct(new: Snapshot, old: Snapshot, schemas: Schemas | None = None) -> ChangeCategory | None:
    """Category of a directly changed model, or None when only metadata changed.

    Both snapshots must carry their `rendered_query` (None for seeds and external models).
    `schemas` are the parents' columns (`Project.parent_schemas`): with them, queries that differ
    only in how they are written (`id` / `id AS id`, `col` / `src.col`, ordinals) are compared in
    canonical form (see core/sql/canonical.py).

    Snapshots stored by earlier versions hold the same plain rendering (`rendered_query` has never
    held a canonical form): both sides are canonicalized here, at comparison time, from that text,
    so old state compares exactly like new state. A stored rendering that cannot be parsed or
    qualified any more (e.g. written by an older sqlglot) is compared strictly: BREAKING.
    """
    nm, om = new.model, old.model
    if _unit_change(om, nm):
        return ChangeCategory.BREAKING
    if new.fingerprint.data_hash == old.fingerprint.data_hash and new.rendered_query == old.rendered_query:
        # Same text and same rendering; a `SELECT *` child whose parent gained a column has the
        # same text but a different (expanded) rendering, and is a direct change.
        return None
    if breaking_kind_change(om, nm) or _materialization_code(new) != _materialization_code(old):
        return ChangeCategory.BREAKING  # (a CUSTOM model's materialization is code writing its rows, as Python's)
    if nm.is_python or om.is_python:
        # What Python code computes cannot be compared (SQLMesh: undeterminable, so breaking).
        return ChangeCategory.BREAKING
    if nm.kind.is_external:  # someone else's table: only the columns it is declared with can change
        return ChangeCategory.NON_BREAKING if _columns_kept(om.columns, nm.columns) else ChangeCategory.BREAKING
    if not nm.kind.has_query or new.rendered_query is None or old.rendered_query is None:
        return ChangeCategory.BREAKING  # nothing to compare (a seed's new content is new rows)
    return _worst(_query_change(old.rendered_query, new.rendered_query, schemas or {}), _settings_change(om, nm))


def _materialization_code(snapshot: Snapshot) -> list[str] | None:
    stored = snapshot.capture.materialization if snapshot.capture is not None else None
    return stored.hash_values() if stored is not None else None


def _unit_change(old: Model, new: Model) -> bool:
    """A new interval unit (a cron `@daily` → `@hourly`, or `interval_unit` written) changes what
    each batch computes (`@start_ds` means another range) and what the recorded intervals mean.
    Writing the unit the cron implies anyway changes nothing."""
    has_intervals = not (old.kind.is_timeless or new.kind.is_timeless or old.kind.is_symbolic)
    return has_intervals and old.interval_unit != new.interval_unit


def breaking_kind_change(old: Model, new: Model) -> bool:
    """A change of kind is breaking whatever the query does, except from one kind keeping history
    to another (incremental to incremental) with the same partitioning: then the table's rows
    still mean the same, and the query and settings decide, as for any change."""
    if old.kind.name == new.kind.name:
        return False
    keeps_history = old.kind.is_incremental and new.kind.is_incremental
    return not (keeps_history and old.effective_partitioned_by == new.effective_partitioned_by)


def _query_change(old_sql: str, new_sql: str, schemas: Schemas) -> ChangeCategory | None:
    """None when the queries compute the same thing, else NON_BREAKING or BREAKING.

    The raw trees are tried first (cheap, and enough for most edits); only when they neither
    match nor differ by safe additions are both sides canonicalized.
    """
    if old_sql == new_sql:
        return None
    old, new = parse_query(old_sql), parse_query(new_sql)
    if old is None or new is None:
        return ChangeCategory.BREAKING
    if only_projection_additions(old, new):
        return ChangeCategory.NON_BREAKING
    old_c, new_c = canonical_query(old, schemas), canonical_query(new, schemas)
    if old_c is None or new_c is None:
        return ChangeCategory.BREAKING
    if old_c == new_c:
        return None
    return ChangeCategory.NON_BREAKING if only_projection_additions(old_c, new_c) else ChangeCategory.BREAKING


def _settings_change(old: Model, new: Model) -> ChangeCategory | None:
    """What a change of the settings outside the query does to the data.

    Settings that decide *which* rows a table holds or their types (the kind's `row_settings`: time
    column, its format and lookback, unique key and merge clauses, an SCD type 2 key and validity
    columns; declared column types, pre/post statements) are breaking when they change: SQLMesh calls them
    non-breaking when the query is unchanged, which lets children keep data built on other rows.
    Physical settings (partitioning, storage format, a VIEW materialized as a table, a stamp) need
    a new table for this model only: non-breaking.
    """
    data = (_row_settings(old, new), _statement_keys(old.pre_statements), _statement_keys(old.post_statements))
    if data != (_row_settings(new, old), _statement_keys(new.pre_statements), _statement_keys(new.post_statements)):
        return ChangeCategory.BREAKING
    if not _columns_kept(old.columns, new.columns):
        return ChangeCategory.BREAKING
    if _physical_settings(old) != _physical_settings(new) or (old.columns or {}) != (new.columns or {}):
        return ChangeCategory.NON_BREAKING
    return None


def _row_settings(model: Model, other: Model) -> tuple:
    """The kind's settings deciding which rows its table holds; compared only between models of
    one kind (a change of kind passed `breaking_kind_change` already)."""
    return model.kind.row_settings() if model.kind.name == other.kind.name else ()


def _physical_settings(model: Model) -> tuple:
    return (model.kind.data_hash_values(), model.partitioned_by, model.storage_format, model.stamp)


def _statement_keys(statements: list[str]) -> list[str]:
    """Statements as sqlglot writes them (comments and formatting do not count), else as written."""
    keys = []
    for statement in statements:
        tree = parse_query(statement)
        keys.append(tree.sql(dialect="spark", comments=False) if tree is not None else statement.strip())
    return keys


def _columns_kept(old: dict[str, str] | None, new: dict[str, str] | None) -> bool:
    """Every previously declared column is still declared, with the same type (additions are fine)."""
    new = new or {}
    return all(new.get(column) == kind for column, kind in (old or {}).items())


def _worst(*categories: ChangeCategory | None) -> ChangeCategory | None:
    """The most severe of direct categories (None = nothing changed < NON_BREAKING < BREAKING)."""
    if ChangeCategory.BREAKING in categories:
        return ChangeCategory.BREAKING
    if ChangeCategory.NON_BREAKING in categories:
        return ChangeCategory.NON_BREAKING
    return None


def categorize_indirect(changed_parent_categories: list[ChangeCategory]) -> ChangeCategory:
    """Category of a model changed only through its parents.

    The categories given are what each changed parent passes downstream (`downstream_category`),
    so a breaking change anywhere above arrives here as breaking, whatever lies in between.
    """
    if not changed_parent_categories:
        return ChangeCategory.INDIRECT_BREAKING
    if any(c in _BREAKING for c in changed_parent_categories):
        return ChangeCategory.INDIRECT_BREAKING
    if all(c == ChangeCategory.METADATA for c in changed_parent_categories):
        return ChangeCategory.METADATA
    return ChangeCategory.INDIRECT_NON_BREAKING


def downstream_category(category: ChangeCategory, parent_categories: list[ChangeCategory]) -> ChangeCategory:
    """What a changed model passes to its children: its own category, unless something above it
    broke, in which case its children must be rebuilt too, whatever its own change was.

    SQLMesh lets a directly non-breaking model stop a breaking change above it ("A breaking + B
    non-breaking => C indirect non-breaking"): C then keeps rows computed from A's old data.
    Here every model below a breaking change is indirectly breaking, through any path.
    """
    if category not in _BREAKING and any(c in _BREAKING for c in parent_categories):
        return ChangeCategory.INDIRECT_BREAKING
    return category


def text_diff(old: str | None, new: str | None, name: str) -> str:
    """Unified diff of two model definitions (as written), like the seed's plan output."""
    lines = difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(), lineterm="", n=3)
    return "\n".join(lines)
