"""The one place that persists: snapshots, environments, intervals, plans and locks."""

from mesh_dagster.state.locks import EXCLUSIVE_LOCK, Lease, LockInfo, LockLostError
from mesh_dagster.state.schema import SCHEMA_VERSION
from mesh_dagster.state.store import StateStore

__all__ = ["EXCLUSIVE_LOCK", "SCHEMA_VERSION", "Lease", "LockInfo", "LockLostError", "StateStore"]
