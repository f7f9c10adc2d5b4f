"""Running Spark work on worker threads, in dependency order.

Spark takes jobs from several threads on one session, and most of a small model's time goes to
the driver and the metastore rather than to computing, so independent models overlap well. This
is the one place mesh_dagster runs work concurrently; the rules it keeps are the ones an apply
needs:

- a task starts only once every task of the keys it waits for has finished *and been accepted*
  by `done` (a child never reads a parent whose interval was not recorded);
- at most `limit` tasks run at once, and at most `per_key(key)` of one key (a model's own
  `batch_concurrency`);
- results are handed to `done` on the caller's thread, in completion order, so the listener is
  never used from two threads (work may use the state store, which is safe to share: a batch
  records its interval on its worker thread, under its table's lock);
- nothing is left running on return, whatever happened, so a caller releasing a lock afterwards
  cannot race a write — except after Ctrl-C: running tasks get `INTERRUPT_GRACE_S` to finish (and
  are recorded if they do), then `Interrupted` names the ones still running and the caller ends
  without them. A Python model that never returns cannot be stopped from another thread; the CLI
  then ends its process at once (cli/errors.py), with nothing recorded for those tasks.

With `limit == 1` everything runs on the caller's thread, exactly as a plain loop would.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from time import monotonic
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

INTERRUPT_GRACE_S = 2.0  # what running tasks get to finish after Ctrl-C
THREAD_PREFIX = "mesh-task"  # worker threads' names: the CLI looks for ones left running


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while tasks ran: the keys of those still running, whose results were not recorded."""

    def __init__(self, running: Sequence[str]):
        self.running = list(dict.fromkeys(running))
        many = len(self.running) > 1
        super().__init__(f"Interrupted: {', '.join(self.running)} {'were' if many else 'was'} running; nothing was "
                         f"recorded for {'their intervals' if many else 'its interval'}")


def run_tasks(
    items: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], R],
    done: Callable[[T, R], bool],
    *,
    waits_for: Mapping[str, AbstractSet[str]] | None = None,
    limit: int = 1,
    per_key: Callable[[str], int] | None = None,
) -> None:
    """Run `work(item)` for every item (on worker threads), then `done(item, result)` on this one.

    `items` come in an order where every key comes after the keys it waits for (DAG order); ready
    items start in that order. `done` returning False stops the run: nothing new starts, and the
    tasks already running finish and are still handed to `done` (their work is complete). An
    exception from `work` stops the run the same way and is raised once nothing runs any more;
    after an exception from `done` (a lost lock, say) the running tasks finish but are not handed
    over, and it is raised.
    """
    if limit <= 1:
        for item in items:
            try:
                result = work(item)
            except KeyboardInterrupt:
                raise Interrupted([key(item)]) from None
            if not done(item, result):
                return
        return
    _Run(items, key, work, done, waits_for or {}, limit, per_key).run()


class _Run(Generic[T, R]):
    """The state of one concurrent `run_tasks`: what waits, what runs, which keys are complete."""

    def __init__(self, items: Sequence[T], key: Callable[[T], str], work: Callable[[T], R],
                 done: Callable[[T, R], bool], waits_for: Mapping[str, AbstractSet[str]], limit: int,
                 per_key: Callable[[str], int] | None):
        self.key, self.work, self.done, self.limit = key, work, done, limit
        self.per_key = per_key
        self.queues: dict[str, deque[T]] = {}  # per key, in first-appearance order
        for item in items:
            self.queues.setdefault(key(item), deque()).append(item)
        self.unaccepted = Counter({k: len(q) for k, q in self.queues.items()})
        self.waits_for = {k: {w for w in waits_for.get(k, ()) if w in self.queues and w != k} for k in self.queues}
        self.running: dict[Future[R], T] = {}
        self.running_per_key: Counter[str] = Counter()
        self.stopped = False
        self.hand_over = True
        self.error: BaseException | None = None

    def run(self) -> None:
        pool = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix=THREAD_PREFIX)
        interrupted = False
        try:
            self._loop(pool)
        except KeyboardInterrupt:
            interrupted, self.stopped = True, True
            left = self._drain(INTERRUPT_GRACE_S)
            if left:
                raise Interrupted(left) from None
            raise
        finally:
            if not interrupted:
                wait(self.running)  # a failure: still never return while a task is writing
            pool.shutdown(wait=not self.running, cancel_futures=True)
        if self.error is not None:
            raise self.error
        blocked = sorted(k for k, q in self.queues.items() if q)
        if blocked and not self.stopped:
            raise RuntimeError(f"Tasks wait for each other in a cycle: {', '.join(blocked)}")

    def _loop(self, pool: ThreadPoolExecutor) -> None:
        while True:
            if not self.stopped:
                self._start_ready(pool)
            if not self.running:
                return
            finished, _ = wait(self.running, return_when=FIRST_COMPLETED)
            for future in finished:
                self._finish(future)

    def _drain(self, grace_s: float) -> list[str]:
        """After Ctrl-C: hand over what finishes within `grace_s`; the keys of what still runs."""
        deadline = monotonic() + grace_s
        while self.running and monotonic() < deadline:
            finished, _ = wait(self.running, timeout=deadline - monotonic(), return_when=FIRST_COMPLETED)
            for future in finished:
                self._finish(future)
        return [self.key(item) for item in self.running.values()]

    def _start_ready(self, pool: ThreadPoolExecutor) -> None:
        for k, queue in self.queues.items():
            while queue and len(self.running) < self.limit and self._ready(k):
                item = queue.popleft()
                self.running[pool.submit(self.work, item)] = item
                self.running_per_key[k] += 1
            if len(self.running) >= self.limit:
                return

    def _ready(self, k: str) -> bool:
        if self.per_key is not None and self.running_per_key[k] >= max(1, self.per_key(k)):
            return False
        return all(self.unaccepted[w] == 0 for w in self.waits_for[k])

    def _finish(self, future: Future[R]) -> None:
        item = self.running.pop(future)
        k = self.key(item)
        self.running_per_key[k] -= 1
        failed = future.exception()
        if failed is not None:
            self._stop(failed)
            return
        if not self.hand_over:
            return
        try:
            accepted = self.done(item, future.result())
        except BaseException as e:  # noqa: BLE001 - re-raised by run() once nothing runs
            self.hand_over = False
            self._stop(e)
            return
        if accepted:
            self.unaccepted[k] -= 1
        else:
            self.stopped = True

    def _stop(self, error: BaseException) -> None:
        self.stopped = True
        self.error = self.error or error
