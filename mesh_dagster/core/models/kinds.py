"""Model kinds: one class per kind, owning everything that differs between kinds.

A kind class holds only the properties written inside its `kind NAME (...)` (a FULL kind has no
`time_column` at all), reads them from the definition file, says which of them the fingerprint
hashes, and answers what the rest of mesh_dagster asks about a kind (is it incremental, does it
own a table, a view, nothing...). Adding a kind is adding a class here and to `AnyKind`.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.config.names import IDENTIFIER, unquote
from mesh_dagster.core.config.types import to_spark_type
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Entry, Value
from mesh_dagster.core.models.property_values import read_bool, read_column, read_int
from mesh_dagster.core.time.cron import IntervalUnit

if TYPE_CHECKING:
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


def _refused(message: str) -> PropertyReader:
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
    has_query: ClassVar[bool] = True  # whether a model of this kind is written as a query
    # Its intervals cannot be recomputed one by one (each write builds on the table's history), so
    # restating any part of it rebuilds all of it, and its batches run in order.
    restates_full_history: ClassVar[bool] = False
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

    def data_hash_values(self) -> list[str]:
        """What of the kind can change the model's rows (part of its data hash)."""
        return [self.name.value]

    def metadata_hash_values(self) -> list[str]:
        """What of the kind changes how the model is run, not its rows (part of its metadata hash)."""
        return []

    def located(self, directory: Path) -> BaseKind:
        """This kind with the files it names made absolute from the model file's `directory`."""
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


# ---------------------------------------------------------------------------------------------
# SEED


# The CSV settings the seed reader honours (pandas.read_csv arguments of the same name).
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


class SeedKind(BaseKind):
    """A CSV file loaded into a table, whole, each time it changes."""

    name: Literal[KindName.SEED] = KindName.SEED
    path: str = ""  # the CSV file, absolute once loaded (see `located`); the reader requires one
    csv_settings: dict[str, Any] = Field(default_factory=dict)

    has_query: ClassVar[bool] = False
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "path": lambda value, path: {"path": value.text},
        "csv_settings": _csv_settings,
        "batch_size": _refused("batch_size for SEED models is not supported by mesh_dagster yet (a seed is loaded "
                               "in one write)"),
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "path": "SEED models need a path, e.g. `kind SEED (path '../seeds/data.csv')`"}

    @property
    def is_materialized(self) -> bool:
        return True

    @property
    def is_timeless(self) -> bool:
        return True

    def data_hash_values(self) -> list[str]:
        # The file's content is hashed by the fingerprint (from the loader's check), not its path.
        return [*super().data_hash_values(), *(f"{k}={v}" for k, v in sorted(self.csv_settings.items()))]

    def located(self, directory: Path) -> SeedKind:
        return self.model_copy(update={"path": str((directory / self.path).resolve())})


# ---------------------------------------------------------------------------------------------
# FULL, VIEW


class FullKind(BaseKind):
    """A table rebuilt whole from its query whenever it runs."""

    name: Literal[KindName.FULL] = KindName.FULL

    @property
    def is_materialized(self) -> bool:
        return True


class ViewKind(BaseKind):
    """A Spark view over the query; `materialized true` makes it a table rebuilt like FULL
    (Spark has no materialized views: a table holding the query's result stands in)."""

    name: Literal[KindName.VIEW] = KindName.VIEW
    materialized: bool = False

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
    def is_timeless(self) -> bool:
        return not self.materialized

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), *(["materialized"] if self.materialized else [])]


# ---------------------------------------------------------------------------------------------
# INCREMENTAL_BY_TIME_RANGE


def _time_column(value: Value, path: str) -> dict[str, Any]:
    parts = value.as_list()
    if not 1 <= len(parts) <= 2:
        raise ModelError(
            "time_column is written `time_column col` or `time_column (col, '%Y-%m-%d')`", path, value.line
        )
    fields: dict[str, Any] = {"time_column": read_column(parts[0], path, value.line, "time_column")}
    if len(parts) > 1:
        fields["time_column_format"] = parts[1]
    return fields


def _partition_by_time_column(value: Value, path: str) -> dict[str, Any]:
    """`partition_by_time_column true` is what we always do; false is refused."""
    if not read_bool(value, path):
        raise ModelError("partition_by_time_column false is not supported by mesh_dagster yet: incremental "
                         "tables are always partitioned by their time column", path, value.line)
    return {}


