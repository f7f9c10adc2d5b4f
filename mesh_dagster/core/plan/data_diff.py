"""What a development plan's data diff holds, and how a reviewer reads it.

A plan is recorded before its apply builds anything, so the data of a new model version does not
exist when the plan is made: the diff is computed once the apply has built the new tables
(execution/data_diffs.py) and attached to the plan's record. Until then the record says it is
pending. Each directly modified model's new table is compared with the table the environment
served before the plan (its target's, or for a new environment the one it is created from, prod by
default) on the model's grain; a model without a grain gets row counts only (no key pairs its
rows). The values shown are user data: they are made printable and fenced like the text diffs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from mesh_dagster.core.config.display import markdown_code
from mesh_dagster.core.config.names import PROD

if TYPE_CHECKING:
    from mesh_dagster.core.plan.plan import Plan

# Why a model's diff has no row comparison (DataDiff.status).
COMPARED = "compared"
COUNTS_ONLY = "counts only"  # no grain: no key pairs the rows of the two tables
SKIPPED = "skipped"  # nothing to compare (see note)
FAILED = "failed"  # a query failed: the note says why; the apply itself is not affected


class DataDiff(BaseModel):
    """One model's new table against the table its environment served before the plan."""

    model: str
    new_table: str
    old_table: str
    old_environment: str  # where the old table is served (the plan's target, or where it started from)
    grain: list[str] = Field(default_factory=list)
    status: str = COMPARED
    note: str | None = None
    new_rows: int | None = None
    old_rows: int | None = None
    only_new: int | None = None  # keys only in the new table (within the sample, if sampled)
    only_old: int | None = None
    changed: int | None = None  # keys in both whose other columns differ
    unchanged: int | None = None
    column_changes: dict[str, int] = Field(default_factory=dict)  # column -> changed values among paired keys
    columns_added: list[str] = Field(default_factory=list)
    columns_removed: list[str] = Field(default_factory=list)
    sampled: float | None = None  # the fraction of keys compared, when the tables exceeded max_rows
    sample_columns: list[str] = Field(default_factory=list)
    sample: list[list[str]] = Field(default_factory=list)  # differing rows, values as text
    seconds: float = 0.0

    def note_text(self) -> str:
        """What qualifies the numbers: why there are none, or the sample they come from."""
        if self.status in (SKIPPED, FAILED):
            return f"{self.status}: {self.note or ''}"
        sample = f"{self.sampled:.2%} sample of keys" if self.sampled is not None else ""
        return "; ".join(t for t in (self.note, sample) if t)

    def headline(self) -> str:
        """One line: what changed, for lists and tables."""
        if self.status in (SKIPPED, FAILED):
            return f"{self.status}: {self.note or ''}"
        counts = f"{_n(self.old_rows)} → {_n(self.new_rows)} rows"
        if self.status == COUNTS_ONLY:
            return f"no grain: counts only ({counts})"
        shown = (f"{counts}; only new {_n(self.only_new)}, only old {_n(self.only_old)}, "
                 f"changed {_n(self.changed)}, unchanged {_n(self.unchanged)}")
        return shown + (f" (in a {self.sampled:.2%} sample of keys)" if self.sampled is not None else "")


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def diff_candidates(plan: Plan) -> list[str]:
    """The models whose data a plan's review diffs: the directly modified models with a table of
    their own (not views, embedded or external models) in a development environment, and a new
    table to compare (a metadata-only change keeps its table: nothing to diff). A prod plan's is
    never diffed: its apply is what changes prod, after the review."""
    if plan.environment == PROD:
        return []
    out = []
    for name in plan.directly_modified:
        snapshot, before = plan.snapshots[name], plan.previous.get(name)
        kind = snapshot.model.kind
        if before is not None and before.table_name != snapshot.table_name and kind.is_materialized \
                and not kind.is_symbolic and not kind.is_external:
            out.append(name)
    return out


def diff_title(diffs: dict[str, DataDiff]) -> str:
    """What the new tables were compared with."""
    old = sorted({d.old_environment for d in diffs.values()})
    return f"Data diff: the new tables vs those of {', '.join(old)} before the plan"


def markdown(diffs: dict[str, DataDiff], pending: list[str]) -> list[str]:
    """The data diff section of a plan summary (Markdown lines; none when nothing is diffed)."""
    if not diffs and not pending:
        return []
    if not diffs:
        names = ", ".join(markdown_code(n) for n in pending)
        return ["", "**Data diff**", "", f"Pending for {names}: computed once the apply has built the new tables."]
    lines = ["", f"**{diff_title(diffs)}**", ""]
    lines += ["| Model | Grain | Rows (old → new) | Only new | Only old | Changed | Unchanged | Note |",
              "|---|---|---|---|---|---|---|---|"]
    for d in diffs.values():
        note = _cell(d.note_text()) if d.note_text() else ""
        lines.append(f"| {_cell(d.model)} | {_cell(', '.join(d.grain) or 'none')} | {_n(d.old_rows)} → "
                     f"{_n(d.new_rows)} | {_n(d.only_new)} | {_n(d.only_old)} | {_n(d.changed)} | "
                     f"{_n(d.unchanged)} | {note} |")
    for d in diffs.values():
        lines += _details(d)
    return lines


def _details(d: DataDiff) -> list[str]:
    out = []
    changed = {c: n for c, n in d.column_changes.items() if n}
    if changed or d.columns_added or d.columns_removed:
        out += ["", f"{markdown_code(d.model)}: " + "; ".join(
            [f"{markdown_code(c)} changed in {n:,} rows" for c, n in changed.items()]
            + [f"added {', '.join(markdown_code(c) for c in d.columns_added)}"] * bool(d.columns_added)
            + [f"removed {', '.join(markdown_code(c) for c in d.columns_removed)}"] * bool(d.columns_removed))]
    if d.sample:
        out += ["", "| " + " | ".join(_cell(c) for c in d.sample_columns) + " |",
                "|" + "---|" * len(d.sample_columns)]
        out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in d.sample]
    return out


def _cell(text: str) -> str:
    """User text as a table cell: code (Markdown in it is not read), a `|` cannot start another cell."""
    return markdown_code(text).replace("|", "\\|")
