"""The data diff of a development plan, computed once its apply has built the new tables.

For each directly modified model with a table (core/plan/data_diff.py `diff_candidates`), the new
version's physical table is compared with the physical table the environment served before the
plan: on the model's grain, rows only in one side, rows changed, per-column change counts and a
few differing rows (the queries `mesh table_diff` runs, core/snapshots/table_diff.py).

What it reads, and no more: those two tables of each diffed model, read only. The old one is
the target's table (for a new environment, prod's by default): the one table of prod a dev plan
would not read anyway, read on purpose because the review is about how the new data differs from
it. Physical tables are read, never the environments' views, so a promotion meanwhile cannot
make the diff compare something else. Bounds (`plan.data_diff` in config.yaml):
- rows: above `max_rows` rows on either side, only the keys whose hash falls in the first
  `max_rows / rows` of the hash space are compared: the same keys on both sides, so the counts are
  those of a sample of whole rows (the record says which fraction). Counting the rows and hashing
  the keys still read both tables once; the join and what it collects stay within the bound.
- time: no query starts once `timeout_s` has passed since the first; what was not compared says
  so. A query that started runs to its end (Spark is not interrupted), bounded by the rows.
A failing query marks that model's diff failed with the error: a diff never fails the apply.

What the sample rows keep (core/plan/diff_samples.py): values of columns named like secrets or
personal data are masked as the rows are read, keys included, before anything stores them; the
models `no_samples` selects keep no rows. No failure note keeps a value its error quotes either
(Spark quotes the value a cast failed on, and a compared column may be a secret one).

A plan whose apply computes no diff (prod's) is given, when it is recorded, the diffs development
plans computed of the same new tables against the tables it serves now (`reused_data_diffs`):
looked up among the latest plan records in the state store, never by reading a table. A copy keeps
its rows only if they were masked as this project masks now.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection
from typing import NamedTuple, Protocol

from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.models.kinds import IncrementalByTimeRangeKind
from mesh_dagster.core.plan.data_diff import (
    COUNTS_ONLY,
    FAILED,
    SKIPPED,
    DataDiff,
    diff_candidates,
    pick_reusable,
    reuse_candidates,
)
from mesh_dagster.core.plan.diff_samples import SampleRows
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.plan.review import PlanRecord
from mesh_dagster.core.plan.selectors import ModelIndex
from mesh_dagster.core.snapshots.table_diff import diff_counts_query, key_sample, table_diff_queries
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import ms_to_datetime, now_ms
from mesh_dagster.core.time.intervals import Interval, format_interval_range
from mesh_dagster.core.time.time_column import find_type, interval_condition
from mesh_dagster.execution.ports import Engine

logger = logging.getLogger(__name__)
_QUOTED = re.compile(r"'[^']*'")  # a value Spark quotes in an error message (a failed cast's)


class TimeBudgetSpent(Exception):
    """`plan.data_diff.timeout_s` passed: no further query starts."""


class _Budget:
    def __init__(self, seconds: float, clock: Callable[[], float]):
        self._clock = clock
        self._deadline = clock() + seconds
        self.seconds = seconds

    def check(self) -> None:
        if self._clock() >= self._deadline:
            raise TimeBudgetSpent(f"not compared: the time budget (plan.data_diff.timeout_s: {self.seconds:g}) "
                                  "was spent")


def plan_data_diffs(plan: Plan, engine: Engine, settings: DataDiffSettings,
                    clock: Callable[[], float] = time.monotonic) -> dict[str, DataDiff]:
    """The data diff of each model `plan` changed directly in a development environment (empty
    for prod, or when `plan.data_diff.enabled` is false)."""
    if not settings.enabled:
        return {}
    budget = _Budget(settings.timeout_s, clock)
    old_environment = plan.base_environment.name if plan.base_environment else (plan.create_from or "prod")
    rows = SampleRows.per_model(settings, ModelIndex.of_snapshots(plan.snapshots))
    out = {}
    for name in diff_candidates(plan):
        new, old = plan.snapshots[name], plan.previous[name]
        diff = DataDiff(model=name, new_table=new.table_name, old_table=old.table_name,
                        old_environment=old_environment, grain=list(new.model.grain))
        started = clock()
        try:
            window = preview_window(plan, name)
            _compare(diff, engine, settings.max_rows, budget, window, rows[name])
            if name in plan.previews and window is None and diff.note is None:
                diff.note = "preview of a forward-only change: built over its preview range only"
        except TimeBudgetSpent as e:
            diff.status, diff.note = SKIPPED, str(e)
        except Exception as e:  # noqa: BLE001 - a diff reports its failure, it never fails the apply
            message = _QUOTED.sub("'***'", str(e))
            logger.warning("The data diff of %s failed: %s", name, message)
            diff.status, diff.note = FAILED, (message.splitlines() or [type(e).__name__])[0][:300]
        diff.seconds = round(clock() - started, 3)
        diff.computed_ts = now_ms()
        out[name] = diff
    return out


class PlanRecordsReader(Protocol):
    """What reusing a diff reads of the plan records (state/plans.py has it)."""

    def records_mentioning(self, texts: Collection[str], recent: int = ...) -> list[PlanRecord]: ...


def reused_data_diffs(plan: Plan, records: PlanRecordsReader,
                      settings: DataDiffSettings) -> tuple[dict[str, DataDiff], list[str]]:
    """For a plan whose apply computes no diff of some of its new tables (prod's), the diffs that
    other plans' applies computed of exactly those comparisons (core/plan/data_diff.py
    `pick_reusable`), and the models none has: from the state store only, no table is read. Their
    rows only where this project's settings would have kept them, as masked as it masks."""
    wanted = reuse_candidates(plan)
    if not wanted:
        return {}, []
    found = [(r.plan_id, r.environment, r.updated_ts, d)
             for r in records.records_mentioning(sorted({new for new, _ in wanted.values()}))
             if r.plan_id != plan.plan_id for d in r.summary.data_diffs.values()]
    reused = pick_reusable(wanted, plan.environment, found)
    rows = SampleRows.per_model(settings, ModelIndex.of_snapshots(plan.snapshots))
    for name, diff in reused.items():
        _note_backfill(plan, name, diff)
        rows[name].withhold(diff)
    return reused, sorted(n for n in wanted if n not in reused)


