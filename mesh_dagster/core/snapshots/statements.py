"""`before_all` / `after_all` as a plan captured them: what an environment runs, never config.yaml as
it is when something runs.

Statements run around every apply, `mesh run` and Dagster run of an environment, and their SQL may
call the project's Python macros and read its variables (core/project/environment_statements.py).
Reading any of these from the working tree when they run would run SQL nobody reviewed: an edit of
config.yaml or of a macro after the plan, or a pushed branch's files. So a plan captures them like a
snapshot captures what decides its data (core/snapshots/capture.py, whose `Capture` holds the macros
as stored code and the variables as values): the entries' text, the project's dialect, the macros
they call and the variables they read. The environment's record keeps what its last plan captured,
and every later execution renders that (core/snapshots/statement_scope.py also checks what it may
reach). A change of any of it is a change the plan shows and the review covers (`text`, `diff`).

Where each entry was written (config.yaml and its line) is kept for messages only: moving an entry
to another line changes nothing.
"""

from __future__ import annotations

import difflib
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.project.environment_statements import (
    EnvironmentNaming,
    Stage,
    StatementSource,
    render_environment_statements,
)
from mesh_dagster.core.snapshots.capture import Capture, Capturer

if TYPE_CHECKING:
    from mesh_dagster.core.project.project import Project


class EnvironmentStatements(BaseModel):
    """The `before_all` / `after_all` an environment runs, with everything their rendering reads."""

    model_config = ConfigDict(frozen=True)

    before_all: list[str] = Field(default_factory=list)
    after_all: list[str] = Field(default_factory=list)
    dialect: str = "spark"  # the project's `model_defaults.dialect`: what the entries are written in
    capture: Capture = Field(default_factory=Capture)  # the macros they call, the variables they read
    path: str | None = None  # the config file as messages show it
    lines: dict[str, int] = Field(default_factory=dict)  # "before_all.0" -> the entry's line

    @classmethod
    def of_project(cls, project: Project) -> EnvironmentStatements:
        """The project's statements as config.yaml has them now, captured."""
        config = project.config
        before, after = config.statements(Stage.BEFORE_ALL.value), config.statements(Stage.AFTER_ALL.value)
        if not (before or after):
            return cls(dialect=config.model_defaults.dialect)
        source = StatementSource.of_config(project.path, config)
        return cls(before_all=before, after_all=after, dialect=config.model_defaults.dialect,
                   capture=Capturer(project).capture_sql(" ".join([*before, *after])), path=source.path,
                   lines={f"{stage.value}.{index}": line for (stage, index), line in (source.lines or {}).items()})

    def __eq__(self, other: object) -> bool:
        """The same statements: what runs (none, whatever their dialect), not where config.yaml has them."""
        if not isinstance(other, EnvironmentStatements):
            return False
        if self.is_empty or other.is_empty:
            return self.is_empty and other.is_empty
        return self.model_dump(exclude={"path", "lines"}) == other.model_dump(exclude={"path", "lines"})

    @property
    def is_empty(self) -> bool:
        return not (self.before_all or self.after_all)

    def differs_from(self, before: EnvironmentStatements | None) -> bool:
        """Whether these run something else than `before` (None: recorded before plans captured
        statements, which ran none)."""
        return not self.is_empty if before is None else self != before

    def entries(self, stage: Stage) -> list[str]:
        return list(self.before_all if stage == Stage.BEFORE_ALL else self.after_all)

    def source(self) -> StatementSource:
        """Where the entries were written, for messages."""
        lines = {(stage, index): self.lines[f"{stage.value}.{index}"]
                 for stage in Stage for index in range(len(self.entries(stage)))
                 if f"{stage.value}.{index}" in self.lines}
        return StatementSource(self.path, lines)

    def render(self, stage: Stage, naming: EnvironmentNaming, *, root: Path | None, gateway: str | None,
               execution_time: datetime | None) -> list[tuple[int, str]]:
        """The stage's statements in Spark SQL, as `(entry index, sql)`, with the captured macros and
        variables (`root`: the project they run for, which the macros' `__file__` names)."""
        return render_environment_statements(
            stage, self.entries(stage), naming, macros=self.capture.macro_registry(root),
            variables=self.capture.variable_values(), dialect=self.dialect, gateway=gateway,
            execution_time=execution_time, source=self.source())

    def text(self) -> str:
        """Everything that decides what runs, as a reviewer reads it: each entry under its key, then
        the code of the macros they call and the variables they read."""
        out = [f"{stage.value}.{index}: {entry}" for stage in Stage
               for index, entry in enumerate(self.entries(stage))]
        for name, function in sorted(self.capture.macros.items()):
            where = f" ({function.path}:{function.line})" if function.path else ""
            out += [f"macro {name}{where}:", *(f"    {line}" for piece in function.env.values()
                                                 for line in piece.text.splitlines())]
        out += [f"variable {name}: {value}" for name, value in sorted(self.capture.variables.items())]
        return "\n".join(out)

    def diff(self, before: EnvironmentStatements | None) -> str:
        """A unified diff from `before` (what the environment runs now; None: nothing) to these, every
        line shown (a reviewer reads all of what will run, the changes marked); empty when the same."""
        old, new = (before.text() if before is not None else "").splitlines(), self.text().splitlines()
        if old == new:
            return ""
        return "\n".join(difflib.unified_diff(old, new, "environment", "plan", lineterm="", n=len(old) + len(new)))
