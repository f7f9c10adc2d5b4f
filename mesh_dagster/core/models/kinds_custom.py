"""CUSTOM: a table written by the user's own materialization class (core/models/materialization.py).

The kind names the class (`materialization 'name'`) and hands it properties
(`materialization_properties (key = value, ...)`). mesh_dagster cannot know what the class does
with an interval, so a CUSTOM model is treated as building on its table's history (like
INCREMENTAL_UNMANAGED): its batches run in order, and restating any part rebuilds all of it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Value
from mesh_dagster.core.models.kinds_base import Batching, KindName, PropertyReader
from mesh_dagster.core.models.kinds_incremental import IncrementalKind
from mesh_dagster.core.models.property_values import read_int


def _materialization(value: Value, path: str) -> dict[str, Any]:
    name = value.text.strip()
    if value.kind not in ("string", "scalar") or not name or not name.replace("_", "a").replace(".", "a").isalnum():
        raise ModelError("materialization is written `materialization 'name'` (the NAME of a class in "
                         "materializations/*.py)", path, value.line)
    return {"materialization": name}


def _properties(value: Value, path: str) -> dict[str, Any]:
    """`materialization_properties (key = value, ...)`: each value kept as SQL text."""
    if value.kind != "group":
        raise ModelError("materialization_properties is written `materialization_properties (key = value, ...)`",
                         path, value.line)
    properties: dict[str, str] = {}
    for item in value.items:
        if not item.key or item.value is None:
            raise ModelError(f"Materialization properties are written `key = value`, got '{item.raw}'", path,
                             item.line)
        properties[item.key.lower()] = item.value.source
    return {"materialization_properties": properties}


class CustomKind(IncrementalKind):
    """A table written by the materialization class of the project named `materialization`."""

    name: Literal[KindName.CUSTOM] = KindName.CUSTOM
    materialization: str
    materialization_properties: dict[str, str] = {}
    batch_size: int | None = None
    lookback: int = 0

    restates_full_history: ClassVar[bool] = True
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "materialization": "A CUSTOM kind names its materialization: kind CUSTOM (materialization 'name')"}
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "materialization": _materialization,
        "materialization_properties": _properties,
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
        "lookback": lambda value, path: {"lookback": read_int(value, path, "lookback", minimum=0)},
        **IncrementalKind.COMMON_READERS,
    }

    @property
    def custom(self) -> CustomKind:
        return self

    @property
    def batching(self) -> Batching:
        return Batching(self.batch_size, self.lookback, 1)

    def row_settings(self) -> tuple:
        return (self.materialization, tuple(sorted(self.materialization_properties.items())))

    def data_hash_values(self) -> list[str]:
        """As SQLMesh: the materialization, its properties and the lookback decide the rows."""
        properties = [f"{k}={v}" for k, v in sorted(self.materialization_properties.items())]
        return [*super().data_hash_values(), self.materialization, *properties, f"lookback={self.lookback}"]

    def metadata_hash_values(self) -> list[str]:
        return [*super().metadata_hash_values(), f"batch_size={self.batch_size}"]
