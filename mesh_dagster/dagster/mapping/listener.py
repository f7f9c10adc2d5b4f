"""`DagsterLogListener`: what a plan apply, a promotion or a materialization reports as it goes,
written to the Dagster run's log. Its own module because the model steps (assets.py) and every job
(promote, restate, plan, apply, git) use it, and none of them needs the others. A line can quote the
project (a failed model's error, a signal's arguments): it is escaped as all user text Dagster shows
(shown_text.py).
"""

from __future__ import annotations

from mesh_dagster.context import ApplyListener
from mesh_dagster.core.config.display import printable


class DagsterLogListener(ApplyListener):
    """Progress of materializations and promotions in the run's log."""

    def __init__(self, log):
        self._log = log

    def batch_done(self, name: str, index: int, count: int, description: str, seconds: float,
                   audits_passed: int, audits_failed: int) -> None:
        audits = f", audits passed {audits_passed}, failed {audits_failed}" if audits_passed or audits_failed else ""
        self.log(f"[{index}/{count}] {name} {description} in {seconds:.2f}s{audits}")

    def virtual_progress(self, name: str) -> None:
        self.log(f"View updated: {name}")

    def log(self, message: str) -> None:
        self._log.info(printable(message))