def _policy(key: str) -> PropertyReader:
    def read(value: Value, path: str) -> dict[str, Any]:
        try:
            return {key: SchemaChangePolicy(value.text.strip().lower())}
        except ValueError:
            known = ", ".join(p.value for p in SchemaChangePolicy)
            raise ModelError(f"{key} must be one of {known}, got '{value.text}'", path, value.line) from None

    return read


class IncrementalKind(BaseKind):
    """What every kind that keeps history across runs shares: how its table may evolve.

    A forward-only model keeps its table when its query changes (the schema is migrated in
    place and only new intervals see the new logic); `disable_restatement` protects history that
    cannot be recomputed; the policies decide what a schema change of a kept table may do.
    """

    forward_only: bool = False
    disable_restatement: bool = False
    on_destructive_change: SchemaChangePolicy = SchemaChangePolicy.ERROR
    on_additive_change: SchemaChangePolicy = SchemaChangePolicy.ALLOW

    COMMON_READERS: ClassVar[dict[str, PropertyReader]] = {
        "forward_only": lambda value, path: {"forward_only": read_bool(value, path)},
        "disable_restatement": lambda value, path: {"disable_restatement": read_bool(value, path)},
        "on_destructive_change": _policy("on_destructive_change"),
        "on_additive_change": _policy("on_additive_change"),
    }

    @property
    def is_materialized(self) -> bool:
        return True

    def metadata_hash_values(self) -> list[str]:
        # Only what differs from the defaults, so models written before these existed keep their fingerprints.
        values = super().metadata_hash_values()
        for key in ("forward_only", "disable_restatement", "on_destructive_change", "on_additive_change"):
            if key in self.model_fields_set and getattr(self, key) != type(self).model_fields[key].default:
                value = getattr(self, key)
                values.append(f"{key}={value.value if isinstance(value, Enum) else value}")
        return values

    def with_policy_defaults(self, destructive: SchemaChangePolicy | None,
                             additive: SchemaChangePolicy | None) -> IncrementalKind:
        """This kind with `model_defaults`' policies where the model wrote none."""
        update: dict[str, Any] = {}
        if destructive is not None and "on_destructive_change" not in self.model_fields_set:
            update["on_destructive_change"] = destructive
        if additive is not None and "on_additive_change" not in self.model_fields_set:
            update["on_additive_change"] = additive
        if not update:
            return self
        return type(self)(**{**{k: getattr(self, k) for k in self.model_fields_set}, **update})


class IncrementalByTimeRangeKind(IncrementalKind):
    """A table filled interval by interval of its time column; each interval is overwritten whole."""

    name: Literal[KindName.INCREMENTAL_BY_TIME_RANGE] = KindName.INCREMENTAL_BY_TIME_RANGE
    time_column: str
    time_column_format: str = "%Y-%m-%d"
    batch_size: int | None = None
    batch_concurrency: int = 1  # batches of one model evaluated at once (intervals are independent)
    lookback: int = 0

    is_incremental: ClassVar[bool] = True
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "time_column": _time_column,
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
        "lookback": lambda value, path: {"lookback": read_int(value, path, "lookback", minimum=0)},
        "batch_concurrency": lambda value, path: {
            "batch_concurrency": read_int(value, path, "batch_concurrency", minimum=1)},
        "partition_by_time_column": _partition_by_time_column,
        **IncrementalKind.COMMON_READERS,
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "time_column": "INCREMENTAL_BY_TIME_RANGE models need a time_column, e.g. "
                       "`kind INCREMENTAL_BY_TIME_RANGE (time_column event_date)`"}

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), self.time_column, self.time_column_format, str(self.lookback)]

    def row_settings(self) -> tuple:
        return (self.time_column, self.time_column_format, self.lookback)

    def metadata_hash_values(self) -> list[str]:
        values = [str(self.batch_size)] if self.batch_size is not None else []
        if self.batch_concurrency != 1:
            values.append(f"batch_concurrency={self.batch_concurrency}")
        return values + super().metadata_hash_values()

    def check_time_format(self, unit: IntervalUnit, path: str, line: int) -> None:
        """A custom time_column format must tell the model's intervals apart: with `'%Y-%m'` on a
        daily model every day of a month would bound the same rows."""
        sample = {IntervalUnit.YEAR: datetime(2021, 1, 1), IntervalUnit.MONTH: datetime(2021, 3, 1),
                  IntervalUnit.DAY: datetime(2021, 3, 4), IntervalUnit.HOUR: datetime(2021, 3, 4, 5)}.get(
            unit, datetime(2021, 3, 4, 5, 30))
        fmt = self.time_column_format
        try:
            same = datetime.strptime(sample.strftime(fmt), fmt) == sample
        except ValueError:
            same = False
        if not same:
            raise ModelError(f"time_column format '{fmt}' cannot tell the {unit.value} intervals of this model apart "
                             "(it must hold every part down to the interval, e.g. '%Y-%m-%d' or '%Y%m%d')", path, line)


