"""The Dagster front door: models as partitioned assets, audits as checks, a promote job per
environment, re-stamping of reused data, and cron schedules. Only this package imports dagster."""

from mesh_dagster.dagster.definitions import ProjectLoadError, definitions
from mesh_dagster.dagster.resource import MeshResource

__all__ = ["MeshResource", "ProjectLoadError", "definitions"]
