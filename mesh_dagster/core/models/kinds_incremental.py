"""The kinds that keep their table's history across runs: what they share (`IncrementalKind`:
forward-only, restatement, schema change policies), INCREMENTAL_BY_TIME_RANGE (intervals of a
time column, each overwritten whole), and the kinds whose writes build on the rows the table
holds: INCREMENTAL_BY_UNIQUE_KEY, INCREMENTAL_BY_PARTITION, INCREMENTAL_UNMANAGED. The SCD type 2
kinds are in kinds_scd_type_2.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Literal

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Value
from mesh_dagster.core.models.kinds_base import BaseKind, Batching, KindName, PropertyReader, refused
from mesh_dagster.core.models.merge import (
    MergeSyntaxError,
    Upsert,
    key_columns,
    normalize_merge_filter,
    normalize_unique_key,
    normalize_when_matched,
    row_columns,
)
from mesh_dagster.core.models.property_values import read_bool, read_column, read_int
from mesh_dagster.core.time.cron import IntervalUnit

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

    is_incremental: ClassVar[bool] = True
    allows_python: ClassVar[bool] = True
    COMMON_READERS: ClassVar[dict[str, PropertyReader]] = {
        "forward_only": lambda value, path: {"forward_only": read_bool(value, path)},
        "disable_restatement": lambda value, path: {"disable_restatement": read_bool(value, path)},
        "on_destructive_change": _policy("on_destructive_change"),
        "on_additive_change": _policy("on_additive_change"),
    }

    @property
    def is_materialized(self) -> bool:
        return True

    @property
    def is_forward_only(self) -> bool:
        return self.forward_only

    @property
    def restatement_disabled(self) -> bool:
        return self.disable_restatement

    @property
    def schema_change_policies(self) -> tuple[SchemaChangePolicy, SchemaChangePolicy]:
        return self.on_destructive_change, self.on_additive_change

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

    @property
    def batching(self) -> Batching:
        return Batching(self.batch_size, self.lookback, self.batch_concurrency)

    @property
    def time_range(self) -> IncrementalByTimeRangeKind:
        return self

    def check_interval_unit(self, unit: IntervalUnit, path: str, line: int) -> None:
        if "time_column_format" in self.model_fields_set:
            self.check_time_format(unit, path, line)

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

    @property
    def batching(self) -> Batching:
        return Batching(self.batch_size, self.lookback)

    def checked(self, properties: Mapping[str, Any], path: str, line: int) -> IncrementalByUniqueKeyKind:
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
        named = {"unique_key": key_columns(self.unique_key)}
        if self.when_matched:
            named["when_matched"] = row_columns(self.when_matched, None)
        if self.merge_filter:
            named["merge_filter"] = row_columns(None, self.merge_filter)
        return named

    @property
    def upsert(self) -> Upsert:
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

    restates_full_history: ClassVar[bool] = True
    PROPERTY_READERS: ClassVar[dict[str, PropertyReader]] = {
        "insert_overwrite": lambda value, path: {"insert_overwrite": read_bool(value, path)},
        "batch_size": refused("batch_size is not supported by INCREMENTAL_UNMANAGED models: a run writes all its "
                               "pending intervals at once"),
        "batch_concurrency": refused("batch_concurrency is not supported by INCREMENTAL_UNMANAGED models: a run "
                                      "writes all its pending intervals at once"),
        **IncrementalKind.COMMON_READERS,
    }

    @property
    def written_as(self) -> type[BaseKind]:
        return IncrementalByPartitionKind if self.insert_overwrite else IncrementalUnmanagedKind

    def row_settings(self) -> tuple:
        return (self.insert_overwrite,)

    def data_hash_values(self) -> list[str]:
        return [*super().data_hash_values(), *(["insert_overwrite"] if self.insert_overwrite else [])]


