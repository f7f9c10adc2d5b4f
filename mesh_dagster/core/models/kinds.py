"""Model kinds: one class per kind, owning everything that differs between kinds, and the one
registry of them (`AnyKind`, `KIND_CLASSES`, `ModelKind`).

The classes live by family: kinds_base.py (what every kind has and answers, `BaseKind`),
kinds_whole.py (SEED, FULL, VIEW, EMBEDDED, EXTERNAL), kinds_incremental.py (the kinds keeping
history: by time range, unique key, partition, unmanaged), kinds_scd_type_2.py and kinds_custom.py
(CUSTOM: the user's materialization class). Everything is
importable from here. Adding a kind is a `KindName`, its class, a line in `AnyKind`, and a
strategy registered for the class in execution/evaluate/strategies.py (or the class names, in
`written_as`, a kind whose strategy writes it): no `if` chain anywhere asks which kind a model is.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from mesh_dagster.core.models.kinds_audit import StandaloneAuditKind
from mesh_dagster.core.models.kinds_base import (
    KIND_ALIASES,
    WHOLE,
    BaseKind,
    Batching,
    KindName,
    PropertyReader,
)
from mesh_dagster.core.models.kinds_custom import CustomKind
from mesh_dagster.core.models.kinds_incremental import (
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalKind,
    IncrementalUnmanagedKind,
)
from mesh_dagster.core.models.kinds_scd_type_2 import ScdType2ByColumnKind, ScdType2ByTimeKind, ScdType2Kind
from mesh_dagster.core.models.kinds_whole import CSV_SETTINGS, EmbeddedKind, ExternalKind, FullKind, SeedKind, ViewKind

__all__ = [
    "CSV_SETTINGS", "KIND_ALIASES", "KIND_CLASSES", "WHOLE", "AnyKind", "BaseKind", "Batching", "CustomKind",
    "EmbeddedKind",
    "ExternalKind", "FullKind", "IncrementalByPartitionKind", "IncrementalByTimeRangeKind",
    "IncrementalByUniqueKeyKind", "IncrementalKind", "IncrementalUnmanagedKind", "KindName", "ModelKind",
    "PropertyReader", "ScdType2ByColumnKind", "ScdType2ByTimeKind", "ScdType2Kind", "SeedKind",
    "StandaloneAuditKind", "ViewKind",
    "kind_class",
]

AnyKind = Annotated[
    SeedKind | FullKind | ViewKind | IncrementalByTimeRangeKind | IncrementalByUniqueKeyKind
    | IncrementalByPartitionKind | IncrementalUnmanagedKind | EmbeddedKind | ExternalKind | ScdType2ByTimeKind
    | ScdType2ByColumnKind | CustomKind | StandaloneAuditKind,
    Field(discriminator="name"),
]
KIND_CLASSES: dict[KindName, type[BaseKind]] = {cls.kind_name(): cls for cls in get_args(get_args(AnyKind)[0])}


def kind_class(name: str) -> type[BaseKind]:
    """The class of the kind written `name` (upper case; aliases such as SCD_TYPE_2 included);
    ValueError for an unknown name."""
    return KIND_CLASSES[KIND_ALIASES.get(name) or KindName(name)]


_ANY_KIND: TypeAdapter[AnyKind] = TypeAdapter(AnyKind)


def ModelKind(**fields: Any) -> AnyKind:  # named like the one class every kind used to be
    """The kind named by `fields["name"]` with its other fields, as a stored record names it."""
    return _ANY_KIND.validate_python(fields)
