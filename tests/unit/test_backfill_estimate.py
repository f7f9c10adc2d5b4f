"""A plan's backfill estimated from the timings of earlier batches (core/plan/estimate.py): given
durations, the numbers and how sure they are follow."""

from __future__ import annotations

import pytest

from mesh_dagster.core.plan.estimate import BatchTiming, Sureness, Work, duration_text, estimate


def timings(name: str, version: str, sizes_seconds: list[tuple[int, float]], full: bool = False) -> list[BatchTiming]:
    return [BatchTiming(name, version, units, seconds, full) for units, seconds in sizes_seconds]


def test_this_versions_steady_daily_batches_estimate_more_daily_batches_surely() -> None:
    history = {"s.a": timings("s.a", "v1", [(1, 2.0), (1, 2.2), (1, 1.8), (1, 2.0)])}
    found = estimate([Work("s.a", "v1", (1,) * 10, False)], history)
    assert found.models["s.a"].seconds == pytest.approx(20.0)
    assert (found.sureness, found.total_s, found.unknown) == (Sureness.HIGH, pytest.approx(20.0), [])
    assert found.line() == "Estimated backfill: 20s of work (high confidence, 1 model(s) from earlier batches)"
    assert found.known and found.took(24.2) == "Backfill took 25s of work; estimated 20s (high confidence)"
    assert not estimate([Work("s.b", "v1", (1,), False)], history).known  # nothing to go by: nothing said


def test_batches_of_several_sizes_fit_a_fixed_part_and_a_part_per_interval() -> None:
    history = {"s.a": timings("s.a", "v1", [(1, 3.0), (10, 12.0), (1, 3.0), (10, 12.0)])}  # 2s fixed + 1s a day
    found = estimate([Work("s.a", "v1", (30,), False)], history)
    assert found.models["s.a"].seconds == pytest.approx(32.0)
    assert found.models["s.a"].sureness == Sureness.HIGH  # both sizes seen: fitted, not guessed


def test_another_batch_size_than_ever_timed_is_scaled_and_said_to_be_a_guess() -> None:
    history = {"s.a": timings("s.a", "v1", [(1, 2.0)] * 5)}
    found = estimate([Work("s.a", "v1", (31,), False)], history)
    assert found.models["s.a"].seconds == pytest.approx(62.0) and found.models["s.a"].sureness == Sureness.LOW


def test_earlier_versions_then_parents_then_nothing() -> None:
    history = {"s.a": timings("s.a", "v1", [(1, 4.0)] * 3), "s.p": timings("s.p", "p1", [(1, 0.5)] * 3)}
    work = [Work("s.a", "v2", (1, 1), False), Work("s.new", "n1", (1,), False, ("s.p",)),
            Work("s.lone", "l1", (1,), False)]
    found = estimate(work, history)
    assert (found.models["s.a"].seconds, found.models["s.a"].sureness) == (pytest.approx(8.0), Sureness.MEDIUM)
    assert found.models["s.a"].basis == "3 batch(es) of earlier versions"
    assert (found.models["s.new"].seconds, found.models["s.new"].sureness) == (pytest.approx(0.5), Sureness.LOW)
    assert found.models["s.lone"].seconds is None and found.unknown == ["s.lone"]
    assert found.total_s == pytest.approx(8.5) and found.sureness == Sureness.MEDIUM  # the large part decides
    assert "1 model(s) with no timings to go by" in found.line()


def test_full_refreshes_are_estimated_from_full_refreshes_only() -> None:
    history = {"s.f": timings("s.f", "v1", [(1, 30.0), (1, 34.0), (1, 32.0)], full=True)
               + timings("s.f", "v1", [(1, 1.0)])}
    found = estimate([Work("s.f", "v1", (1,), True)], history)
    assert found.models["s.f"].seconds == pytest.approx(32.0)


@pytest.mark.parametrize("seconds, shown", [(0.2, "1s"), (42, "42s"), (185, "3m 05s"), (3725, "1h 02m")])
def test_durations_read_as_people_write_them(seconds: float, shown: str) -> None:
    assert duration_text(seconds) == shown