def _note_backfill(plan: Plan, name: str, diff: DataDiff) -> None:
    """The new table was compared as it was then: what this plan's apply still writes into it (a
    range a dev plan limited with --start/--end left out, intervals due since) is not in it."""
    backfill = plan.backfills.get(name)
    if plan.skip_backfill or backfill is None or not backfill.intervals:
        return
    built = backfill.describe(plan.snapshots[name].model.interval_unit)
    diff.note = "; ".join(t for t in (diff.note, f"this plan's apply still builds {built} of the new table: "
                                                 "what it writes is not in the diff") if t)


class PreviewWindow(NamedTuple):
    """The rows a forward-only preview was built for: its time column within its preview range."""

    kind: IncrementalByTimeRangeKind
    unit: IntervalUnit
    intervals: list[Interval]

    def condition(self, columns: dict[str, str]) -> str:
        column = self.kind.time_column
        start, end = min(i[0] for i in self.intervals), max(i[1] for i in self.intervals)
        between = interval_condition(column, ms_to_datetime(start), ms_to_datetime(end), find_type(columns, column),
                                     self.kind.time_column_format)
        return between.sql(dialect="spark")

    def note(self) -> str:
        return (f"preview of a forward-only change: rows of `{self.kind.time_column}` in "
                f"{format_interval_range(self.intervals, self.unit)} (its preview range) compared")


