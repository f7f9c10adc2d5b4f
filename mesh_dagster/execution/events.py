"""Progress events of an apply or run. The CLI draws them with rich; Dagster logs them."""

from __future__ import annotations


class ApplyListener:
    """No-op base: override what you display.

    `work_s`: the seconds the batches this listener saw written took together, counted by the
    scheduler (`timed`): what a plan's backfill estimate is compared with once applied."""

    work_s: float = 0.0

    def timed(self, seconds: float) -> None:
        self.work_s += seconds

    def physical_start(self, total: int) -> None: ...
    def physical_progress(self, name: str) -> None: ...
    def physical_done(self, total: int) -> None: ...
    def backfill_start(self, total_batches: int) -> None: ...
    def batch_done(self, name: str, index: int, count: int, description: str, seconds: float,
                   audits_passed: int, audits_failed: int) -> None: ...
    def backfill_done(self, total_batches: int) -> None: ...
    def virtual_start(self, total: int) -> None: ...
    def virtual_progress(self, name: str) -> None: ...
    def virtual_done(self, total: int) -> None: ...
    def log(self, message: str) -> None: ...


class LogLines(ApplyListener):
    """Keeps the log messages (what waits for a signal, say) for the caller to show its own way."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)
