"""`run_tasks`, the one place work runs concurrently: dependency order, limits, and what a failure
stops. Pure Python, no engine: tasks are functions that log when they start and finish."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from mesh_dagster.execution.intervals.tasks import run_tasks

Item = tuple[str, int]  # (key, index)


class Log:
    """What ran, in which order, on which thread; `hold` makes chosen items wait for a barrier,
    which only passes when that many items are in flight at once."""

    def __init__(self, hold: dict[Item, threading.Barrier] | None = None, fail: set[Item] | None = None,
                 seconds: float = 0.0, slow: dict[Item, float] | None = None):
        self.events: list[tuple[str, Item]] = []
        self.threads: set[str] = set()
        self.hold = hold or {}
        self.fail = fail or set()
        self.seconds = seconds
        self.slow = slow or {}
        self.running: dict[str, int] = {}
        self.most_running: dict[str, int] = {}
        self.lock = threading.Lock()

    def work(self, item: Item) -> str:
        with self.lock:
            self.events.append(("start", item))
            self.threads.add(threading.current_thread().name)
            self.running[item[0]] = self.running.get(item[0], 0) + 1
            self.most_running[item[0]] = max(self.most_running.get(item[0], 0), self.running[item[0]])
        try:
            if item in self.hold:
                self.hold[item].wait(timeout=10)  # BrokenBarrierError unless they overlap
            time.sleep(self.slow.get(item, self.seconds))
            if item in self.fail:
                raise ValueError(f"{item} failed")
            return f"result {item}"
        finally:
            with self.lock:
                self.running[item[0]] -= 1

    def accept(self, reject: set[Item] = frozenset()) -> Callable[[Item, str], bool]:  # type: ignore[assignment]
        def done(item: Item, result: str) -> bool:
            assert result == f"result {item}"
            self.events.append(("done", item))
            return item not in reject

        return done

    def index(self, what: str, item: Item) -> int:
        return self.events.index((what, item))

    def started(self) -> set[Item]:
        return {item for what, item in self.events if what == "start"}

    def handed_over(self) -> set[Item]:
        return {item for what, item in self.events if what == "done"}


def key(item: Item) -> str:
    return item[0]


def test_one_at_a_time_runs_in_order_on_the_callers_thread() -> None:
    log = Log()
    items = [("a", 1), ("b", 1), ("a", 2)]
    run_tasks(items, key, log.work, log.accept(), waits_for={"b": {"a"}}, limit=1)
    assert log.events == [(w, i) for i in items for w in ("start", "done")]
    assert log.threads == {threading.current_thread().name}


def test_independent_keys_run_at_once_and_results_come_back_on_the_callers_thread() -> None:
    barrier = threading.Barrier(2)
    log = Log(hold={("a", 1): barrier, ("b", 1): barrier})
    done_threads: set[str] = set()
    accept = log.accept()

    def done(item: Item, result: str) -> bool:
        done_threads.add(threading.current_thread().name)
        return accept(item, result)

    run_tasks([("a", 1), ("b", 1)], key, log.work, done, limit=2)
    assert not barrier.broken
    assert log.handed_over() == {("a", 1), ("b", 1)}
    assert threading.current_thread().name not in log.threads
    assert done_threads == {threading.current_thread().name}


def test_a_key_starts_only_after_every_item_it_waits_for_was_accepted() -> None:
    # a's first item and c's only one pass their barrier only if both run at once: c never waits for
    # a (a 10 ms head start was a race on a loaded machine)
    barrier = threading.Barrier(2)
    log = Log(seconds=0.01, hold={("a", 1): barrier, ("c", 1): barrier})
    items = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1), ("d", 1)]
    # d reads b and c; b reads a; c reads nothing
    run_tasks(items, key, log.work, log.accept(), waits_for={"b": {"a"}, "d": {"b", "c"}}, limit=4,
              per_key=lambda _: 3)
    assert log.handed_over() == set(items)
    for parent, child in [("a", "b"), ("b", "d"), ("c", "d")]:
        last_accepted = max(log.index("done", i) for i in items if i[0] == parent)
        assert log.index("start", (child, 1)) > last_accepted, (parent, child, log.events)
    assert not barrier.broken and log.index("start", ("c", 1)) < log.index("done", ("a", 1))  # c never waited for a


def test_the_limits_hold_overall_and_per_key() -> None:
    log = Log(seconds=0.02)
    # c has the most items: it still has some queued when a and b run out, so it reaches its own limit
    items = [(k, i) for i in range(12) for k in ("a", "b", "c") if k == "c" or i < 6]
    in_flight: list[int] = []
    accept = log.accept()

    def done(item: Item, result: str) -> bool:
        in_flight.append(sum(log.running.values()))
        return accept(item, result)

    run_tasks(items, key, log.work, done, limit=4, per_key=lambda k: {"a": 1, "b": 2}.get(k, 3))
    assert log.handed_over() == set(items)
    assert log.most_running == {"a": 1, "b": 2, "c": 3}
    assert max(in_flight) <= 4


def test_a_rejected_result_stops_new_work_but_running_work_is_still_handed_over() -> None:
    barrier = threading.Barrier(2)
    log = Log(hold={("a", 1): barrier, ("b", 1): barrier}, slow={("b", 1): 0.3})
    items = [("a", 1), ("b", 1), ("c", 1), ("d", 1)]
    run_tasks(items, key, log.work, log.accept(reject={("a", 1)}), waits_for={"d": {"a"}}, limit=2)
    assert log.started() == {("a", 1), ("b", 1)}  # c and d never start
    assert log.handed_over() == {("a", 1), ("b", 1)}  # b ran beside a: its result still counts


def test_a_failing_task_is_raised_after_the_running_ones_were_handed_over() -> None:
    barrier = threading.Barrier(2)
    log = Log(hold={("a", 1): barrier, ("b", 1): barrier}, fail={("a", 1)}, slow={("b", 1): 0.3})
    with pytest.raises(ValueError, match=r"\('a', 1\) failed"):
        run_tasks([("a", 1), ("b", 1), ("c", 1)], key, log.work, log.accept(), limit=2)
    assert log.started() == {("a", 1), ("b", 1)}
    assert log.handed_over() == {("b", 1)}
    assert all(n == 0 for n in log.running.values())  # nothing left running on return


def test_a_failing_hand_over_stops_handing_over_and_is_raised() -> None:
    barrier = threading.Barrier(3)
    log = Log(hold={("a", 1): barrier, ("b", 1): barrier, ("c", 1): barrier})
    handed: list[Item] = []

    def done(item: Item, result: str) -> bool:
        handed.append(item)
        raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        run_tasks([("a", 1), ("b", 1), ("c", 1), ("d", 1)], key, log.work, done, limit=3)
    assert len(handed) == 1  # the others finished, but nothing more was recorded
    assert ("d", 1) not in log.started()
    assert all(n == 0 for n in log.running.values())


def test_dependants_of_a_failed_key_never_start_even_when_others_go_on() -> None:
    log = Log(fail={("a", 1)}, slow={("c", 1): 0.3})
    items = [("a", 1), ("b", 1), ("c", 1)]
    with pytest.raises(ValueError):
        run_tasks(items, key, log.work, log.accept(), waits_for={"b": {"a"}}, limit=2, per_key=None)
    assert ("b", 1) not in log.started()
    assert log.handed_over() == {("c", 1)}  # c ran beside a and finished after it failed


def test_keys_waiting_for_each_other_are_an_error_not_a_hang() -> None:
    log = Log()
    with pytest.raises(RuntimeError, match="cycle: a, b"):
        run_tasks([("a", 1), ("b", 1)], key, log.work, log.accept(), waits_for={"a": {"b"}, "b": {"a"}}, limit=2)
    assert log.started() == set()
