"""A prod plan's review reuses the data diff a development plan computed, without Spark and without
the state store: which of its models could use one (`reuse_candidates`), which diff is taken
(`pick_reusable`: the same new table *and* the same old table, the most recently computed, one
that compared something), what the copy says about where it comes from, and the line a model with
none gets. The lookup in the state store: tests/state/test_prod_plan_data_diff_lookup.py."""

from __future__ import annotations

from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.plan.data_diff import (
    DataDiff,
    markdown,
    pick_reusable,
    reuse_candidates,
)
from mesh_dagster.core.plan.review import PlanRecord, PlanSummary
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.plans.data_diffs import reused_data_diffs
from tests.unit.test_plan_data_diff import dev_plan

NEW, OLD = "mesh__s.s__m__2", "mesh__s.s__m__1"
WANTED = {"s.m": (NEW, OLD)}
NOON = to_ms("2026-11-27 12:00:00")


def _diff(new: str = NEW, old: str = OLD, **values) -> DataDiff:
    return DataDiff(model="s.m", new_table=new, old_table=old, old_environment="prod", grain=["id"],
                    old_rows=10, new_rows=11, **values)


def test_a_prod_plan_wants_the_diffs_of_the_tables_its_apply_does_not_compare(tmp_path):
    prod = dev_plan(tmp_path, "prod")
    wanted = reuse_candidates(prod)
    assert set(wanted) == {"s.m", "s.n"}  # a view has no table of its own
    assert wanted["s.m"] == (prod.snapshots["s.m"].table_name, prod.previous["s.m"].table_name)
    assert reuse_candidates(dev_plan(tmp_path)) == {}  # a dev plan's apply computes its own


def test_the_same_new_and_old_tables_the_most_recent_wins():
    older, newer = _diff(changed=1, computed_ts=NOON), _diff(changed=2, computed_ts=NOON + 60_000)
    other_old = _diff(old="mesh__s.s__m__0", changed=3, computed_ts=NOON + 120_000)  # newest, another base
    other_new = _diff(new="mesh__s.s__m__3", changed=4, computed_ts=NOON + 180_000)
    found = [("aaaaaaaa11", "dev", 0, older), ("bbbbbbbb22", "dev2", 0, newer), ("cccccccc33", "dev", 0, other_old),
             ("dddddddd44", "dev", 0, other_new)]
    reused = pick_reusable(WANTED, "prod", found)
    (d,) = reused.values()
    assert (d.changed, d.source_plan_id, d.source_environment, d.computed_ts) == (2, "bbbbbbbb22", "dev2",
                                                                                 NOON + 60_000)
    assert d.old_environment == "prod" and newer.source_plan_id is None  # a copy: the dev record's is untouched
    assert pick_reusable(WANTED, "prod", [found[2], found[3]]) == {}  # another old table says nothing of this one


def test_a_diff_that_compared_nothing_is_not_reused_and_a_copy_keeps_its_origin():
    failed = _diff(status="failed", note="boom", computed_ts=NOON + 1)
    skipped = _diff(status="skipped", note="budget", computed_ts=NOON + 2)
    counts = _diff(status="counts only", computed_ts=NOON)
    assert pick_reusable(WANTED, "prod", [("f" * 10, "dev", 0, failed), ("s" * 10, "dev", 0, skipped)]) == {}
    assert pick_reusable(WANTED, "prod", [("f" * 10, "dev", 0, failed), ("c" * 10, "dev", 0, counts)])[
        "s.m"].source_plan_id == "c" * 10
    copy = pick_reusable(WANTED, "prod", [("c" * 10, "dev", 0, counts)])["s.m"]
    again = pick_reusable(WANTED, "prod", [("p" * 10, "prod", 0, copy)])["s.m"]  # an earlier prod record's copy
    assert (again.source_plan_id, again.source_environment) == ("c" * 10, "dev")


