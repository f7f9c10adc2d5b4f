"""A plan of some of a multi-repo project's repositories (core/project/repos.py).

`mesh -p repo_2 plan` loads repo_2 only. The environment may hold models of repo_1, applied by an
earlier plan of both: to the plan they look removed, and applying it would drop them. SQLMesh
keeps such models by reading their definitions back from state; until we do too, a plan that would
remove another repository's models is refused before anything is written, naming the model,
its repository and what to do. Models of no named repository (`project:` unset) are this
project's own: removing them is what the user asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.snapshots.environment import EnvironmentSnapshot

if TYPE_CHECKING:
    from mesh_dagster.core.plan.plan import StateReader
    from mesh_dagster.core.project.project import Project
    from mesh_dagster.core.snapshots.snapshot import Snapshot


def removed_models(project: Project, state: StateReader, environment: str, held: Mapping[str, EnvironmentSnapshot],
                   local: Mapping[str, Snapshot]) -> list[EnvironmentSnapshot]:
    """The models of `environment` (`held`) a plan of the `local` snapshots removes; refused when it
    would remove, or take for an undeclared external table, a model of a repository the project did
    not load."""
    removed = [es for name, es in held.items() if name not in local]
    lost = [es for name, es in held.items() if name not in local or local[name].model.path is None]
    if not lost:
        return removed
    loaded = {repo.config.project for repo in project.repos}
    stored = state.snapshots.get_snapshots([es.snapshot_id for es in lost])
    foreign = sorted((s.name, s.model.project) for s in stored.values()
                     if s.model.project and s.model.project not in loaded)
    if not foreign:
        return removed
    name, repository = foreign[0]
    others = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    raise PlanError(f"{environment} holds {name}{others} of the repository '{repository}', which this command did "
                    f"not load: the plan would remove it (or read it as an undeclared table). Give every repository of "
                    f"the project, each with -p (e.g. -p {project.path.name} -p path/to/{repository}), or, to remove "
                    "the model, delete it from its repository and plan with it loaded")