# ---------------------------------------------------------------------------------------------
# SCD_TYPE_2_BY_TIME (alias SCD_TYPE_2), SCD_TYPE_2_BY_COLUMN


# Types `valid_from`/`valid_to` may have: they hold `updated_at` values and execution times.
_TIME_DATA_TYPES = ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")


def _column_list(key: str) -> PropertyReader:
    """`key col`, `key (a, b)` or `key [a, b]`: column names, never expressions."""

    def read(value: Value, path: str) -> dict[str, Any]:
        names = value.as_list() if value.kind == "group" else [value.text]
        if not names or not all(name.strip() for name in names):
            raise ModelError(f"{key} names no column", path, value.line)
        for name in names:
            if not IDENTIFIER.fullmatch(unquote(name)):
                raise ModelError(f"{key} must name output columns of the query; '{name}' is not a column name "
                                 "(expressions are not supported: compute the value as a column of the query)",
                                 path, value.line)
        return {key: [read_column(name, path, value.line, f"{key} column") for name in names]}

    return read


def _check_columns(value: Value, path: str) -> dict[str, Any]:
    """`columns *` (every column) or the columns whose change opens a new version."""
    if value.text.strip().strip("'\"") == "*":
        return {"columns": "*"}
    return _column_list("columns")(value, path)


def _one_column(key: str) -> PropertyReader:
    return lambda value, path: {key: read_column(value.text, path, value.line, key)}


def _time_data_type(value: Value, path: str) -> dict[str, Any]:
    try:
        spark_type = to_spark_type(value.text)
    except ValueError as e:
        raise ModelError(f"time_data_type: {e}", path, value.line) from None
    if spark_type not in _TIME_DATA_TYPES:
        raise ModelError(f"time_data_type must be a timestamp type ({', '.join(_TIME_DATA_TYPES)}), got "
                         f"'{value.text}'", path, value.line)
    return {"time_data_type": spark_type}


