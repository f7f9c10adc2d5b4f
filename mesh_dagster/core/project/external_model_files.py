"""Reading the external models a project declares: `external_models.yaml` (or `.yml`, or
SQLMesh's older `schema.yaml`) and every YAML file of `external_models/` and its sub-folders, each a
list of `- name: schema.table` entries with optional columns, description, dialect, gateway,
start and audits. An entry naming another gateway is left out, as SQLMesh leaves it out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mesh_dagster.core.config.config import line_of
from mesh_dagster.core.config.files import parse_yaml, read_text
from mesh_dagster.core.config.names import check_column, check_model_name
from mesh_dagster.core.config.types import check_dialect, to_spark_type
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.models.kinds import ExternalKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.project.external_audits import external_audit_refs
from mesh_dagster.core.time.dates import to_ms

EXTERNAL_MODELS_FILES = ("external_models.yaml", "external_models.yml", "schema.yaml")
# What an external model entry may say: `columns` typed in `dialect` (Spark by default).
EXTERNAL_MODELS_DIR = "external_models"  # a folder of YAML files, each a list of external models
EXTERNAL_MODEL_KEYS = ("name", "columns", "description", "dialect", "gateway", "start", "audits")


def load_external_models(root: Path, gateway: str | None, shown_from: Path | None = None) -> list[Model]:
    """The external models of the top-level file (`external_models.yaml`, ...) and of every YAML file
    in `external_models/` and its sub-folders, as SQLMesh reads them; an entry naming another
    `gateway` is left out."""
    files = [next((root / name for name in EXTERNAL_MODELS_FILES if (root / name).is_file()), None)]
    folder = root / EXTERNAL_MODELS_DIR
    if folder.is_dir():
        files += sorted((p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()), key=str)
    models: list[Model] = []
    for file in filter(None, files):
        rel = relative_path(file, shown_from or root)
        text = read_text(file, rel)
        entries = parse_yaml(text, rel) or []
        if not isinstance(entries, list):
            raise ModelError(f"{rel} must be a list of `- name: schema.table` entries", rel, 1)
        models += [_external_model(entry, index, text, rel) for index, entry in enumerate(entries)
                   if not _for_other_gateway(entry, gateway)]
    return models


def _for_other_gateway(entry: Any, gateway: str | None) -> bool:
    named = entry.get("gateway") if isinstance(entry, dict) else None
    return named is not None and str(named).lower() != (gateway or "").lower()


def _external_model(entry: Any, index: int, text: str, rel: str) -> Model:
    line = line_of(text, (index,)) or 1
    if not isinstance(entry, dict) or "name" not in entry:
        raise ModelError(f"Each external model needs a name, got {entry!r}", rel, line)
    unknown = sorted(set(entry) - set(EXTERNAL_MODEL_KEYS))
    if unknown:
        raise ModelError(f"Unknown external model key '{unknown[0]}' (known: {', '.join(EXTERNAL_MODEL_KEYS)})",
                         rel, line_of(text, (index, unknown[0])) or line)
    try:
        name = check_model_name(str(entry["name"]))
    except ValueError as e:
        raise ModelError(str(e), rel, line_of(text, (index, "name")) or line) from None
    columns = entry.get("columns")
    if columns is not None and not isinstance(columns, dict):
        raise ModelError(f"External model {name}: columns must be a mapping of name: type", rel, line)
    try:
        dialect = check_dialect(str(entry.get("dialect", "spark")))
    except ValueError as e:
        raise ModelError(f"External model {name}: {e}", rel, line_of(text, (index, "dialect")) or line) from None
    typed: dict[str, str] = {}
    for column, type_text in (columns or {}).items():
        try:
            typed[check_column(str(column))] = to_spark_type(str(type_text), dialect)
        except ValueError as e:
            raise ModelError(
                f"External model {name}: {e}", rel, line_of(text, (index, "columns", column)) or line
            ) from None
    start = entry.get("start")
    if start is not None:
        start = _external_start(start, name, rel, line_of(text, (index, "start")) or line)
    audits = external_audit_refs(entry.get("audits"), name, rel, line_of(text, (index, "audits")) or line)
    return Model(name=name, kind=ExternalKind(), columns=typed if columns else None,
                 description=entry.get("description"), start=start, audits=audits, path=rel, line=line,
                 property_lines={"audits": line_of(text, (index, "audits")) or line})


def _external_start(value: Any, name: str, rel: str, line: int) -> str:
    """An external model's `start`: where its intervals (when its audits run) begin."""
    try:
        to_ms(str(value))
    except ValueError as e:
        raise ModelError(f"External model {name}: invalid start '{value}': {e}", rel, line) from None
    return str(value)
