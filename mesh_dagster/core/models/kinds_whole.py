"""The kinds built whole or not at all: SEED, FULL, VIEW (each write rebuilds the object), and
EMBEDDED, EXTERNAL (no physical object of ours)."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Entry, Value
from mesh_dagster.core.models.kinds_base import BaseKind, KindName, PropertyReader
from mesh_dagster.core.models.property_values import read_bool, read_int

# ---------------------------------------------------------------------------------------------
# SEED


# The CSV settings the seed reader honours (pandas.read_csv arguments of the same name).
ROOT_MARKER = "$root"  # a seed path starting with it is relative to the project's folder, as in SQLMesh
CSV_SETTINGS = {"delimiter": "char", "quotechar": "char", "escapechar": "char", "encoding": "string",
                "na_values": "strings", "keep_default_na": "bool"}


def _csv_settings(value: Value, path: str) -> dict[str, Any]:
    if value.kind != "group":
        raise ModelError("csv_settings is written `csv_settings (delimiter = ';', ...)`", path, value.line)
    settings: dict[str, Any] = {}
    for item in value.items:
        key = (item.key or "").lower()
        if key not in CSV_SETTINGS or item.value is None:
            raise ModelError(f"Unsupported csv_settings entry '{item.raw}'. Supported: "
                             f"{', '.join(f'{k} = ...' for k in CSV_SETTINGS)}", path, item.line)
        settings[key] = _csv_value(key, item.value, path)
    return {"csv_settings": settings}


def _csv_value(key: str, value: Value, path: str) -> Any:
    """A CSV setting as the Python value pandas expects (`keep_default_na = false` is False, not
    the truthy string 'false')."""
    shape = CSV_SETTINGS[key]
    if shape == "bool":
        return read_bool(value, path)
    if shape == "strings":
        return value.as_list()
    if value.kind not in ("string", "scalar", "number"):
        raise ModelError(f"csv_settings {key} must be a string", path, value.line)
    if shape == "char" and len(value.text) != 1:
        raise ModelError(f"csv_settings {key} must be one character, got '{value.text}'", path, value.line)
    if key == "encoding":
        try:
            codecs.lookup(value.text)
        except LookupError:
            raise ModelError(f"Unknown csv_settings encoding '{value.text}'", path, value.line) from None
    return value.text


SQLMESH_SEED_BATCH = 1000


class SeedKind(BaseKind):
    """A CSV file loaded into a table, whole, each time it changes."""

    name: Literal[KindName.SEED] = KindName.SEED
    path: str = ""  # the CSV file, absolute once loaded (see `located`); the reader requires one
    csv_settings: dict[str, Any] = Field(default_factory=dict)
    batch_size: int | None = None  # rows sent to Spark at a time; the seed is still written in one write

    has_query: ClassVar[bool] = False
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "path": lambda value, path: {"path": value.text},
        "csv_settings": _csv_settings,
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "path": "SEED models need a path, e.g. `kind SEED (path '../seeds/data.csv')`"}

    def build_step(self, full_refresh: bool) -> str | None:
        return "Insert seed file"

    @property
    def is_materialized(self) -> bool:
        return True

    @property
    def is_timeless(self) -> bool:
        return True

    @property
    def seed(self) -> SeedKind:
        return self

    def data_hash_values(self) -> list[str]:
        # The file's content is hashed by the fingerprint (from the loader's check), not its path.
        # SQLMesh hashes a seed's batch_size with its data (its default is 1000): listed only when
        # another is set, so seeds that set none keep their fingerprints.
        batch = [f"batch_size={self.batch_size}"] if self.batch_size not in (None, SQLMESH_SEED_BATCH) else []
        return [*super().data_hash_values(), *(f"{k}={v}" for k, v in sorted(self.csv_settings.items())), *batch]

    def located(self, directory: Path, root: Path) -> SeedKind:
        first, *rest = Path(self.path).parts or ("",)
        where = root.joinpath(*rest) if first.lower() == ROOT_MARKER else directory / self.path
        return self.model_copy(update={"path": str(where.resolve())})


# ---------------------------------------------------------------------------------------------
# FULL, VIEW


class FullKind(BaseKind):
    """A table rebuilt whole from its query whenever it runs."""

    name: Literal[KindName.FULL] = KindName.FULL

    allows_python: ClassVar[bool] = True

    @property
    def is_materialized(self) -> bool:
        return True


class ViewKind(BaseKind):
    """A Spark view over the query; `materialized true` makes it a table rebuilt like FULL
    (Spark has no materialized views: a table holding the query's result stands in)."""

    name: Literal[KindName.VIEW] = KindName.VIEW
    materialized: bool = False

    follows_parent_tables: ClassVar[bool] = True  # materialized or not, as always
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "materialized": lambda value, path: {"materialized": read_bool(value, path)},
    }

    @property
    def is_materialized(self) -> bool:
        return self.materialized

    @property
    def is_view(self) -> bool:
        return not self.materialized

    @property
    def written_as(self) -> type[BaseKind]:
        return FullKind if self.materialized else ViewKind

    def build_step(self, full_refresh: bool) -> str | None:
        return super().build_step(full_refresh) if self.materialized else "Recreate view"

    @property
    def is_timeless(self) -> bool:
        return not self.materialized

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), *(["materialized"] if self.materialized else [])]


# ---------------------------------------------------------------------------------------------
# EMBEDDED, EXTERNAL: no physical object


class EmbeddedKind(BaseKind):
    """A query inlined as a subquery wherever it is read; nothing is built."""

    name: Literal[KindName.EMBEDDED] = KindName.EMBEDDED

    is_symbolic: ClassVar[bool] = True
    is_inlined: ClassVar[bool] = True


class ExternalKind(BaseKind):
    """A table built by someone else, declared in external_models.yaml so models may read it."""

    name: Literal[KindName.EXTERNAL] = KindName.EXTERNAL

    is_symbolic: ClassVar[bool] = True
    is_external: ClassVar[bool] = True
    has_query: ClassVar[bool] = False

    def is_scheduled(self, has_audits: bool) -> bool:
        # Its audits run for its intervals (its cron, from its start) before the models reading it.
        return has_audits

    @classmethod
    def read(cls, items: list[Entry], path: str, line: int) -> BaseKind:
        raise ModelError("EXTERNAL models are declared in external_models.yaml (`- name: schema.table`), not in "
                         "models/", path, line)

