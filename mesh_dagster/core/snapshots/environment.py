"""Environments: named sets of references to snapshots, materialised as views."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.snapshots.snapshot import SnapshotId
from mesh_dagster.core.snapshots.statements import EnvironmentStatements


class EnvironmentSnapshot(BaseModel):
    """What an environment needs to know of each snapshot it references without loading it."""

    name: str
    identifier: str
    version: str
    kind: str
    table_name: str | None  # physical object, None for EMBEDDED/EXTERNAL

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.name, self.identifier)


class Environment(BaseModel):
    name: str
    snapshots: list[EnvironmentSnapshot] = Field(default_factory=list)
    # Views exist only for these models (dev environments without --include-unmodified).
    promoted: list[str] = Field(default_factory=list)
    plan_id: str
    previous_plan_id: str | None = None
    start_at: str | None = None
    end_at: str | None = None
    expiration_ts: int | None = None
    finalized_ts: int | None = None
    created_ts: int = 0
    # Only in what the state store keeps while an apply is unfinished (`replaced_environment`),
    # when that is a merge of several records: the last finalized one, which the environment
    # serves (`mesh run` evaluates its snapshots) until an apply finishes.
    last_finalized: Environment | None = None
    # The `before_all` / `after_all` its last plan captured: what every apply, run and Dagster run of
    # it renders (core/snapshots/statements.py). None: recorded before plans captured them (none run).
    statements: EnvironmentStatements | None = None

    @property
    def is_prod(self) -> bool:
        return self.name == PROD

    def snapshot_by_name(self) -> dict[str, EnvironmentSnapshot]:
        return {s.name: s for s in self.snapshots}
