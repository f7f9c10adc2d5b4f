"""The project's configuration as the project reads it: the config layer's checks plus those that
need a model reader, and SQLMesh's `config.py` made runnable.

`model_defaults.audits` entries are written like a model's `audits (...)`, so only the model
reader can tell whether one reads; checking them here keeps `core/config/` below the readers. A
`config.py` imports SQLMesh's names (`from sqlmesh.core.config import Config`) and may import the
project's own modules: both are made importable here before it runs.
"""

from __future__ import annotations

from pathlib import Path

from mesh_dagster.core.config.config import ProjectConfig, read_config
from mesh_dagster.core.config.python_config import CONFIG_PY
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.project.import_path import use_project_root
from mesh_dagster.core.project.model_reader import default_audit_refs

_AUDITS = ("model_defaults", "audits")


def load_config(project_dir: Path) -> ProjectConfig:
    """Read and validate config.yaml (or config.py): every key is honoured, or refused with its file
    and line."""
    if (project_dir / CONFIG_PY).is_file():
        use_project_root(project_dir)  # SQLMesh's names, and the project's modules, for its imports
    config = read_config(project_dir)
    try:
        default_audit_refs(tuple(config.model_defaults.audits))
    except ValueError as e:
        raise ConfigError(f"{'.'.join(_AUDITS)}: {e}", *config.where(_AUDITS)) from None
    return config
