"""PlanOptions (core/plan/options.py): typed, frozen, strict about names, and the record form of
earlier versions still loads."""

import pytest
from pydantic import ValidationError

from mesh_dagster.core.plan.options import PlanOptions
from mesh_dagster.core.plan.review import PlanRecord, PlanSummary
from mesh_dagster.core.snapshots.snapshot import ChangeCategory


def test_unknown_option_fails_and_options_are_frozen():
    with pytest.raises(TypeError, match="unknown plan option"):
        PlanOptions.of(start="2020-01-01", bogus=1)
    options = PlanOptions(no_gaps=True)
    with pytest.raises(ValidationError):
        options.no_gaps = False  # type: ignore[misc]


def test_recorded_form_round_trips_and_keeps_only_what_was_given():
    options = PlanOptions(execution_time="2020-01-05", choices={"s.a": ChangeCategory.NON_BREAKING},
                          allow_destructive=frozenset({"s.b", "s.a"}), select_models=("tag:x",), from_commit="abc")
    recorded = options.recorded()
    assert recorded == {"execution_time": "2020-01-05", "choices": {"s.a": "NON_BREAKING"},
                        "allow_destructive": ["s.a", "s.b"], "select_models": ["tag:x"], "from_commit": "abc"}
    assert PlanOptions.from_record(recorded) == options
    rebuilt = options.rebuilding(1578182400000)
    assert rebuilt.from_commit is None and rebuilt.execution_time == 1578182400000
    assert "from_commit" not in rebuilt.recorded()


def test_a_record_written_by_the_previous_version_loads_its_options():
    stored = {"start": None, "end": None, "execution_time": None, "create_from": "prod", "include_unmodified": None,
              "skip_backfill": False, "empty_backfill": False, "forward_only": False, "effective_from": None,
              "allow_destructive": [], "allow_additive": ["s.a"], "select_models": [], "backfill_models": [],
              "min_intervals": 0, "no_gaps": False, "choices": {"s.a": "BREAKING"}, "from_commit": "f00"}
    record = PlanRecord(plan_id="p", environment="prod", author="me", created_ts=1, updated_ts=1,
                        summary=PlanSummary(base_environment=None, base_plan_id=None, execution_time=1, start=1, end=1,
                                            options=stored))
    options = PlanRecord.model_validate_json(record.model_dump_json()).plan_options
    assert options.allow_additive == frozenset({"s.a"}) and options.choices == {"s.a": ChangeCategory.BREAKING}
    assert options.from_commit == "f00"
    restated = PlanRecord(**{**record.model_dump(), "summary": PlanSummary(
        base_environment=None, base_plan_id=None, execution_time=1, start=1, end=1,
        options={"restate": ["s.a"], "start": "2020-01-01", "end": None})}).plan_options
    assert restated.restate == ("s.a",) and restated.start == "2020-01-01"
