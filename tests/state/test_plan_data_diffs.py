"""A plan's data diffs stored with its record (the `payload` JSON of `mesh_plans`: no schema
change), on SQLite and Postgres: attached after the apply without touching the record's status or
`updated_ts`, readable by records written before they existed, and shown by `mesh plans show`."""

from __future__ import annotations

from click.testing import CliRunner
from project_builder import CONFIG, write_project
from sqlalchemy import insert

from mesh_dagster.cli.main import cli
from mesh_dagster.context import Context
from mesh_dagster.core.plan.data_diff import DataDiff
from mesh_dagster.core.plan.review import PlanEvent, PlanRecord, PlanStatus, PlanSummary
from mesh_dagster.state import schema
from tests.execution.fake_engine import FakeEngine


def _diff(model: str, **values) -> DataDiff:
    return DataDiff(model=model, new_table=f"mesh__s.{model}__2", old_table=f"mesh__s.{model}__1",
                    old_environment="prod", grain=["id"], **values)


def _record(store, plan_id: str = "p1") -> PlanRecord:
    summary = PlanSummary(base_environment="prod", base_plan_id=None, execution_time=1, start=1, end=2,
                          data_diff_pending=["s.m"])
    record = PlanRecord(plan_id=plan_id, environment="dev", author="alice", created_ts=5, updated_ts=5,
                        summary=summary, events=[PlanEvent(action="create", actor="alice", ts=5,
                                                           status=PlanStatus.PENDING)])
    store.plans.save_plan_record(record)
    return record


def test_data_diffs_are_attached_to_the_record(store):
    _record(store)
    assert store.plans.get_plan_record("p1").summary.data_diff_pending == ["s.m"]
    first = store.plans.attach_data_diffs("p1", {"s.m": _diff("s.m", changed=1), "s.n": _diff("s.n", changed=2)})
    assert first is not None and first.updated_ts == 5 and first.status == PlanStatus.PENDING
    again = store.plans.attach_data_diffs("p1", {"s.m": _diff("s.m", changed=7)})  # a resumed apply's
    stored = store.plans.get_plan_record("p1").summary.data_diffs
    assert again is not None and {n: d.changed for n, d in stored.items()} == {"s.m": 7, "s.n": 2}
    assert stored["s.m"] == _diff("s.m", changed=7)
    assert store.plans.attach_data_diffs("nosuchplan", {"s.m": _diff("s.m")}) is None


def test_records_written_before_data_diffs_still_read(store, raw_engine):
    old_payload = ('{"base_environment": "prod", "base_plan_id": null, "execution_time": 1, "start": 1, '
                   '"end": 2, "changes": [], "diffs": {}}')
    with raw_engine.begin() as conn:
        conn.execute(insert(schema.plans).values(plan_id="old", environment="dev", status="completed",
                                                 payload=old_payload, author="bob", created_ts=1, updated_ts=1))
    record = store.plans.get_plan_record("old")
    assert record is not None and record.summary.data_diffs == {} and record.summary.data_diff_pending == []
    assert "Data diff" not in record.summary.markdown("dev")


def test_plans_show_draws_the_data_diff_as_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("MESH_USER", "alice@example.com")
    files = {"models/m.sql": "MODEL (name s.m, kind FULL, grain (id));\nSELECT 1 AS id, 2 AS v\n"}
    root = write_project(tmp_path / "p", files, CONFIG)
    ctx = Context(root, engine=FakeEngine())
    plan_id = ctx.reviews.record(ctx.plans.plan("dev", execution_time="2020-01-03")).plan_id
    runner = CliRunner()
    pending = runner.invoke(cli, ["--paths", str(root), "plans", "show", plan_id[:8]], obj={}).output
    assert "Data diff" not in pending  # a new model: nothing to compare with
    ctx.state.plans.attach_data_diffs(plan_id, {"s.m": _diff(
        "s.m", old_rows=10, new_rows=11, only_new=2, only_old=1, changed=3, unchanged=6, column_changes={"v": 3},
        columns_added=["w"], sample_columns=["id", "new v", "old v"], sample=[["1", "11", "[bold]10"]])})
    ctx.close()
    shown = runner.invoke(cli, ["--paths", str(root), "plans", "show", plan_id[:8]], obj={}).output
    table = next(line for line in shown.splitlines() if "s.m" in line and "10" in line and "11" in line)
    assert [cell.strip() for cell in table.strip("│┃ ").split("│")] == ["s.m", "id", "10", "11", "2", "1", "3", "6"]
    assert "Data diff: the new tables vs those of prod before the plan" in shown and "s.m: v changed in 3 rows; added w" in shown
    assert "[bold]10" in shown  # a value is never read as markup
    assert "**Data diff**" not in shown  # drawn as tables, not as the Markdown of the run pages