def test_a_diff_of_an_earlier_version_is_dated_by_its_apply():
    """Diffs recorded before `computed_ts` existed are dated by the end of their plan's apply."""
    reused = pick_reusable(WANTED, "prod", [("aaaaaaaa11", "dev", NOON, _diff(changed=1)),
                                            ("bbbbbbbb22", "dev", NOON - 1, _diff(changed=2))])
    assert (reused["s.m"].changed, reused["s.m"].computed_ts) == (1, NOON)


def test_the_reviewer_reads_where_and_when_a_reused_diff_was_computed():
    (d,) = pick_reusable(WANTED, "prod", [("0123456789abcdef", "dev", 0, _diff(
        note="no grain: counts only", status="counts only", computed_ts=NOON))]).values()
    expected = ("reused: computed by plan 01234567 in dev at 2026-11-27 12:00 UTC against the same prod table "
                "(its changes since then are not counted)")
    assert d.note_text() == f"no grain: counts only; {expected}"
    text = "\n".join(markdown({"s.m": d}, [], ["s.n"]))
    assert "**Data diff: the new tables vs those prod serves, computed by a development plan's apply" in text
    assert expected in text
    assert text.endswith("- `s.n`: no data diff: apply this change to a development environment first "
                         "(`mesh plan dev`), then plan again: the new plan's record shows the diff its apply computed")
    assert _diff().note_text() == ""  # a diff computed for its own plan says nothing of the kind


def test_a_model_without_a_diff_gets_its_line_in_every_summary():
    summary = PlanSummary(base_environment="prod", base_plan_id=None, execution_time=1, start=1, end=2,
                          data_diff_missing=["s.n"])
    line = "- `s.n`: no data diff: apply this change to a development environment first (`mesh plan dev`)"
    assert line in summary.markdown("prod") and line in summary.data_diff_markdown()
    assert line in summary.markdown("prod", data=False)  # `mesh plans show` draws only the diffs as tables
    assert summary.markdown("prod").count("**Data diff**") == 1
    assert "no data diff" not in PlanSummary.model_validate_json(
        summary.model_dump_json(exclude={"data_diff_missing"})).markdown("prod")
    assert markdown({}, [], []) == []


class Records:
    """Plan records as `reused_data_diffs` reads them; says what it was asked."""

    def __init__(self, records: list[PlanRecord]):
        self.records, self.asked = records, []

    def records_mentioning(self, texts, recent: int = 500) -> list[PlanRecord]:
        self.asked.append(list(texts))
        return self.records


def _record(plan_id: str, diffs: dict[str, DataDiff]) -> PlanRecord:
    summary = PlanSummary(base_environment="prod", base_plan_id=None, execution_time=1, start=1, end=2,
                          data_diffs=diffs)
    return PlanRecord(plan_id=plan_id, environment="dev", author="carol", created_ts=NOON, updated_ts=NOON,
                      summary=summary)


def test_the_state_is_asked_for_the_new_tables_of_a_prod_plan_only(tmp_path):
    assert reused_data_diffs(dev_plan(tmp_path), Records([]), DataDiffSettings()) == ({}, [])  # never asked: its apply diffs
    prod = dev_plan(tmp_path, "prod")
    new, old = prod.snapshots["s.m"].table_name, prod.previous["s.m"].table_name
    own = _record(prod.plan_id, {"s.m": _diff(new, old, changed=9, computed_ts=NOON + 1)})  # not its own
    records = Records([own, _record("d" * 10, {"s.m": _diff(new, old, changed=1)})])
    reused, missing = reused_data_diffs(prod, records, DataDiffSettings())
    assert missing == ["s.n"]
    assert records.asked == [sorted([new, prod.snapshots["s.n"].table_name])]
    assert (reused["s.m"].changed, reused["s.m"].source_plan_id, reused["s.m"].computed_ts) == (1, "d" * 10, NOON)
    # this prod plan still builds the new table (the dev apply's intervals are not in this state)
    assert reused["s.m"].note == ("this plan's apply still builds [full refresh] of the new table: what it writes "
                                  "is not in the diff")
    prod.backfills.clear()
    assert reused_data_diffs(prod, records, DataDiffSettings())[0]["s.m"].note is None
