"""`mesh init`: project templates."""

from mesh_dagster.scaffold.init import (
    CLI_MODES,
    ENGINES,
    PROJECT_TYPES,
    check_engine,
    init_project,
    next_steps_message,
)

__all__ = ["CLI_MODES", "ENGINES", "PROJECT_TYPES", "check_engine", "init_project", "next_steps_message"]
