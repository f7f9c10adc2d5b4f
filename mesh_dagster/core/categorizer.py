"""Change categories: what a change means for data already built.

Only added projections that keep the row count are non-breaking; everything else a query change
can do is breaking. The check walks the old and new trees in lockstep and stops descending as
soon as two subtrees are equal, so it costs little even on very large queries — unlike a general
tree diff, whose cost explodes with query size.
"""

from __future__ import annotations

import difflib

from sqlglot import exp, parse_one

from mesh_dagster.core.model import KindName, Model
from mesh_dagster.core.snapshot import ChangeCategory, Snapshot

_UDTF = (exp.Explode, exp.Posexplode, exp.Inline, exp.Unnest, exp.ExplodeOuter)
_BREAKING = (ChangeCategory.BREAKING, ChangeCategory.INDIRECT_BREAKING)


def parse_rendered(sql: str) -> exp.Expression:
    return parse_one(sql, read="spark")


def only_projection_additions(old: exp.Expression, new: exp.Expression) -> bool:
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
        if isinstance(old, exp.Select) and key == "expressions":
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
    added: list[exp.Expression] = []
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


def _has_aggregate(node: exp.Expression) -> bool:
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


def categorize_direct(new: Snapshot, old: Snapshot) -> ChangeCategory | None:
    """Category of a directly changed model, or None when only metadata changed.

    Both snapshots must carry their `rendered_query` (None for seeds and external models).
    """
    nm, om = new.model, old.model
    if new.fingerprint.data_hash == old.fingerprint.data_hash and new.rendered_query == old.rendered_query:
        # Same text and same rendering; a `SELECT *` child whose parent gained a column has the
        # same text but a different (expanded) rendering, and is a direct change.
        return None
    if nm.kind.name != om.kind.name:
        return ChangeCategory.BREAKING
    if nm.kind.name == KindName.SEED:
        return ChangeCategory.BREAKING
    if nm.kind.name == KindName.EXTERNAL:
        old_cols, new_cols = om.columns or {}, nm.columns or {}
        if all(new_cols.get(c) == t for c, t in old_cols.items()):
            return ChangeCategory.NON_BREAKING
        return ChangeCategory.BREAKING
    non_query_same = _non_query_values(nm) == _non_query_values(om)
    if new.rendered_query is None or old.rendered_query is None:
        return ChangeCategory.BREAKING
    if new.rendered_query == old.rendered_query:
        # Same rendered SQL: a formatting/comment change, or a physical-only change
        # (partitioning, storage format, stamp) that needs a new table but no downstream work.
        return None if non_query_same else ChangeCategory.NON_BREAKING
    if nm.kind.lookback != om.kind.lookback:
        return ChangeCategory.BREAKING
    if only_projection_additions(parse_rendered(old.rendered_query), parse_rendered(new.rendered_query)):
        return ChangeCategory.NON_BREAKING
    return ChangeCategory.BREAKING


def _non_query_values(model: Model) -> tuple:
    return (model.kind.data_hash_values(), model.columns, model.partitioned_by, model.storage_format, model.stamp,
            model.pre_statements, model.post_statements)


def categorize_indirect(changed_parent_categories: list[ChangeCategory]) -> ChangeCategory:
    """Category of a model changed only through its parents (only *direct* parents count)."""
    if not changed_parent_categories:
        return ChangeCategory.INDIRECT_BREAKING
    if any(c in _BREAKING for c in changed_parent_categories):
        return ChangeCategory.INDIRECT_BREAKING
    if all(c == ChangeCategory.METADATA for c in changed_parent_categories):
        return ChangeCategory.METADATA
    return ChangeCategory.INDIRECT_NON_BREAKING


def text_diff(old: str | None, new: str | None, name: str) -> str:
    """Unified diff of two model definitions (as written), like the seed's plan output."""
    lines = difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(), lineterm="", n=3)
    return "\n".join(lines)
