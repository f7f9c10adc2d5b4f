"""The compatibility suite's verdicts (benchmarks/compat_sqlmesh.py): each model's rows compared
as multisets (numbers equal to 1e-6, relative for large ones), each edit's change categories, each
unit test's outcome; printed as Markdown tables. Standard library only."""

from __future__ import annotations

import json
from typing import Any

TOLERANCE = 1e-6
SAMPLE = 200  # characters of a differing row shown


def same_value(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))
    return type(a) is type(b) and a == b


def unmatched(left: list[list[Any]], right: list[list[Any]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """Rows of each side without a partner on the other (multiset difference, tolerant numbers)."""
    rest = list(right)
    only_left = []
    for row in left:
        for i, other in enumerate(rest):
            if all(same_value(a, b) for a, b in zip(row, other)):
                del rest[i]
                break
        else:
            only_left.append(row)
    return only_left, rest


def _shown(columns: list[str], row: list[Any]) -> str:
    return json.dumps(dict(zip(columns, row)), default=str)[:SAMPLE]


def _column_diffs(columns: list[str], ref_rows: list[list[Any]], our_rows: list[list[Any]]) -> str:
    """When the first column is a key of both sides with the same values: which columns differ,
    with one example each (else "")."""
    ref_keys, our_keys = [r[0] for r in ref_rows], [r[0] for r in our_rows]
    if len(set(map(str, ref_keys))) != len(ref_keys) or sorted(map(str, ref_keys)) != sorted(map(str, our_keys)):
        return ""
    ours_by_key = {str(r[0]): r for r in our_rows}
    found = []
    for i, column in enumerate(columns[1:], start=1):
        for row in ref_rows:
            other = ours_by_key[str(row[0])]
            if not same_value(row[i], other[i]):
                found.append(f"{column} (e.g. {columns[0]}={row[0]}: SQLMesh {row[i]!r}, ours {other[i]!r})")
                break
    return "column " + ", ".join(found) if found else ""


def compare_rows(ref: dict[str, Any], ours: dict[str, Any]) -> tuple[str, str]:
    """(verdict, detail) of two dumps that both hold a table."""
    ref_cols = [c.lower() for c in ref["columns"]]
    our_cols = [c.lower() for c in ours["columns"]]
    if sorted(ref_cols) != sorted(our_cols):
        return "differ", f"columns: SQLMesh {ref_cols}, ours {our_cols}"
    order = [our_cols.index(c) for c in ref_cols]
    our_rows = [[row[i] for i in order] for row in ours["rows"]]
    only_ref, only_ours = unmatched(ref["rows"], our_rows)
    if not only_ref and not only_ours:
        return "match", ""
    by_column = _column_diffs(ref_cols, ref["rows"], our_rows)
    if by_column:
        return "differ", by_column
    parts = [f"{len(ref['rows'])} rows vs {len(our_rows)} ours"]
    if only_ref:
        parts.append(f"{len(only_ref)} only in SQLMesh, e.g. {_shown(ref_cols, only_ref[0])}")
    if only_ours:
        parts.append(f"{len(only_ours)} only in ours, e.g. {_shown(ref_cols, only_ours[0])}")
    return "differ", "; ".join(parts)


REFUSED = "ours refused the project (see above)"


def model_verdict(ref: dict[str, Any] | None, ours: dict[str, Any] | None, ours_error: str | None) -> tuple[str, str]:
    if ours is None:
        return "error", REFUSED if ours_error else "ours has no such model"
    if ref is None:
        return "extra", "only ours has this model"
    if ref.get("error") and ours.get("error"):
        if ref["error"] == ours["error"] == "no table (EMBEDDED)":
            return "n/a", "EMBEDDED: no table (checked through its children)"
        return "error", f"SQLMesh: {ref['error']}; ours: {ours['error']}"
    if ref.get("error"):
        return "error", f"SQLMesh: {ref['error']}"
    if ours.get("error"):
        return "error", ours["error"]
    verdict, detail = compare_rows(ref, ours)
    if ours.get("note"):
        detail = f"{detail} (ours: {ours['note']})".strip()
    return verdict, detail


def rows_of(dump: dict[str, Any] | None) -> str:
    return str(len(dump["rows"])) if dump and "rows" in dump else "-"


def model_table(ref: dict[str, Any], ours: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    lines = ["| model | kind | rows ours | rows SQLMesh | result |", "|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    ref_models, our_models = ref.get("models", {}), ours.get("models", {})
    apply = ours.get("apply") or {}
    for name in sorted({*ref_models, *our_models}):
        r, o = ref_models.get(name), our_models.get(name)
        verdict, detail = model_verdict(r, o, ours.get("error"))
        if verdict == "error" and o is not None and not apply.get("ok", True):
            detail = f"{detail} (apply failed: {apply.get('message')})"
        counts[verdict] = counts.get(verdict, 0) + 1
        kind = (r or o or {}).get("kind", "?")
        text = verdict + (f": {detail}" if detail else "")
        lines.append(f"| {name} | {kind} | {rows_of(o)} | {rows_of(r)} | {_cell(text)} |")
    return lines, counts


def edit_table(ref: dict[str, Any], ours: dict[str, Any], edits: list[str]) -> tuple[list[str], dict[str, int]]:
    """One row per model either tool says the edit changes; a plan one tool refuses is one
    `error` row with its message, then SQLMesh's categories with `-` for ours."""
    lines = ["| edit | model | SQLMesh | ours | result |", "|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    for edit in edits:
        r, o = ref.get("edits", {}).get(edit, {}), ours.get("edits", {}).get(edit, {})
        skipped = next((e for e in (r.get("error"), o.get("error")) if str(e).startswith("skipped")), None)
        if skipped:
            lines.append(f"| {edit} | - | - | - | {_cell(str(skipped))} |")
            counts["skipped"] = counts.get("skipped", 0) + 1
            continue
        if r.get("error") or o.get("error"):
            ours_text = REFUSED if ours.get("error") and o.get("error") == ours["error"] else o.get("error") or "ok"
            text = f"error: SQLMesh: {r.get('error') or 'ok'}; ours: {ours_text}"
            lines.append(f"| {edit} | (plan) | - | - | {_cell(text)} |")
            counts["error"] = counts.get("error", 0) + 1
        rc, oc = r.get("categories", {}), o.get("categories", {})
        for name in sorted({*rc, *oc}):
            verdict = "match" if rc.get(name) == oc.get(name) else "differ"
            if o.get("error") or r.get("error"):
                verdict = "error"
            else:
                counts[verdict] = counts.get(verdict, 0) + 1
            lines.append(f"| {edit} | {name} | {rc.get(name, '-')} | {oc.get(name, '-')} | {verdict} |")
        if not rc and not oc and not (r.get("error") or o.get("error")):
            lines.append(f"| {edit} | (no change) | - | - | match |")
    return lines, counts


def test_table(ref: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    lines = ["| test | SQLMesh | ours |", "|---|---|---|"]
    rt, ot = ref.get("tests", {}), ours.get("tests", {})
    for name in sorted({*rt, *ot}):
        lines.append(f"| {name} | {_outcome(rt.get(name))} | {_outcome(ot.get(name))} |")
    return lines


def _outcome(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    return "pass" if result["ok"] else _cell(f"FAIL: {result['message']}")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
