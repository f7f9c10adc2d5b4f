"""Model names that an environment's views would take: refused when the project loads.

A model's view is `schema.table` in prod and `schema__env.table` in environment `env`. So with the
models `s.t` and `s__dev.t`, `mesh plan dev` would replace the second model's prod view with the
first's dev view (and the janitor, expiring `dev`, would drop it). No environment has to exist yet
for the two names to be a trap, so the pair is refused at load, naming both files; a plan also
checks the environments the state store has (core/plan/view_collisions.py), for a model another
branch made.
"""

from __future__ import annotations

from collections.abc import Collection

from mesh_dagster.core.config.names import VIEW_SCHEMA_RULE, environment_readings
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.model import Model


def check_view_names(models: Collection[Model]) -> None:
    """Refuse a model named like another model's view in some environment (see the module docstring).

    Only names that are objects of the catalog count: a model's view (EMBEDDED and EXTERNAL models
    have none) and a declared external table."""
    with_views = {(m.schema_name, m.table_name): m for m in models if not m.kind.is_symbolic}
    for model in models:
        if model.kind.is_symbolic and not model.kind.is_external:
            continue
        for schema, environment in environment_readings(model.schema_name):
            other = with_views.get((schema, model.table_name))
            if other is not None:
                raise ModelError(
                    f"Model {model.name} has the name of the view environment '{environment}' gives {other.name} "
                    f"({other.where()}): planning '{environment}' would replace one with the other. Rename one of "
                    f"them ({VIEW_SCHEMA_RULE})",
                    model.path, model.line)
