"""The Dagster front door: models as partitioned assets, audits as checks, a promote job per
environment, re-stamping of reused data, and cron schedules. Only this package imports dagster.

In rooms, each importing only those below it (import-linter's `dagster-rooms` contract):

    ui/, component.py  `mesh ui` (workspace, supervisor, watch); the dg component
    definitions.py     one environment's `Definitions`
    jobs/              plan, apply, promote, restate jobs; the git sensor; cron schedules
    assets.py          the step per model: materializations, checks, outcomes
    restamp/           what Dagster shows for data computed elsewhere: stamps, re-stamps, verdicts
    mapping/           what a model becomes in Dagster: translator, graph, partitions, events, text
    compat.py          every use of a Dagster name that is not exported, tested against the installed Dagster
"""

import warnings

from dagster import BetaWarning

from mesh_dagster.dagster.definitions import ProjectLoadError, definitions
from mesh_dagster.dagster.mapping.translator import MeshTranslator
from mesh_dagster.dagster.resource import MeshResource

# Dagster 1.13 warns about its own beta `owners` parameter whenever it copies a sensor (binding
# resources, on every load and run launch) even though we pass no owners: noise for our users.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition.__init__`",
                        category=BetaWarning)

__all__ = ["MeshResource", "MeshTranslator", "ProjectLoadError", "definitions"]
