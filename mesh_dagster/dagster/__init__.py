"""The Dagster front door: models as partitioned assets, audits as checks, a promote job per
environment, re-stamping of reused data, and cron schedules. Only this package imports dagster.

In rooms, each importing only those below it (import-linter's `dagster-rooms` contract):

    ui/, component.py  `mesh ui` (workspace, supervisor, watch); the dg component
    code_location.py   one environment's `Definitions` (`definitions()`)
    jobs/              plan, apply, promote, restate jobs; the git sensor; cron schedules
    assets.py          the step per model: materializations, checks, outcomes
    restamp/           what Dagster shows for data computed elsewhere: stamps, re-stamps, verdicts
    mapping/           what a model becomes in Dagster: translator, graph, partitions, events, text
    compat.py          every use of a Dagster name that is not exported, tested against the installed Dagster
"""

from mesh_dagster.lazy import lazy_names

# Resolved lazily (mesh_dagster/lazy.py), as the top package's names: `mesh ui`'s supervisor imports a
# module of this package (ui/supervisor.py) and must start `dagster dev` before anything imports Dagster.
_LAZY = {"definitions": "mesh_dagster.dagster.code_location", "ProjectLoadError": "mesh_dagster.dagster.code_location",
         "MeshTranslator": "mesh_dagster.dagster.mapping.translator", "MeshResource": "mesh_dagster.dagster.resource"}

__all__ = ["MeshResource", "MeshTranslator", "ProjectLoadError", "definitions"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
