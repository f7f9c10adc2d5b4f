"""The views a plan would make, against the views the other environments show.

Loading refuses two models of one project whose views would meet (core/project/view_names.py).
The state store can show models the project does not have: prod, applied from another branch,
may show `s__dev.t` while this branch has `s.t`, and planning `dev` here would put dev's view of
`s.t` where prod shows `s__dev.t` (or the other way round: planning prod with `s__dev.t` while
`dev` shows `s.t`). Such a plan is refused before anything is written, naming both models.

Only the environments a view name can belong to are read: prod, and those whose names end the
view's schema after a `__` (names.environment_readings), usually none but prod; and only their
records, never Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mesh_dagster.core.config.names import PROD, environment_readings, view_name
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.snapshots.environment import Environment


def refuse_view_collisions(environment: str, models: Iterable[Model],
                           stored: Callable[[str], Environment | None]) -> None:
    """Refuse when a view `environment` may give one of `models` is one another environment shows for
    another model; `stored` reads an environment's record from the state store. Every model with
    views counts, not only those this plan shows: a later plan of the environment may show them."""
    shown: dict[str, dict[str, str]] = {}  # environment -> {view: model shown there}
    for model in models:
        if model.kind.is_symbolic:  # no view
            continue
        view = view_name(model.name, environment)
        schema = view.rpartition(".")[0]
        for other_environment in [PROD, *(env for _, env in environment_readings(schema))]:
            if other_environment == environment:
                continue
            if other_environment not in shown:
                shown[other_environment] = _views(stored(other_environment))
            other = shown[other_environment].get(view)
            if other is not None:
                raise PlanError(
                    f"Environment '{environment}' would show {model.name} as the view {view}, where environment "
                    f"'{other_environment}' shows the model {other}: rename one of the two models (a schema "
                    f"ending in `__<environment>` holds that environment's views)", model.path, model.line)


def _views(environment: Environment | None) -> dict[str, str]:
    if environment is None:
        return {}
    return {view_name(name, environment.name): name for name in environment.promoted}
