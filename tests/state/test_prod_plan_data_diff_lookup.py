"""A protected prod plan's record carries the data diff a development plan's apply computed of the
same change, on SQLite and Postgres, from the state store only (the engine stands for Spark and is
never asked anything for it): the lookup among the latest records, the copy with its origin, the
line of a model none covers, `mesh plans show`, Dagster's metadata, and a later prod apply that
leaves the copies alone. On real Spark and Dagster: tests/dagster/test_prod_plan_data_diff.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import record_plan, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.context import Context
from mesh_dagster.core.plan.data_diff import DataDiff
from mesh_dagster.core.plan.review import PlanEvent, PlanRecord, PlanStatus, PlanSummary
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.dagster.jobs.reviews import data_diff_metadata
from tests.execution.fake_engine import FakeEngine
from tests.state.test_plan_reviews import PROTECTED

WHEN = "2020-01-03"
NOON = to_ms("2026-11-27 12:00:00")
MODELS = {"models/m.sql": "MODEL (name s.m, kind FULL, grain (id));\nSELECT 1 AS id, 2 AS v\n",
          "models/n.sql": "MODEL (name s.n, kind FULL);\nSELECT 1 AS id\n"}


def _changed_project(tmp_path: Path, state_url: str, config: str = PROTECTED) -> Context:
    """Prod serves the first version of both models (recorded without Spark); both are changed."""
    root = write_project(tmp_path / "p", MODELS, config)
    ctx = Context(root, state_url=state_url, engine=FakeEngine())
    record_plan(ctx.plans.plan(execution_time=WHEN), ctx.state)
    for name in ("m", "n"):
        path = root / "models" / f"{name}.sql"
        path.write_text(path.read_text().replace("SELECT 1 AS id", "SELECT 1 AS id, 7 AS extra"))
    ctx.reload()
    return ctx


def _save(ctx: Context, plan_id: str, created_ts: int, diffs: dict[str, DataDiff], environment: str = "dev") -> None:
    """A completed development plan whose apply attached `diffs`."""
    summary = PlanSummary(base_environment="prod", base_plan_id=None, execution_time=1, start=1, end=2)
    ctx.state.plans.save_plan_record(PlanRecord(
        plan_id=plan_id, environment=environment, author="carol", status=PlanStatus.COMPLETED, created_ts=created_ts,
        updated_ts=created_ts, summary=summary,
        events=[PlanEvent(action="create", actor="carol", ts=created_ts, status=PlanStatus.PENDING)]))
    ctx.state.plans.attach_data_diffs(plan_id, diffs)


def _diff(new: str, old: str, changed: int, computed_ts: int) -> DataDiff:
    return DataDiff(model="s.m", new_table=new, old_table=old, old_environment="prod", grain=["id"], old_rows=1,
                    new_rows=1, only_new=0, only_old=0, changed=changed, unchanged=1 - changed,
                    column_changes={"v": changed}, computed_ts=computed_ts)


def _plans_own_diff(plan, changed: int, computed_ts: int) -> DataDiff:
    """A diff of exactly `plan`'s comparison of s.m: its new table against the one served now."""
    return _diff(plan.snapshots["s.m"].table_name, plan.previous["s.m"].table_name, changed, computed_ts)