class ScdType2Kind(IncrementalKind):
    """A table keeping every version of each `unique_key`'s row, each valid from `valid_from` up to
    `valid_to` (NULL for the current one): each run compares the query's rows, a snapshot of the
    source, with the current versions and closes and opens versions where they changed.

    Each write builds on the history the previous ones left, so intervals run in order and are
    never recomputed alone (`restates_full_history`); forward-only and restatement disabled by
    default, since the history cannot be rebuilt from a source that only holds the present.
    """

    unique_key: list[str]
    valid_from_name: str = "valid_from"
    valid_to_name: str = "valid_to"
    invalidate_hard_deletes: bool = False
    time_data_type: str = "TIMESTAMP"
    batch_size: int | None = None
    forward_only: bool = True
    disable_restatement: bool = True

    is_incremental: ClassVar[bool] = True
    restates_full_history: ClassVar[bool] = True
    COMMON_SCD_READERS: ClassVar[dict[str, PropertyReader]] = {
        "unique_key": _column_list("unique_key"),
        "valid_from_name": _one_column("valid_from_name"),
        "valid_to_name": _one_column("valid_to_name"),
        "invalidate_hard_deletes": lambda value, path: {"invalidate_hard_deletes": read_bool(value, path)},
        "time_data_type": _time_data_type,
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
        "batch_concurrency": _refused("batch_concurrency cannot be set for SCD_TYPE_2 models: each batch builds on "
                                      "the history the previous one wrote, so they run one after another"),
        "lookback": _refused("lookback cannot be set for SCD_TYPE_2 models: an interval already folded into the "
                             "history cannot be recomputed alone"),
        **IncrementalKind.COMMON_READERS,
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {}

    @classmethod
    def read(cls, items: list[Entry], path: str, line: int) -> BaseKind:
        kind = super().read(items, path, line)
        assert isinstance(kind, ScdType2Kind)
        if kind.valid_from_name == kind.valid_to_name:
            raise ModelError(f"valid_from_name and valid_to_name are both '{kind.valid_to_name}': the two columns "
                             "need different names", path, line)
        return kind

    def added_columns(self) -> dict[str, str]:
        return {self.valid_from_name: self.time_data_type, self.valid_to_name: self.time_data_type}

    @property
    def stamp_column(self) -> str | None:
        """The column whose value stamps a change (closes the old version, opens the new one);
        None: the run's execution time does."""
        raise NotImplementedError

    @property
    def first_valid_from(self) -> Literal["epoch", "updated_at", "execution_time"]:
        """Where the versions of a first load (an empty table) start: 1970-01-01 00:00:00, the row's
        `stamp_column` value, or the execution time."""
        raise NotImplementedError

    def change_columns(self, columns: list[str]) -> list[str] | None:
        """Of the query's `columns`, those whose change opens a new version; None: a newer
        `stamp_column` value does."""
        raise NotImplementedError

    def named_columns(self) -> dict[str, list[str]]:
        return {"unique_key": list(self.unique_key)}

    def row_settings(self) -> tuple:
        return tuple(self.data_hash_values())

    def data_hash_values(self) -> list[str]:
        # batch_size is data here: a batch compares one snapshot of the source with the history, so
        # how many intervals one batch spans decides which versions are recorded.
        return [*super().data_hash_values(), ",".join(self.unique_key), self.valid_from_name, self.valid_to_name,
                f"invalidate_hard_deletes={self.invalidate_hard_deletes}", self.time_data_type,
                f"batch_size={self.batch_size}"]


class ScdType2ByTimeKind(ScdType2Kind):
    """SCD type 2 where the source says when each row last changed (`updated_at_name`): a row whose
    `updated_at` is newer than its current version's opens a new version from that time."""

    name: Literal[KindName.SCD_TYPE_2_BY_TIME] = KindName.SCD_TYPE_2_BY_TIME
    updated_at_name: str = "updated_at"
    updated_at_as_valid_from: bool = False

    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        **ScdType2Kind.COMMON_SCD_READERS,
        "updated_at_name": _one_column("updated_at_name"),
        "updated_at_as_valid_from": lambda value, path: {"updated_at_as_valid_from": read_bool(value, path)},
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "unique_key": "SCD_TYPE_2_BY_TIME models need a unique_key, e.g. "
                      "`kind SCD_TYPE_2_BY_TIME (unique_key id)`"}

    @property
    def stamp_column(self) -> str | None:
        return self.updated_at_name

    @property
    def first_valid_from(self) -> Literal["epoch", "updated_at", "execution_time"]:
        return "updated_at" if self.updated_at_as_valid_from else "epoch"

    def change_columns(self, columns: list[str]) -> list[str] | None:
        return None

    def named_columns(self) -> dict[str, list[str]]:
        return {**super().named_columns(), "updated_at_name": [self.updated_at_name]}

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), self.updated_at_name,
                f"updated_at_as_valid_from={self.updated_at_as_valid_from}"]


class ScdType2ByColumnKind(ScdType2Kind):
    """SCD type 2 for sources that do not say when a row changed: a change of any of `columns`
    (`*`: all of them) opens a new version, stamped with the run's execution time (or with
    `updated_at_name`'s value, for sources replayed one snapshot per batch)."""

    name: Literal[KindName.SCD_TYPE_2_BY_COLUMN] = KindName.SCD_TYPE_2_BY_COLUMN
    columns: list[str] | Literal["*"]
    execution_time_as_valid_from: bool = False
    updated_at_name: str | None = None

    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        **ScdType2Kind.COMMON_SCD_READERS,
        "columns": _check_columns,
        "execution_time_as_valid_from": lambda value, path: {
            "execution_time_as_valid_from": read_bool(value, path)},
        "updated_at_name": _one_column("updated_at_name"),
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "unique_key": "SCD_TYPE_2_BY_COLUMN models need a unique_key, e.g. "
                      "`kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, price])`",
        "columns": "SCD_TYPE_2_BY_COLUMN models need the columns whose change opens a new version, e.g. "
                   "`columns [name, price]` or `columns *`",
    }

    @property
    def stamp_column(self) -> str | None:
        return self.updated_at_name

    @property
    def first_valid_from(self) -> Literal["epoch", "updated_at", "execution_time"]:
        return "execution_time" if self.execution_time_as_valid_from else "epoch"

    def change_columns(self, columns: list[str]) -> list[str] | None:
        if self.columns != "*":
            return list(self.columns)
        ignored = {*self.unique_key, *([self.updated_at_name] if self.updated_at_name else [])}
        return [column for column in columns if column not in ignored]

    def named_columns(self) -> dict[str, list[str]]:
        named = super().named_columns()
        if self.columns != "*":
            named["columns"] = list(self.columns)
        if self.updated_at_name is not None:
            named["updated_at_name"] = [self.updated_at_name]
        return named

    def data_hash_values(self) -> list[str]:
        columns = self.columns if self.columns == "*" else ",".join(self.columns)
        return [*super().data_hash_values(), columns,
                f"execution_time_as_valid_from={self.execution_time_as_valid_from}", str(self.updated_at_name)]


