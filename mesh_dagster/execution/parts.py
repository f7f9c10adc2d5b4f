"""What the services behind Context share: one project's lazily built parts.

Context (mesh_dagster/context.py) builds them on first use: the project (loading reads every model
file), `config.yaml` alone, the state store, and the Spark engine (starting Spark is slow, and
`mesh plan` must never do it). The services of this package take them through this Protocol, so
they never build a part themselves and never import Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mesh_dagster.core.config.config import ProjectConfig
    from mesh_dagster.core.plan.lint_outcome import LintOutcome
    from mesh_dagster.core.project.project import Project
    from mesh_dagster.execution.notify import Notifier
    from mesh_dagster.state.store import StateStore


class Parts(Protocol):
    path: Path  # the project's folder
    home: Path  # where its `.mesh/` lives
    gateway: str | None
    linted: LintOutcome | None  # what its last lint gate did (Context.lint_gate)

    @property
    def project(self) -> Project: ...

    @property
    def config(self) -> ProjectConfig: ...

    @property
    def state(self) -> StateStore: ...

    @property
    def state_url(self) -> str: ...  # the state store's URL, password included: what a git worker is handed

    @property
    def engine(self) -> Any: ...  # execution/ports.py's Engine; Any: Context's is built lazily

    @property
    def notifier(self) -> Notifier: ...  # the project's notifications (execution/notify.py), one per project

    @property
    def user(self) -> str: ...
