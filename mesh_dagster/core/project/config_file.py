"""`config.yaml` as the project reads it: the config layer's checks plus those that need a model reader.

`model_defaults.audits` entries are written like a model's `audits (...)`, so only the model
reader can tell whether one reads; checking them here keeps `core/config/` below the readers.
"""

from __future__ import annotations

from pathlib import Path

from mesh_dagster.core.config.config import ProjectConfig, find_config_file, line_of, read_config
from mesh_dagster.core.config.files import read_text
from mesh_dagster.core.errors import ConfigError
from mesh_dagster.core.project.model_reader import default_audit_refs

_AUDITS = ("model_defaults", "audits")


def load_config(project_dir: Path) -> ProjectConfig:
    """Read and validate config.yaml: every key is honoured, or refused with its file and line."""
    config = read_config(project_dir)
    try:
        default_audit_refs(tuple(config.model_defaults.audits))
    except ValueError as e:
        path = find_config_file(project_dir)
        assert path is not None  # read_config found it
        text = read_text(path, path.name, ConfigError)
        raise ConfigError(f"{'.'.join(_AUDITS)}: {e}", path.name, line_of(text, _AUDITS)) from None
    return config