# ---------------------------------------------------------------------------------------------
# INCREMENTAL_BY_UNIQUE_KEY, INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED: each write builds on
# the rows the table holds, so their history cannot be recomputed an interval at a time.


def _unique_key(value: Value, path: str) -> dict[str, Any]:
    parts = [value.text] if value.kind == "call" else value.as_list()
    if not parts or not all(p.strip() for p in parts):
        raise ModelError("unique_key is written `unique_key id`, `unique_key (id, ds)` or with expressions, "
                         "e.g. `unique_key (LOWER(email))`", path, value.line)
    return {"unique_key": tuple(p.strip() for p in parts)}


def _sql_text(key: str) -> PropertyReader:
    """A property holding SQL in the model's dialect, kept as written until `checked`."""
    return lambda value, path: {key: value.source.strip()}


def _one_batch_at_a_time(kind: str) -> PropertyReader:
    def read(value: Value, path: str) -> dict[str, Any]:
        if read_int(value, path, "batch_concurrency", minimum=1) != 1:
            raise ModelError(f"batch_concurrency is always 1 for {kind} models: each batch upserts into the rows "
                             "the previous one left, so batches run one after the other", path, value.line)
        return {}

    return read


def _forward_only_always(kind: str) -> PropertyReader:
    def read(value: Value, path: str) -> dict[str, Any]:
        if not read_bool(value, path):
            raise ModelError(f"forward_only is always true for {kind} models: their history cannot be rebuilt "
                             "from the query, so a change keeps the table", path, value.line)
        return {}

    return read


class IncrementalByUniqueKeyKind(IncrementalKind):
    """A table whose rows are upserted by key, batch after batch (see core/models/merge.py).

    Each batch's rows replace the table's rows with the same key (or update them per
    `when_matched`), new keys are inserted, other rows stay. A batch whose output holds a key
    twice is refused, naming the keys, and writes nothing: which of the two rows should win is
    the query's to say (e.g. `QUALIFY ROW_NUMBER() OVER (PARTITION BY id ORDER BY updated_at DESC) = 1`).
    The first batch writes the query's output. `unique_key`, `when_matched` and `merge_filter`
    are Spark SQL once `checked` (they are read in the model's dialect).
    """

    name: Literal[KindName.INCREMENTAL_BY_UNIQUE_KEY] = KindName.INCREMENTAL_BY_UNIQUE_KEY
    unique_key: tuple[str, ...]
    when_matched: str | None = None
    merge_filter: str | None = None
    batch_size: int | None = None
    lookback: int = 0

    is_incremental: ClassVar[bool] = True
    restates_full_history: ClassVar[bool] = True
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "unique_key": _unique_key,
        "when_matched": _sql_text("when_matched"),
        "merge_filter": _sql_text("merge_filter"),
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
        "lookback": lambda value, path: {"lookback": read_int(value, path, "lookback", minimum=0)},
        "batch_concurrency": _one_batch_at_a_time("INCREMENTAL_BY_UNIQUE_KEY"),
        **IncrementalKind.COMMON_READERS,
    }
    REQUIRED_PROPERTIES: ClassVar[dict[str, str]] = {
        "unique_key": "INCREMENTAL_BY_UNIQUE_KEY models need a unique_key, e.g. "
                      "`kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id)`"}

    def checked(self, properties: Mapping[str, Any], path: str, line: int) -> IncrementalByUniqueKeyKind:
        from mesh_dagster.core.models.merge import (
            MergeSyntaxError,
            normalize_merge_filter,
            normalize_unique_key,
            normalize_when_matched,
        )

        dialect = properties.get("dialect") or "spark"
        try:
            update: dict[str, Any] = {"unique_key": normalize_unique_key(self.unique_key, dialect)}
            if self.when_matched is not None:
                update["when_matched"] = normalize_when_matched(self.when_matched, dialect)
            if self.merge_filter is not None:
                update["merge_filter"] = normalize_merge_filter(self.merge_filter, dialect)
        except MergeSyntaxError as e:
            raise ModelError(str(e), path, line) from None
        return self.model_copy(update=update)

    def named_columns(self) -> dict[str, list[str]]:
        from mesh_dagster.core.models.merge import key_columns, row_columns

        named = {"unique_key": key_columns(self.unique_key)}
        if self.when_matched:
            named["when_matched"] = row_columns(self.when_matched, None)
        if self.merge_filter:
            named["merge_filter"] = row_columns(None, self.merge_filter)
        return named

    @property
    def upsert(self) -> Upsert:
        from mesh_dagster.core.models.merge import Upsert

        return Upsert(self.unique_key, self.when_matched, self.merge_filter)

    def row_settings(self) -> tuple:
        return (self.unique_key, self.when_matched, self.merge_filter, self.lookback)

    def data_hash_values(self) -> list[str]:
        values = [*super().data_hash_values(), "unique_key=" + ",".join(self.unique_key), str(self.lookback)]
        values += [f"when_matched={self.when_matched}"] if self.when_matched else []
        return values + ([f"merge_filter={self.merge_filter}"] if self.merge_filter else [])

    def metadata_hash_values(self) -> list[str]:
        values = [str(self.batch_size)] if self.batch_size is not None else []
        return values + super().metadata_hash_values()


