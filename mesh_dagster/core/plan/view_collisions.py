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

from mesh_dagster.core.config.names import PROD, VIEW_SCHEMA_RULE, environment_readings, view_names
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.snapshots.environment import Environment


def refuse_view_collisions(environment: str, models: Iterable[Model],
                           stored: Callable[[str], Environment | None]) -> None:
    """Refuse when a view `environment` may give one of `models` is one another environment shows for
    another model; `stored` reads an environment's record from the state store. Every model with
    views counts, not only those this plan shows: a later plan of the environment may show them."""
    with_views = {model.name: model for model in models if not model.kind.is_symbolic}
    mine = view_names(with_views, environment)
    schemas = {view.rpartition(".")[0] for view in mine}
    others = {PROD, *(env for schema in schemas for _, env in environment_readings(schema))} - {environment}
    for other_environment in sorted(others):
        shown = stored(other_environment)
        theirs = view_names(shown.promoted, other_environment) if shown is not None else {}
        for view in sorted(mine.keys() & theirs.keys()):
            model = with_views[mine[view]]
            raise PlanError(
                f"Environment '{environment}' would show {model.name} as the view {view}, where environment "
                f"'{other_environment}' shows the model {theirs[view]}: rename one of the two models "
                f"({VIEW_SCHEMA_RULE})", model.path, model.line)