def preview_window(plan: Plan, name: str) -> PreviewWindow | None:
    """A forward-only preview holds only its preview range: comparing it with all of the old
    table would count every older row as removed. Both sides are cut to that range when the model
    has a time column to cut on (other kinds' previews are compared whole, and say so)."""
    backfill = plan.backfills.get(name)
    model = plan.snapshots[name].model
    if name not in plan.previews or backfill is None or not backfill.intervals or model.kind.time_range is None:
        return None
    return PreviewWindow(model.kind.time_range, model.interval_unit, list(backfill.intervals))


def _compare(diff: DataDiff, engine: Engine, max_rows: int, budget: _Budget, window: PreviewWindow | None,
             rows: SampleRows) -> None:
    if diff.new_table == diff.old_table:
        diff.status, diff.note = SKIPPED, "one table for both (the change keeps the model's table)"
        return
    budget.check()
    for table in (diff.new_table, diff.old_table):
        if not engine.catalog.table_exists(table):
            diff.status, diff.note = SKIPPED, f"{table} does not exist (nothing built yet)"
            return
    new_cols, old_cols = engine.catalog.columns(diff.new_table), engine.catalog.columns(diff.old_table)
    diff.columns_added = [c for c in new_cols if c not in old_cols]
    diff.columns_removed = [c for c in old_cols if c not in new_cols]
    new_src, old_src = diff.new_table, diff.old_table
    if window is not None:
        new_src = f"(SELECT * FROM {new_src} WHERE {window.condition(new_cols)})"
        old_src = f"(SELECT * FROM {old_src} WHERE {window.condition(old_cols)})"
        diff.note = window.note()
    budget.check()
    (new_rows, old_rows), = engine.session.fetchall(f"SELECT (SELECT COUNT(*) FROM {new_src}), "
                                                    f"(SELECT COUNT(*) FROM {old_src})")
    diff.new_rows, diff.old_rows = int(new_rows), int(old_rows)
    keys = [k for k in diff.grain if k in new_cols and k in old_cols]
    if not diff.grain or keys != diff.grain:
        diff.status = COUNTS_ONLY
        diff.add_note("no grain: counts only" if not diff.grain else "grain not in both tables: counts only")
        return
    columns = [c for c in new_cols if c in old_cols and c not in keys]
    compared = _compare_rows(diff, engine, max_rows, budget, columns, (new_src, old_src))
    if rows.limit:
        budget.check()
        _sample(diff, engine, columns, compared, rows)
    elif rows.off:
        diff.add_note(rows.off)


def _compare_rows(diff: DataDiff, engine: Engine, max_rows: int, budget: _Budget,
                  columns: list[str], sources: tuple[str, str]) -> tuple[str, str]:
    """Pair the rows on the grain (within a sample of keys above `max_rows`); the sources compared."""
    keys = diff.grain
    new_src, old_src = sources
    largest = max(diff.new_rows or 0, diff.old_rows or 0)
    if largest > max_rows:
        diff.sampled = max_rows / largest
        new_src, old_src = key_sample(new_src, keys, diff.sampled), key_sample(old_src, keys, diff.sampled)
    budget.check()
    only_new, only_old, paired, changed, *per_column = engine.session.fetchall(
        diff_counts_query(new_src, old_src, keys, columns))[0]
    diff.only_new, diff.only_old, diff.changed = int(only_new or 0), int(only_old or 0), int(changed or 0)
    diff.unchanged = int(paired or 0) - diff.changed
    diff.column_changes = {c: int(n or 0) for c, n in zip(columns, per_column)}
    return new_src, old_src


def _sample(diff: DataDiff, engine: Engine, columns: list[str], sources: tuple[str, str], rows: SampleRows) -> None:
    """A few differing rows, masked as they are read: nothing stores a masked value."""
    keys = diff.grain
    diff.sample_columns = keys + [f"{side} {c}" for c in columns for side in ("new", "old")]
    diff.masked_columns = rows.mask.hidden(keys + columns)
    sample = table_diff_queries(*sources, keys, columns).sample(rows.limit)
    # fetchall, not a DataFrame: pandas would show a nullable int as a float
    diff.sample = [rows.shown(keys, columns, row) for row in engine.session.fetchall(sample)]
