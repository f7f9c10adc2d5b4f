"""The one place that persists: snapshots, environments, intervals, plans and locks."""

from mesh_dagster.state.schema import SCHEMA_VERSION
from mesh_dagster.state.store import LockInfo, PlanRecord, StateStore

__all__ = ["SCHEMA_VERSION", "LockInfo", "PlanRecord", "StateStore"]
