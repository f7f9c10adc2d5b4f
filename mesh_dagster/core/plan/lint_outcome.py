"""What the linter did before a plan was made, as the plan's review shows it.

Every front door runs the project's linter before it plans (core/project/linter.py `refuse_errors`):
an error stops the plan, warnings are shown. The CLI can skip it (`mesh plan --skip-linter`), and a
project — a pushed commit too: the commit's own `linter:` config applies, by design, as in a checkout
of it — can turn it off. A reviewer approving a plan must see which of these happened, so the plan
carries the outcome into its record; the apply is not refused for it: the reviewer decides.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel

from mesh_dagster.core.project.linter import LintReport


class LintStatus(str, Enum):
    RAN = "ran"
    SKIPPED = "skipped"  # by the person who planned (`--skip-linter`)
    OFF = "off"  # `linter.enabled` is false in the config.yaml of the files planned


class LintOutcome(BaseModel):
    """The lint gate of one plan."""

    status: LintStatus
    warnings: int = 0  # found when it ran (errors stop the plan)
    skipped_by: str | None = None  # who skipped it
    how: str | None = None  # the flag they skipped it with

    @classmethod
    def of(cls, report: LintReport) -> LintOutcome:
        return cls(status=LintStatus.RAN, warnings=len(report.warnings)) if report.enabled else \
            cls(status=LintStatus.OFF)

    @classmethod
    def skipped(cls, how: str, actor: str) -> LintOutcome:
        return cls(status=LintStatus.SKIPPED, skipped_by=actor, how=how)

    def describe(self, from_commit: bool = False) -> str:
        """One line for the review (`from_commit`: the plan was made from a pushed commit's files)."""
        if self.status == LintStatus.RAN:
            return f"Linter: ran, {self.warnings} warning(s)."
        if self.status == LintStatus.SKIPPED:
            return f"Linter: skipped by {self.skipped_by} ({self.how}): the models were not linted."
        if from_commit:
            return ("Linter: off in the pushed commit's config.yaml (`linter.enabled` is false) — allowed by "
                    "design: the commit's own linter config applies.")
        return "Linter: off in the project's config.yaml (`linter.enabled` is false): the models were not linted."
