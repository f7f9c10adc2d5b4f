"""What a development plan's data diff holds, and how a reviewer reads it.

A plan is recorded before its apply builds anything, so the data of a new model version does not
exist when the plan is made: the diff is computed once the apply has built the new tables
(execution/plans/data_diffs.py) and attached to the plan's record. Until then the record says it is
pending. Each directly modified model's new table is compared with the table the environment
served before the plan (its target's, or for a new environment the one it is created from, prod by
default) on the model's grain; a model without a grain gets row counts only (no key pairs its
rows). The values shown are user data: they are made printable and fenced like the text diffs, and
those of columns named like secrets or personal data are masked when the sample is taken
(core/config/masking.py); the models `plan.data_diff.no_samples` selects keep no rows at all
(core/plan/diff_samples.py).

A plan whose apply computes no diff (prod's: its apply is what changes prod, after the review)
reuses one a development plan computed for the same comparison — the same new table against the
table this environment serves now (`reuse_candidates`, `pick_reusable`): copied with where and
when it was computed, read from the state store only. A model with none says how to get one. A
copy keeps its rows only if they were masked as this project masks now (`SampleRows.withhold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from mesh_dagster.core.config.display import markdown_code
from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.time.dates import ms_to_datetime

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
    # The columns whose values `sample` shows as *** (None: no sample, or one of an earlier version,
    # taken before masking existed).
    masked_columns: list[str] | None = None
    seconds: float = 0.0
    computed_ts: int | None = None  # when it was computed (epoch ms; None in records of earlier versions)
    # Set on a copy reused by a plan whose apply computes no diff: the plan that computed it, where.
    source_plan_id: str | None = None
    source_environment: str | None = None

    def note_text(self) -> str:
        """What qualifies the numbers: why there are none, or the sample they come from, and for a
        reused diff where and when it was computed."""
        if self.status in (SKIPPED, FAILED):
            return f"{self.status}: {self.note or ''}"
        sample = f"{self.sampled:.2%} sample of keys" if self.sampled is not None else ""
        masked = f"values of {', '.join(self.masked_columns)} masked" if self.sample and self.masked_columns else ""
        return "; ".join(t for t in (self.note, sample, masked, self.source_text()) if t)

    def add_note(self, text: str | None) -> None:
        self.note = "; ".join(t for t in (self.note, text) if t) or None

    def source_text(self) -> str:
        """Where a reused diff comes from and how old it is (the old table may have changed since)."""
        if self.source_plan_id is None:
            return ""
        when = _when(self.computed_ts)
        return (f"reused: computed by plan {self.source_plan_id[:8]} in {self.source_environment}"
                f"{f' at {when}' if when else ''} against the same {self.old_environment} table (its changes "
                "since then are not counted)")

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


def _when(ts: int | None) -> str:
    return "" if ts is None else ms_to_datetime(ts).strftime("%Y-%m-%d %H:%M UTC")


def diff_candidates(plan: Plan) -> list[str]:
    """The models whose data a plan's review diffs: the directly modified models with a table of
    their own (not views, embedded or external models) in a development environment, and a new
    table to compare (a metadata-only change keeps its table: nothing to diff). A prod plan's is
    never diffed: its apply is what changes prod, after the review."""
    if plan.environment == PROD:
        return []
    return table_changes(plan)


def reuse_candidates(plan: Plan) -> dict[str, tuple[str, str]]:
    """The models of `plan` with a new table to compare that its apply will not diff (all of a
    prod plan's): {model: (its new table, the table the environment serves now)}, the comparison a
    diff computed elsewhere must have made to be shown here."""
    computed = set(diff_candidates(plan))
    return {n: (plan.snapshots[n].table_name, plan.previous[n].table_name)
            for n in table_changes(plan) if n not in computed}


def pick_reusable(wanted: dict[str, tuple[str, str]], environment: str,
                  found: Iterable[tuple[str, str, int, DataDiff]]) -> dict[str, DataDiff]:
    """For each model of `wanted` ({model: (new table, old table)}), a copy of the most recently
    computed diff among `found` ((plan id, its environment, when its apply ended, diff)) that made
    exactly that comparison — one against another old table says nothing about this one — and
    compared something (skipped or failed ones do not count). The copy says where it comes from; a
    copy of a copy keeps the first one's origin."""
    best: dict[str, DataDiff] = {}
    for plan_id, source_environment, ended_ts, diff in found:
        if wanted.get(diff.model) != (diff.new_table, diff.old_table) or diff.status not in (COMPARED, COUNTS_ONLY):
            continue
        copy = diff.model_copy(deep=True, update={"old_environment": environment})
        if copy.source_plan_id is None:
            copy.source_plan_id, copy.source_environment = plan_id, source_environment
        copy.computed_ts = copy.computed_ts if copy.computed_ts is not None else ended_ts
        held = best.get(diff.model)
        if held is None or (copy.computed_ts or 0) > (held.computed_ts or 0):
            best[diff.model] = copy
    return best


def table_changes(plan: Plan) -> list[str]:
    """The directly modified models with a table of their own whose new version has a new table."""
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
    if any(d.source_plan_id for d in diffs.values()):
        return (f"Data diff: the new tables vs those {', '.join(old)} serves, computed by a development "
                "plan's apply (see each note)")
    return f"Data diff: the new tables vs those of {', '.join(old)} before the plan"


NO_DIFF = ("no data diff: apply this change to a development environment first (`mesh plan dev`), then plan "
           "again: the new plan's record shows the diff its apply computed")


def _missing_markdown(missing: list[str]) -> list[str]:
    """A line per model whose data no diff shows (nothing computed it yet): how to get one."""
    return [f"- {markdown_code(n)}: {NO_DIFF}" for n in missing]


def markdown(diffs: dict[str, DataDiff], pending: list[str], missing: list[str] | None = None) -> list[str]:
    """The data diff section of a plan summary (Markdown lines; none when nothing is diffed)."""
    lines = _diff_markdown(diffs, pending)
    if missing:
        lines += (["", "**Data diff**"] if not lines else []) + [""] + _missing_markdown(missing)
    return lines


def _diff_markdown(diffs: dict[str, DataDiff], pending: list[str]) -> list[str]:
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