def test_a_prod_plan_reuses_the_most_recent_dev_diff_of_the_same_tables(tmp_path, state_url, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = _changed_project(tmp_path, state_url)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    new, old = plan.snapshots["s.m"].table_name, plan.previous["s.m"].table_name
    _save(ctx, "a0a0a0a0aa", 10, {"s.m": _diff(new, old, 1, NOON)})
    _save(ctx, "b1b1b1b1bb", 20, {"s.m": _diff(new, old, 0, NOON + 3_600_000)}, environment="feature_x")
    _save(ctx, "c2c2c2c2cc", 30, {"s.m": _diff(new, "mesh__s.s__m__other", 1, NOON + 7_200_000)})  # another base

    record = ctx.reviews.record(plan)
    (d,) = record.summary.data_diffs.values()
    assert (d.model, d.changed, d.source_plan_id, d.source_environment) == ("s.m", 0, "b1b1b1b1bb", "feature_x")
    assert "reused: computed by plan b1b1b1b1 in feature_x at 2026-11-27 13:00 UTC" in d.note_text()
    assert record.summary.data_diff_missing == ["s.n"] and record.summary.data_diff_pending == []
    assert ctx.reviews.records.find(plan.plan_id).summary == record.summary  # stored as shown

    metadata = data_diff_metadata(record)
    (row,) = metadata["data_diff"].value.records
    assert row.data["model"] == "s.m" and row.data["changed"] == 0 and "b1b1b1b1 in feature_x" in row.data["note"]
    assert "`s.n`: no data diff" in metadata["data_diff_details"].value
    summary = record.summary.markdown("prod")
    assert "b1b1b1b1 in feature_x" in summary and "`s.n`: no data diff" in summary


def test_plans_show_draws_the_reused_diff_and_the_line(tmp_path, monkeypatch):
    """The CLI reads the project's own state store (SQLite)."""
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = _changed_project(tmp_path, f"sqlite:///{tmp_path}/p/.mesh/state.db")
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    _save(ctx, "b1b1b1b1bb", 20, {"s.m": _plans_own_diff(plan, 1, NOON)})
    ctx.reviews.record(plan)
    ctx.close()
    shown = CliRunner().invoke(cli, ["--paths", str(tmp_path / "p"), "plans", "show", plan.plan_id[:8]],
                               obj={}).output
    flat = " ".join(shown.replace("│", " ").split())
    assert "Data diff: the new tables vs those prod serves, computed by a development plan's apply" in flat
    assert "s.m id 1 1 0 0 1 0" in flat and "b1b1b1b1 in dev at 2026-11-27 12:00 UTC" in flat
    assert "`s.n`: no data diff: apply this change to a development environment first" in flat


def test_a_later_prod_apply_keeps_the_reused_diff(tmp_path, state_url, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = _changed_project(tmp_path, state_url)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    _save(ctx, "a0a0a0a0aa", 10, {"s.m": _plans_own_diff(plan, 1, NOON)})
    recorded = ctx.reviews.record(plan)
    engine = ctx.engine
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(plan.plan_id, "approve")
    done = ctx.reviews.apply_recorded(plan.plan_id)
    assert done.status == PlanStatus.COMPLETED
    stored = ctx.reviews.records.find(plan.plan_id).summary
    assert stored.data_diffs == recorded.summary.data_diffs and stored.data_diff_missing == ["s.n"]
    assert not any(c.method == "fetchall" for c in engine.calls)  # nothing was diffed on the engine


def test_nothing_is_looked_up_for_a_dev_plan_or_with_data_diffs_off(tmp_path, state_url, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = _changed_project(tmp_path, state_url)
    dev = ctx.plans.plan("dev", execution_time=WHEN)
    _save(ctx, "a0a0a0a0aa", 10, {"s.m": _plans_own_diff(dev, 1, NOON)})
    record = ctx.reviews.record(dev)  # its own apply computes its diff
    assert (record.summary.data_diffs, record.summary.data_diff_missing) == ({}, [])
    assert sorted(record.summary.data_diff_pending) == ["s.m", "s.n"]
    ctx.close()
    off = _changed_project(tmp_path / "off", state_url, PROTECTED + "plan:\n  data_diff:\n    enabled: false\n")
    summary = off.reviews.record(off.plans.plan("prod", execution_time=WHEN)).summary
    assert (summary.data_diffs, summary.data_diff_missing) == ({}, [])
    assert "Data diff" not in summary.markdown("prod")


def test_the_lookup_reads_only_the_latest_records_that_mention_a_table(store):
    def save(plan_id: str, created_ts: int, table: str) -> None:
        summary = PlanSummary(base_environment="prod", base_plan_id=None, execution_time=1, start=1, end=2,
                              data_diffs={"s.m": _diff(table, "mesh__s.s__m__1", 1, created_ts)})
        store.plans.save_plan_record(PlanRecord(plan_id=plan_id, environment="dev", author="carol",
                                                created_ts=created_ts, updated_ts=created_ts, summary=summary))

    save("old", 1, "mesh__s.s__m__2")
    save("mid", 2, "mesh__s.s__m__2")
    save("new", 3, "mesh__s.s__m__2")
    save("other", 4, "mesh__s.s__m__3")
    save("like", 5, "mesh__s.s__mx_2")  # `_` in a table's name is not a wildcard
    assert [r.plan_id for r in store.plans.records_mentioning(["mesh__s.s__m__2"])] == ["new", "mid", "old"]
    assert [r.plan_id for r in store.plans.records_mentioning(["mesh__s.s__m__2"], recent=4)] == ["new", "mid"]
    assert [r.plan_id for r in store.plans.records_mentioning(["mesh__s.s__m__2", "mesh__s.s__m__3"], recent=3)] == [
        "other", "new"]
    assert store.plans.records_mentioning([]) == []


@pytest.mark.parametrize("status", ["failed", "skipped"])
def test_a_diff_that_compared_nothing_leaves_the_line(tmp_path, state_url, monkeypatch, status):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    ctx = _changed_project(tmp_path, state_url)
    plan = ctx.plans.plan("prod", execution_time=WHEN)
    diff = DataDiff(model="s.m", new_table=plan.snapshots["s.m"].table_name, old_table=plan.previous["s.m"].table_name,
                    old_environment="prod", status=status, note="boom")
    _save(ctx, "a0a0a0a0aa", 10, {"s.m": diff})
    summary = ctx.reviews.record(plan).summary
    assert summary.data_diffs == {} and summary.data_diff_missing == ["s.m", "s.n"]
