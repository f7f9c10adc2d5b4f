"""Writing `external_models.yaml`: the tables the project reads but does not build, with columns.

`mesh create_external_models` reads each external table's columns from the catalog and merges
them into the file the loader reads (core/project/project.py), so that a hand-written file survives:

- existing entries keep their place and every key but `columns` (description, dialect, ...);
  their `columns` become what the catalog says, written in the entry's own `dialect`;
- tables the catalog does not have keep their entry as it was (a new one is written without
  columns): the caller warns about them;
- tables no entry names yet (implicit external models) are appended, sorted by name;
- entries of tables the project no longer reads are kept: they are the user's.

PyYAML does not keep comments: a commented file loses its comments (the data is kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlglot import exp

from mesh_dagster.core.config.files import parse_yaml, read_text
from mesh_dagster.core.config.names import COLUMN, COLUMN_RULE, check_model_name
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.project.external_model_files import EXTERNAL_MODELS_FILES

# Table name -> its columns (name -> Spark type), or None when the catalog has no such table.
CatalogColumns = Mapping[str, Mapping[str, str] | None]


@dataclass
class ExternalModelsFile:
    """What writing the file did."""

    path: Path
    shown: str = ""  # the path as the user sees it, relative to the project
    written: list[str] = field(default_factory=list)  # every table with an entry, in file order
    with_columns: list[str] = field(default_factory=list)  # tables whose columns came from the catalog
    missing: list[str] = field(default_factory=list)  # tables the catalog does not have
    unsupported: dict[str, str] = field(default_factory=dict)  # table -> why its columns cannot be written


def external_models_path(root: Path) -> Path:
    """The file the loader reads (the first that exists), or `external_models.yaml`."""
    for name in EXTERNAL_MODELS_FILES:
        if (root / name).is_file():
            return root / name
    return root / EXTERNAL_MODELS_FILES[0]


def read_entries(path: Path, root: Path) -> list[dict[str, Any]]:
    """The entries of an existing file ([] when there is none); a file that is not a list of
    mappings is refused with its file and line."""
    if not path.is_file():
        return []
    rel = relative_path(path, root)
    text = read_text(path, rel)
    entries = parse_yaml(text, rel) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "name" in e for e in entries):
        raise ModelError("external_models.yaml must be a list of `- name: schema.table` entries", rel, 1)
    return entries


def merge_entries(entries: list[dict[str, Any]], catalog: CatalogColumns) -> tuple[list[dict[str, Any]],
                                                                                    ExternalModelsFile]:
    """The entries with `catalog`'s columns merged in (see the module docstring), and a report
    (its `path` is left for the caller)."""
    report = ExternalModelsFile(Path())
    merged: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in entries:
        name = _normal_name(entry["name"])
        seen.add(name)
        merged.append(_with_columns(dict(entry), name, catalog, report) if name in catalog else dict(entry))
    for name in sorted(set(catalog) - seen):
        merged.append(_with_columns({"name": name}, name, catalog, report))
    report.written = [str(e["name"]) for e in merged]
    report.missing = sorted(n for n, cols in catalog.items() if cols is None)
    return merged, report


def _with_columns(entry: dict[str, Any], name: str, catalog: CatalogColumns,
                  report: ExternalModelsFile) -> dict[str, Any]:
    columns = catalog[name]
    if columns is None:
        return entry
    bad = next((c for c in columns if not COLUMN.fullmatch(c)), None)
    if bad is not None:
        report.unsupported[name] = (f"column '{bad}' has a name mesh cannot declare "
                                    f"({COLUMN_RULE})")
        return entry
    dialect = str(entry.get("dialect", "spark"))
    entry["columns"] = {column: _in_dialect(kind, dialect) for column, kind in columns.items()}
    report.with_columns.append(name)
    return entry


def _in_dialect(spark_type: str, dialect: str) -> str:
    """A Spark column type as the entry's dialect writes it (the loader reads it back in that dialect)."""
    if dialect.lower() == "spark":
        return spark_type
    return exp.DataType.build(spark_type, dialect=get_dialect("spark")).sql(dialect=get_dialect(dialect))


def _normal_name(value: Any) -> str:
    try:
        return check_model_name(str(value))
    except ValueError:
        return str(value).strip().lower()


def dump_entries(entries: list[dict[str, Any]]) -> str:
    return yaml.safe_dump(entries, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def write_external_models(root: Path, catalog: CatalogColumns) -> ExternalModelsFile:
    """Merge `catalog` into the project's external models file and write it (atomically: an
    error leaves the old file as it was)."""
    path = external_models_path(root)
    merged, report = merge_entries(read_entries(path, root), catalog)
    report.path, report.shown = path, relative_path(path, root)
    if not merged and not path.exists():  # nothing to declare: no empty file
        return report
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dump_entries(merged), encoding="utf-8")
    tmp.replace(path)
    return report
