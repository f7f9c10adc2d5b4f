"""The Dagster front door: models as partitioned assets, audits as checks, a promote job per
environment, re-stamping of reused data, and cron schedules. Only this package imports dagster."""

import warnings

from dagster import BetaWarning

from mesh_dagster.dagster.definitions import ProjectLoadError, definitions
from mesh_dagster.dagster.resource import MeshResource
from mesh_dagster.dagster.translator import MeshTranslator

# Dagster 1.13 warns about its own beta `owners` parameter whenever it copies a sensor (binding
# resources, on every load and run launch) even though we pass no owners: noise for our users.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition.__init__`",
                        category=BetaWarning)

__all__ = ["MeshResource", "MeshTranslator", "ProjectLoadError", "definitions"]
