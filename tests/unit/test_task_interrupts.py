"""execution/intervals/tasks.py after Ctrl-C: running tasks get a grace period, then `Interrupted` names those
still running, and their results are never handed over (recorded). Pure Python: the interrupt is a
real KeyboardInterrupt delivered to the main thread."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from mesh_dagster.execution.intervals.tasks import INTERRUPT_GRACE_S, Interrupted, run_tasks


def _ctrl_c_after(seconds: float) -> threading.Timer:
    """SIGINT to the main thread (as the terminal sends it) once the run waits for its tasks."""
    timer = threading.Timer(seconds, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_leaves_a_task_that_never_returns_and_names_it() -> None:
    release = threading.Event()
    done: list[str] = []

    def work(item: str) -> str:
        if item == "slow":
            time.sleep(1.0)  # finishes within the grace period that follows Ctrl-C
        else:
            release.wait(60)  # a model that never returns (until the test lets it go)
        return item

    started = time.monotonic()
    timer = _ctrl_c_after(0.3)
    try:
        with pytest.raises(Interrupted) as raised:
            run_tasks(["stuck", "slow", "never started"], key=lambda i: i, work=work,
                      done=lambda item, _r: done.append(item) or True, limit=2)
        took = time.monotonic() - started
    finally:
        timer.cancel()
        release.set()
    assert raised.value.running == ["stuck"]
    assert str(raised.value) == "Interrupted: stuck was running; nothing was recorded for its interval"
    assert done == ["slow"]  # finished within the grace period: handed over; the others never
    assert took < 0.3 + INTERRUPT_GRACE_S + 1


def test_ctrl_c_on_the_callers_thread_names_the_task() -> None:
    def work(item: str) -> str:
        raise KeyboardInterrupt

    with pytest.raises(Interrupted, match="^Interrupted: a was running; nothing was recorded for its interval$"):
        run_tasks(["a", "b"], key=lambda i: i, work=work, done=lambda _i, _r: True, limit=1)
