"""Audit queries: user audits from `audits/` or inline, and the built-in ones.

An audit fails when its query returns rows. Built-ins are plain SQL templates over
`@this_model`, so they go through the same renderer (and interval filter) as user audits.
"""

from __future__ import annotations

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.model import Audit, AuditRef, Model


def _items(text: str | None) -> list[str]:
    """`(a, b)` or `a` → ['a', 'b'] (top-level commas only)."""
    if not text:
        return []
    text = text.strip()
    if text.startswith(("(", "[")) and text.endswith((")", "]")):
        text = text[1:-1]
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur.strip())
    return items


def _require(args: dict[str, str], key: str, name: str, model: Model) -> str:
    if key not in args:
        raise ModelError(f"Audit '{name}' needs the argument `{key} := ...`", model.path, model.line)
    return args[key]


def builtin_audit_sql(name: str, args: dict[str, str], model: Model) -> str | None:
    base = name.removesuffix("_non_blocking")
    cond = args.get("condition")
    where = f" AND ({cond})" if cond else ""
    if base == "not_null":
        cols = _items(_require(args, "columns", name, model))
        return f"SELECT * FROM @this_model WHERE ({' OR '.join(f'{c} IS NULL' for c in cols)}){where}"
    if base == "unique_values":
        cols = _items(_require(args, "columns", name, model))
        parts = [f"SELECT '{c}' AS column_name, {c} AS value FROM @this_model WHERE TRUE{where} "
                 f"GROUP BY {c} HAVING COUNT(*) > 1" for c in cols]
        return " UNION ALL ".join(parts)
    if base == "accepted_values":
        col = _require(args, "column", name, model)
        values = ", ".join(_items(_require(args, "is_in", name, model)))
        return f"SELECT * FROM @this_model WHERE {col} NOT IN ({values}){where}"
    if base == "number_of_rows":
        threshold = _require(args, "threshold", name, model)
        return f"SELECT 1 FROM (SELECT COUNT(*) AS n FROM @this_model WHERE TRUE{where}) AS c WHERE n < {threshold}"
    if base == "forall":
        criteria = _items(_require(args, "criteria", name, model))
        return f"SELECT * FROM @this_model WHERE NOT ({' AND '.join(f'({c})' for c in criteria)}){where}"
    if base == "at_least_one":
        col = _require(args, "column", name, model)
        return f"SELECT 1 FROM (SELECT COUNT({col}) AS n FROM @this_model WHERE TRUE{where}) AS c WHERE n = 0"
    return None


def is_blocking(ref: AuditRef, audits: dict[str, Audit]) -> bool:
    """The attachment wins, then the audit's own setting, then the built-in's name."""
    if ref.blocking is not None:
        return ref.blocking
    audit = audits.get(ref.name)
    if audit is not None:
        return audit.blocking
    return not ref.name.endswith("_non_blocking")


def audit_query(ref: AuditRef, model: Model, audits: dict[str, Audit], ctx, macros) -> tuple[str, bool]:
    """Rendered Spark SQL of an audit attached to a model, and whether it blocks."""
    from mesh_dagster.core.renderer import render_audit

    blocking = is_blocking(ref, audits)
    audit = audits.get(ref.name)
    if audit is not None:
        args = {**audit.defaults, **ref.args}
        return render_audit(audit.query, audit.dialect, args, model, ctx, macros), blocking
    sql = builtin_audit_sql(ref.name, ref.args, model)
    if sql is None:
        raise ModelError(f"Unknown audit '{ref.name}'", model.path, model.line)
    return render_audit(sql, "spark", {}, model, ctx, macros), blocking