class IncrementalByPartitionKind(IncrementalKind):
    """A table partitioned by `partitioned_by` (required) whose writes replace whole partitions:
    every partition a batch's output holds is replaced by that output, partitions it does not
    hold are left as they are. Always forward-only."""

    name: Literal[KindName.INCREMENTAL_BY_PARTITION] = KindName.INCREMENTAL_BY_PARTITION
    forward_only: bool = True

    is_incremental: ClassVar[bool] = True
    restates_full_history: ClassVar[bool] = True
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        **IncrementalKind.COMMON_READERS,
        "forward_only": _forward_only_always("INCREMENTAL_BY_PARTITION"),
    }

    def checked(self, properties: Mapping[str, Any], path: str, line: int) -> IncrementalByPartitionKind:
        if not properties.get("partitioned_by"):
            raise ModelError("INCREMENTAL_BY_PARTITION models need partitioned_by: the partitions each run "
                             "replaces, e.g. `partitioned_by (region)`", path, line)
        return self


class IncrementalUnmanagedKind(IncrementalKind):
    """A table each run appends its output to (`INSERT INTO`); with `insert_overwrite true`, the
    partitions the output holds are replaced instead (the whole table, when it has none).
    Forward-only and protected from restatement by default: its rows are a log of past runs."""

    name: Literal[KindName.INCREMENTAL_UNMANAGED] = KindName.INCREMENTAL_UNMANAGED
    insert_overwrite: bool = False
    forward_only: bool = True
    disable_restatement: bool = True

    is_incremental: ClassVar[bool] = True
    restates_full_history: ClassVar[bool] = True
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "insert_overwrite": lambda value, path: {"insert_overwrite": read_bool(value, path)},
        "batch_size": _refused("batch_size is not supported by INCREMENTAL_UNMANAGED models: a run writes all its "
                               "pending intervals at once"),
        "batch_concurrency": _refused("batch_concurrency is not supported by INCREMENTAL_UNMANAGED models: a run "
                                      "writes all its pending intervals at once"),
        **IncrementalKind.COMMON_READERS,
    }

    def row_settings(self) -> tuple:
        return (self.insert_overwrite,)

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), *(["insert_overwrite"] if self.insert_overwrite else [])]


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

    @classmethod
    def read(cls, items: list[Entry], path: str, line: int) -> BaseKind:
        raise ModelError("EXTERNAL models are declared in external_models.yaml (`- name: schema.table`), not in "
                         "models/", path, line)


AnyKind = Annotated[
    SeedKind | FullKind | ViewKind | IncrementalByTimeRangeKind | IncrementalByUniqueKeyKind
    | IncrementalByPartitionKind | IncrementalUnmanagedKind | EmbeddedKind | ExternalKind | ScdType2ByTimeKind
    | ScdType2ByColumnKind,
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
