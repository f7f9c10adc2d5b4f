"""SQLMesh's kind classes, as Python models written for SQLMesh construct them.

`@model(..., kind=IncrementalByTimeRangeKind(time_column=TimeColumn(column="ds", format="%Y-%m-%d"),
batch_size=1))` is how SQLMesh's own examples spell what mesh_dagster reads as
`kind=dict(name="INCREMENTAL_BY_TIME_RANGE", time_column=("ds", "%Y-%m-%d"), batch_size=1)`. These
classes only carry what was written: the loader reads them exactly as it reads that dict (the
same properties, the same checks, the same errors at the decorator's line), so one kind has one
reader whichever way it was written. They are answered under SQLMesh's module names by
core/models/sqlmesh_names.py when SQLMesh is not installed.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mesh_dagster.core.models.kinds_base import KindName


class TimeColumn:
    """SQLMesh's `TimeColumn(column="ds", format="%Y-%m-%d")`: `time_column (ds, '%Y-%m-%d')`."""

    def __init__(self, column: Any, format: str | None = None) -> None:  # noqa: A002 - SQLMesh's keyword
        self.column, self.format = column, format

    def written(self) -> Any:
        return str(self.column) if self.format is None else (str(self.column), self.format)


class SqlmeshKindSpec:
    """A SQLMesh kind class: its kind's name and the properties given to it, by keyword."""

    kind: ClassVar[KindName]

    def __init__(self, **properties: Any) -> None:
        self.properties = properties

    def as_dict(self) -> dict[str, Any]:
        """What `kind=dict(name=..., ...)` would say: time columns written as a MODEL block has them."""
        return {"name": self.kind.value,
                **{key: value.written() if isinstance(value, TimeColumn) else value
                   for key, value in self.properties.items()}}


def plain_kind(value: Any) -> Any:
    """`value` as `kind=` is read otherwise: a SQLMesh kind class as its dict, anything else as it is."""
    return value.as_dict() if isinstance(value, SqlmeshKindSpec) else value


# SQLMesh's class names (its MANAGED kind has none here: the reader refuses MANAGED by name).


class FullKind(SqlmeshKindSpec):
    kind = KindName.FULL


class ViewKind(SqlmeshKindSpec):
    kind = KindName.VIEW


class EmbeddedKind(SqlmeshKindSpec):
    kind = KindName.EMBEDDED


class SeedKind(SqlmeshKindSpec):
    kind = KindName.SEED


class ExternalKind(SqlmeshKindSpec):
    kind = KindName.EXTERNAL


class IncrementalByTimeRangeKind(SqlmeshKindSpec):
    kind = KindName.INCREMENTAL_BY_TIME_RANGE


class IncrementalByUniqueKeyKind(SqlmeshKindSpec):
    kind = KindName.INCREMENTAL_BY_UNIQUE_KEY


class IncrementalByPartitionKind(SqlmeshKindSpec):
    kind = KindName.INCREMENTAL_BY_PARTITION


class IncrementalUnmanagedKind(SqlmeshKindSpec):
    kind = KindName.INCREMENTAL_UNMANAGED


class SCDType2ByTimeKind(SqlmeshKindSpec):
    kind = KindName.SCD_TYPE_2_BY_TIME


class SCDType2ByColumnKind(SqlmeshKindSpec):
    kind = KindName.SCD_TYPE_2_BY_COLUMN


NAMES = tuple(cls.__name__ for cls in (
    TimeColumn, FullKind, ViewKind, EmbeddedKind, SeedKind, ExternalKind, IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind, IncrementalByPartitionKind, IncrementalUnmanagedKind, SCDType2ByTimeKind,
    SCDType2ByColumnKind))  # what sqlmesh_names answers under `sqlmesh.core.model(.kind)`
