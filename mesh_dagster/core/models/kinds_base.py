"""What every model kind has and answers: the base class the kinds of kinds_*.py derive from.

A kind class holds only the properties written inside its `kind NAME (...)` (a FULL kind has no
`time_column` at all), reads them from the definition file, says which of them the fingerprint
hashes, and answers what the rest of mesh_dagster asks about a kind: its flags (is it
incremental, does it own a table, a view, nothing...), how its backfills are batched, which
policies its kept table follows, and which write strategy builds it (execution/evaluate/strategies.py
looks the name up). Nothing outside the kind modules asks a kind for its class: a kind with
properties of its own offers them through an accessor that is None on the others (`seed`,
`time_range`, `scd_type_2`, `upsert`, `custom`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, model_validator

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Entry, Value
from mesh_dagster.core.time.cron import IntervalUnit

if TYPE_CHECKING:
    from mesh_dagster.core.models.kinds_custom import CustomKind
    from mesh_dagster.core.models.kinds_incremental import IncrementalByTimeRangeKind
    from mesh_dagster.core.models.kinds_scd_type_2 import ScdType2Kind
    from mesh_dagster.core.models.kinds_whole import SeedKind
    from mesh_dagster.core.models.merge import Upsert


class KindName(str, Enum):
    SEED = "SEED"
    FULL = "FULL"
    VIEW = "VIEW"
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    INCREMENTAL_BY_UNIQUE_KEY = "INCREMENTAL_BY_UNIQUE_KEY"
    INCREMENTAL_BY_PARTITION = "INCREMENTAL_BY_PARTITION"
    INCREMENTAL_UNMANAGED = "INCREMENTAL_UNMANAGED"
    EMBEDDED = "EMBEDDED"
    EXTERNAL = "EXTERNAL"
    SCD_TYPE_2_BY_TIME = "SCD_TYPE_2_BY_TIME"
    SCD_TYPE_2_BY_COLUMN = "SCD_TYPE_2_BY_COLUMN"
    CUSTOM = "CUSTOM"
    STANDALONE_AUDIT = "STANDALONE_AUDIT"  # not written as a kind: an `AUDIT (..., standalone true)` node


# Other spellings of a kind name, as SQLMesh accepts them.
KIND_ALIASES = {"SCD_TYPE_2": KindName.SCD_TYPE_2_BY_TIME}


# Reads one property written inside `kind NAME (...)`: its value -> the fields it sets.
PropertyReader = Callable[[Value, str], dict[str, Any]]

# Every property of the one ModelKind class all kinds shared before kinds had classes, at its
# default. Snapshots stored then carry all of them on every kind (see `_drop_old_defaults`).
_OLD_DEFAULTS: dict[str, Any] = {
    "time_column": None, "time_column_format": "%Y-%m-%d", "batch_size": None, "batch_concurrency": 1,
    "lookback": 0, "materialized": False, "path": None, "csv_settings": {},
}


class Batching(NamedTuple):
    """How a kind splits a backfill into batches (kinds built whole have one batch)."""

    size: int | None = None  # intervals per batch; None: the whole backfill is one batch
    lookback: int = 0  # intervals before a run's range recomputed with it
    concurrency: int = 1  # batches of one model evaluated at once


WHOLE = Batching()


def refused(message: str) -> PropertyReader:
    """A property SQLMesh has that we parse but do not implement: refused at its line."""

    def refuse(value: Value, path: str) -> dict[str, Any]:
        raise ModelError(message, path, value.line)

    return refuse


class BaseKind(BaseModel):
    """What every kind has: its name, its flags, and reading `kind NAME (...)`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: KindName

    # Flags that hold for every model of a kind, whatever its properties.
    is_incremental: ClassVar[bool] = False  # built interval by interval (batches), not whole
    is_symbolic: ClassVar[bool] = False  # no physical object at all
    is_inlined: ClassVar[bool] = False  # its query is inlined into its readers' queries
    is_external: ClassVar[bool] = False  # a table mesh reads but never builds
    is_standalone_audit: ClassVar[bool] = False  # an audit scheduled on its own (audits/*.sql, standalone true)
    has_query: ClassVar[bool] = True  # whether a model of this kind is written as a query
    # Its intervals cannot be recomputed one by one (each write builds on the table's history), so
    # restating any part of it rebuilds all of it, and its batches run in order.
    restates_full_history: ClassVar[bool] = False
    allows_python: ClassVar[bool] = False  # whether a Python model (models/*.py) may be of this kind
    # Its physical object reads its parents' physical tables (a view over them): it needs one of its
    # own whenever a parent moves to another table, whatever the change's category says.
    follows_parent_tables: ClassVar[bool] = False
    # The properties written inside `kind NAME (...)`, and those that must be written.
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {}
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {}  # property -> the message when it is missing

    @property
    def is_materialized(self) -> bool:
        """Whether its physical object is a table."""
        return False

    @property
    def is_view(self) -> bool:
        """Whether its physical object is a Spark view."""
        return False

    @property
    def is_timeless(self) -> bool:
        """Complete once built: its one interval spans all time."""
        return False

    def is_scheduled(self, has_audits: bool) -> bool:
        """Whether its intervals are computed and recorded (a model of this kind with `has_audits`):
        every kind with a physical object; of the others, only what runs audits (SQLMesh calls them
        evaluatable)."""
        return not self.is_symbolic

    @property
    def written_as(self) -> type[BaseKind]:
        """The kind whose write strategy builds this model's physical object: its own. Strategies
        register against kind classes (execution/evaluate/strategies.py, `@writes`); a kind whose models are
        written in more than one way names per model the kind each is written as."""
        return type(self)

    def build_step(self, full_refresh: bool) -> str | None:
        """What a backfill does to build a model of this kind, as `mesh plan --explain` says it;
        None: it inserts its intervals (the explanation lists them)."""
        return "Fully refresh table" if full_refresh else None

    @property
    def batching(self) -> Batching:
        """How its backfills are split into batches: kinds built whole have one batch."""
        return WHOLE

    @property
    def is_forward_only(self) -> bool:
        """Whether every change keeps the model's table (only kinds with history can)."""
        return False

    @property
    def restatement_disabled(self) -> bool:
        """Whether restating it is refused (its history cannot, or must not, be recomputed)."""
        return False

    @property
    def schema_change_policies(self) -> tuple[SchemaChangePolicy, SchemaChangePolicy]:
        """(on_destructive_change, on_additive_change): kinds rebuilt whole never keep a table."""
        return SchemaChangePolicy.ALLOW, SchemaChangePolicy.ALLOW

    def with_policy_defaults(self, destructive: SchemaChangePolicy | None,
                             additive: SchemaChangePolicy | None) -> BaseKind:
        """This kind with `model_defaults`' policies where the model wrote none (kinds keeping no
        table have none)."""
        return self

    def check_interval_unit(self, unit: IntervalUnit, path: str, line: int) -> None:
        """A ModelError at `path:line` when the kind cannot serve intervals of `unit`."""

    # Accessors to what only some kinds hold: None on the others.
    @property
    def seed(self) -> SeedKind | None:
        """The CSV file its rows are loaded from (a SEED kind)."""
        return None

    @property
    def time_range(self) -> IncrementalByTimeRangeKind | None:
        """Its time column and format (an INCREMENTAL_BY_TIME_RANGE kind)."""
        return None

    @property
    def scd_type_2(self) -> ScdType2Kind | None:
        """How it keeps the versions of each row (an SCD type 2 kind)."""
        return None

    @property
    def custom(self) -> CustomKind | None:
        """Its materialization class and properties (a CUSTOM kind)."""
        return None

    @property
    def upsert(self) -> Upsert | None:
        """How its batches are merged into the table by key (an INCREMENTAL_BY_UNIQUE_KEY kind)."""
        return None

    def data_hash_values(self) -> list[str]:
        """What of the kind can change the model's rows (part of its data hash)."""
        return [self.name.value]

    def metadata_hash_values(self) -> list[str]:
        """What of the kind changes how the model is run, not its rows (part of its metadata hash)."""
        return []

    def located(self, directory: Path, root: Path) -> BaseKind:
        """This kind with the files it names made absolute: from the model file's `directory`, or
        from the project's `root` where the path starts with SQLMesh's `$root`."""
        return self

    def added_columns(self) -> dict[str, str]:
        """Columns its table has beyond the query's (name -> Spark type), after them."""
        return {}

    def checked(self, properties: Mapping[str, Any], path: str, line: int) -> BaseKind:
        """This kind checked against the MODEL block's other `properties` (`dialect`,
        `partitioned_by`, ...), with what it holds in the model's dialect written as Spark SQL;
        a ModelError at `path:line` (the kind's) when they do not fit together."""
        return self

    def named_columns(self) -> dict[str, list[str]]:
        """Kind property -> the query's output columns it names (checked at load)."""
        return {}

    def row_settings(self) -> tuple:
        """The properties that decide which rows its table holds: changing one is a breaking change."""
        return ()

    @classmethod
    def kind_name(cls) -> KindName:
        default = cls.model_fields["name"].default
        assert isinstance(default, KindName), f"{cls.__name__} names no kind"
        return default

    @classmethod
    def read(cls, items: list[Entry], path: str, line: int) -> BaseKind:
        """The kind from the properties written inside `kind NAME (...)` at `path:line`."""
        fields: dict[str, Any] = {}
        for item in items:
            prop = item.as_property()
            reader = cls.PROPERTY_READERS.get((prop.key or "").lower())
            if reader is None:
                raise ModelError(f"Unknown property '{prop.key}' for kind {cls.kind_name().value}", path, prop.line)
            assert prop.value is not None
            fields.update(reader(prop.value, path))
        for key, message in cls.REQUIRED_PROPERTIES.items():
            if key not in fields:
                raise ModelError(message, path, line)
        return cls(**fields)

    @model_validator(mode="before")
    @classmethod
    def _drop_old_defaults(cls, data: Any) -> Any:
        """A stored kind written before kinds had classes loads: the other kinds' properties it
        carries at their defaults are dropped; one set to anything else is refused."""
        if not isinstance(data, dict):
            return data
        foreign = [key for key in data if key in _OLD_DEFAULTS and key not in cls.model_fields]
        for key in foreign:
            if data[key] != _OLD_DEFAULTS[key]:
                raise ValueError(f"{key} is not a property of {cls.kind_name().value} models")
        return {key: value for key, value in data.items() if key not in foreign} if foreign else data


