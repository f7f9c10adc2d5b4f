"""Model definitions: what a user wrote, normalised, before any rendering.

A `Model` keeps the query *text as written* (the data hash is taken over it) and the pieces the
renderer needs; it holds no sqlglot objects so it pickles and hashes cheaply.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Table formats Spark can write (`USING <format>`); avro, delta, iceberg and hudi need the user's
# Spark to ship their jars (we cannot download them at run time).
STORAGE_FORMATS = ("parquet", "orc", "avro", "json", "csv", "delta", "iceberg", "hudi")


def check_storage_format(value: str) -> str:
    """A known `storage_format`, lower case; anything else would only fail when the table is created."""
    key = value.strip().lower()
    if key not in STORAGE_FORMATS:
        raise ValueError(f"unknown storage_format '{value}'. Known: {', '.join(STORAGE_FORMATS)}")
    return key


class KindName(str, Enum):
    SEED = "SEED"
    FULL = "FULL"
    VIEW = "VIEW"
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    EMBEDDED = "EMBEDDED"
    EXTERNAL = "EXTERNAL"


class ModelKind(BaseModel):
    """A kind and its own properties (those written inside `kind NAME (...)`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: KindName
    # INCREMENTAL_BY_TIME_RANGE
    time_column: str | None = None
    time_column_format: str = "%Y-%m-%d"
    batch_size: int | None = None
    batch_concurrency: int = 1  # batches of one model evaluated at once (intervals are independent)
    lookback: int = 0
    # VIEW
    materialized: bool = False  # `VIEW (materialized true)`: Spark has no materialized views; a table stands in
    # SEED
    path: str | None = None
    csv_settings: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_incremental(self) -> bool:
        return self.name == KindName.INCREMENTAL_BY_TIME_RANGE

    @property
    def is_materialized(self) -> bool:
        """Kinds whose physical object is a table: SEED, FULL, INCREMENTAL_BY_TIME_RANGE and a
        materialized VIEW (Spark has no materialized views: a table holding the query's result
        stands in, rebuilt like FULL). A plain VIEW owns a view, EMBEDDED/EXTERNAL nothing."""
        return self.name in (KindName.SEED, KindName.FULL, KindName.INCREMENTAL_BY_TIME_RANGE) or (
            self.name == KindName.VIEW and self.materialized)

    @property
    def is_view(self) -> bool:
        """Whether the physical object is a Spark view (a VIEW model that is not materialized)."""
        return self.name == KindName.VIEW and not self.materialized

    @property
    def is_timeless(self) -> bool:
        """Seeds and plain views are complete once built: their one interval spans all time."""
        return self.name == KindName.SEED or self.is_view

    @property
    def is_symbolic(self) -> bool:
        """Kinds with no physical object at all."""
        return self.name in (KindName.EMBEDDED, KindName.EXTERNAL)

    def data_hash_values(self) -> list[str]:
        values = [self.name.value]
        if self.is_incremental:
            values += [self.time_column or "", self.time_column_format, str(self.lookback)]
        if self.name == KindName.SEED:
            values += [f"{k}={v}" for k, v in sorted(self.csv_settings.items())]
        if self.materialized:
            values.append("materialized")
        return values

    def metadata_hash_values(self) -> list[str]:
        values = [str(self.batch_size)] if self.batch_size is not None else []
        if self.batch_concurrency != 1:
            values.append(f"batch_concurrency={self.batch_concurrency}")
        return values


class AuditRef(BaseModel):
    """An audit attached to a model: `audits (name, other(arg := value, blocking := false))`."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, str] = Field(default_factory=dict)  # arg name -> SQL text of the value
    blocking: bool | None = None
    default: bool = False  # attached by `model_defaults.audits`, not by the model itself (for messages)


class Audit(BaseModel):
    """An audit definition: a query that fails the audit if it returns any row."""

    name: str
    query: str
    dialect: str = "spark"
    blocking: bool = True
    defaults: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    path: str | None = None
    line: int | None = None


class Model(BaseModel):
    """A model as loaded from `models/*.sql` or `external_models.yaml`."""

    name: str  # normalised `schema.table`, lower case
    kind: ModelKind
    dialect: str = "spark"
    cron: str = "@daily"
    start: str | None = None
    end: str | None = None
    grain: list[str] = Field(default_factory=list)
    columns: dict[str, str] | None = None  # declared column -> type (Spark SQL type text)
    column_descriptions: dict[str, str] = Field(default_factory=dict)  # column -> comment
    audits: list[AuditRef] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    owner: str | None = None
    description: str | None = None
    partitioned_by: list[str] = Field(default_factory=list)
    storage_format: str | None = None
    depends_on: list[str] = Field(default_factory=list)  # explicit, in addition to inferred ones
    enabled: bool = True
    stamp: str | None = None

    query: str | None = None  # the main query, text as written (macros unexpanded)
    pre_statements: list[str] = Field(default_factory=list)
    post_statements: list[str] = Field(default_factory=list)
    macro_definitions: list[str] = Field(default_factory=list)  # `@DEF(...)` statements, as written
    inline_audits: list[Audit] = Field(default_factory=list)

    path: str | None = None  # file it came from (relative to the project)
    line: int = 1  # line of the MODEL block
    query_line: int = 1  # line where the query starts
    property_lines: dict[str, int] = Field(default_factory=dict)  # MODEL property -> its line (for errors)

    @property
    def schema_name(self) -> str:
        return self.name.split(".")[0] if "." in self.name else "default"

    @property
    def table_name(self) -> str:
        return self.name.split(".")[-1]

    @property
    def time_column(self) -> str | None:
        return self.kind.time_column

    @property
    def effective_partitioned_by(self) -> list[str]:
        """Incremental tables are always partitioned by their time column (first)."""
        cols = list(self.partitioned_by)
        tc = self.kind.time_column
        if self.kind.is_incremental and tc and tc not in cols:
            cols.insert(0, tc)
        return cols

    def line_of(self, prop: str) -> int:
        """Line of a MODEL property as written, else of the MODEL block (defaults have no line)."""
        return self.property_lines.get(prop, self.line)

    def where(self) -> str:
        """`file:line` for error messages."""
        return f"{self.path}:{self.line}" if self.path else self.name
