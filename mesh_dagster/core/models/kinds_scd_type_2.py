"""The SCD type 2 kinds: a table keeping every version of each key's row. SCD_TYPE_2_BY_TIME
(alias SCD_TYPE_2) opens a version when the source's `updated_at` moves, SCD_TYPE_2_BY_COLUMN when
a watched column changes; core/models/scd2.py builds the query folding a batch into the history."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from mesh_dagster.core.config.names import COLUMN, unquote
from mesh_dagster.core.config.types import to_spark_type
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Entry, Value
from mesh_dagster.core.models.kinds_base import BaseKind, Batching, KindName, PropertyReader, refused
from mesh_dagster.core.models.kinds_incremental import IncrementalKind
from mesh_dagster.core.models.property_values import read_bool, read_column, read_int

# Types `valid_from`/`valid_to` may have: they hold `updated_at` values and execution times.
_TIME_DATA_TYPES = ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")


def _column_list(key: str) -> PropertyReader:
    """`key col`, `key (a, b)` or `key [a, b]`: column names, never expressions."""

    def read(value: Value, path: str) -> dict[str, Any]:
        names = value.as_list() if value.kind == "group" else [value.text]
        if not names or not all(name.strip() for name in names):
            raise ModelError(f"{key} names no column", path, value.line)
        for name in names:
            if not COLUMN.fullmatch(unquote(name)):
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

    restates_full_history: ClassVar[bool] = True
    COMMON_SCD_READERS: ClassVar[dict[str, PropertyReader]] = {
        "unique_key": _column_list("unique_key"),
        "valid_from_name": _one_column("valid_from_name"),
        "valid_to_name": _one_column("valid_to_name"),
        "invalidate_hard_deletes": lambda value, path: {"invalidate_hard_deletes": read_bool(value, path)},
        "time_data_type": _time_data_type,
        "batch_size": lambda value, path: {"batch_size": read_int(value, path, "batch_size", minimum=1)},
        "batch_concurrency": refused("batch_concurrency cannot be set for SCD_TYPE_2 models: each batch builds on "
                                      "the history the previous one wrote, so they run one after another"),
        "lookback": refused("lookback cannot be set for SCD_TYPE_2 models: an interval already folded into the "
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

    @property
    def batching(self) -> Batching:
        return Batching(self.batch_size)

    @property
    def scd_type_2(self) -> ScdType2Kind:
        return self

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
