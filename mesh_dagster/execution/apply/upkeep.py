"""Upkeep as Context's service (`ctx.upkeep`): the state store's schema, environments retired,
and the janitor. Only `config.yaml` and the state store are read (never a model file): a broken
model never stands in the way of cleaning up."""

from __future__ import annotations

from mesh_dagster.core.config.names import PROD, normalize_environment
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.time.dates import now_ms
from mesh_dagster.execution.apply.janitor import run_janitor
from mesh_dagster.execution.parts import Parts
from mesh_dagster.state.store import StateStore


class Upkeep:
    """Keeps one project's state store and warehouse in shape."""

    def __init__(self, parts: Parts):
        self.parts = parts

    def migrate(self) -> int:
        """Bring the state store's schema up to this version; the schema version it has now. The
        store is opened unchecked: the project's own (`parts.state`) refuses an older schema."""
        store = StateStore(self.parts.state_url, check_version=False)
        try:
            store.migrate()
        finally:
            store.close()
        return store.schema_version

    def invalidate(self, environment: str, sync: bool = False) -> None:
        """Mark a development environment expired; `sync`: run the janitor now, which drops it."""
        environment = normalize_environment(environment)
        if environment == PROD:
            raise PlanError("The prod environment cannot be invalidated")
        if self.parts.state.environments.get_environment(environment) is None:
            raise PlanError(f"Environment '{environment}' does not exist")
        self.parts.state.environments.invalidate_environment(environment, now_ms())
        if sync:
            self.janitor(ignore_ttl=False)

    def janitor(self, ignore_ttl: bool = False) -> dict[str, list[str]]:
        """Delete expired environments, then what no environment uses (janitor.py)."""
        return run_janitor(self.parts.config, self.parts.state, lambda: self.parts.engine, ignore_ttl=ignore_ttl)
