"""Model definitions: what a user wrote, normalised, before any rendering.

A `Model` keeps the query *text as written* (the data hash is taken over it) and the pieces the
renderer needs; it holds no sqlglot objects so it pickles and hashes cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.models.kinds import AnyKind, KindName, ModelKind
from mesh_dagster.core.models.python_model import PythonCode
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.cron import interval_unit as unit_of_cron
from mesh_dagster.core.time.starts import StartNode

__all__ = ["MODEL_FORMAT", "AnyKind", "Audit", "AuditRef", "KindName", "Model", "ModelKind",
           "SignalRef"]

# Bumped whenever a pickled Model changes shape (the project cache's salt holds it): a cache
# written by another shape is dropped rather than unpickled into the wrong classes.
MODEL_FORMAT = 10  # 2: one class per kind; 3: self_referencing; 4: Python models; 5: scheduling properties;
# 6: references and key aliases; 7: blueprint variables, session properties; 8: ignored_rules;
# 9: standalone audits (Audit.standalone, Audit.node); 10: on_virtual_update


class AuditRef(BaseModel):
    """An audit attached to a model: `audits (name, other(arg := value, blocking := false))`."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, str] = Field(default_factory=dict)  # arg name -> SQL text of the value
    blocking: bool | None = None
    default: bool = False  # attached by `model_defaults.audits`, not by the model itself (for messages)


class SignalRef(BaseModel):
    """A readiness check attached to a model: `signals (name(arg := value, ...), ...)`; the function
    of that name in `signals/*.py` says which of a batch's intervals are ready."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, str] = Field(default_factory=dict)  # arg name -> SQL text of the value
    line: int | None = None

    def describe(self) -> str:
        args = ", ".join(f"{k} := {v}" for k, v in self.args.items())
        return f"{self.name}({args})"


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
    # `standalone true`: a node of its own (core/project/standalone_audits.py), with its node
    # properties (`cron`, `start`, `depends_on`...) as `Model` fields, and their lines.
    standalone: bool = False
    node: dict[str, Any] = Field(default_factory=dict)


class Model(BaseModel):
    """A model as loaded from `models/*.sql`, `models/*.py` or `external_models.yaml`."""

    name: str  # normalised `schema.table`, lower case
    kind: AnyKind
    dialect: str = "spark"
    cron: str = "@daily"
    cron_tz: str | None = None  # time zone of the cron's fire times (intervals stay UTC)
    declared_unit: IntervalUnit | None = None  # `interval_unit` as written; None = inferred from the cron
    allow_partials: bool = False  # also compute the incomplete last interval
    signals: list[SignalRef] = Field(default_factory=list)
    start: str | None = None
    end: str | None = None
    grain: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)  # columns other models join to this one by (metadata)
    key_aliases: dict[str, str] = Field(default_factory=dict)  # grain/references column -> the name it is joined by
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
    ignored_rules: list[str] = Field(default_factory=list)  # linter rules not run on it (`all`: none run)
    # The values a blueprint gave this model (core/project/blueprints.py): variable -> SQL text.
    blueprint_variables: dict[str, str] = Field(default_factory=dict)
    # The `project:` name of the repository defining it (core/project/repos.py): no part of its data.
    project: str = ""
    # Spark session settings in effect while this model is evaluated (core/models/session_properties.py).
    session_properties: dict[str, str] = Field(default_factory=dict)

    query: str | None = None  # the main query, text as written (macros unexpanded)
    python: PythonCode | None = None  # the code of a model written in Python (models/*.py), which has no query
    pre_statements: list[str] = Field(default_factory=list)
    post_statements: list[str] = Field(default_factory=list)
    # `ON_VIRTUAL_UPDATE_BEGIN; ...; ON_VIRTUAL_UPDATE_END;`: run after the model's view is created or
    # updated in an environment, `@this_model` being the view (execution/apply/virtual_statements.py).
    on_virtual_update: list[str] = Field(default_factory=list)
    macro_definitions: list[str] = Field(default_factory=list)  # `@DEF(...)` statements, as written
    inline_audits: list[Audit] = Field(default_factory=list)

    path: str | None = None  # file it came from (relative to the project)
    line: int = 1  # line of the MODEL block (a Python model's decorator)
    query_line: int = 1  # line where the query starts (a Python model's `def`)
    property_lines: dict[str, int] = Field(default_factory=dict)  # MODEL property -> its line (for errors)
    # Its query reads its own table (the previous state): set by the loader from the inferred references.
    self_referencing: bool = False

    @property
    def is_python(self) -> bool:
        return self.python is not None

    def start_node(self, parents: Iterable[str]) -> StartNode:
        """What decides where its history starts (core/time/starts.py), with its parents' names."""
        return StartNode(self.start, self.cron, self.cron_tz, tuple(parents))

    @property
    def is_scheduled(self) -> bool:
        """Whether its intervals are computed and recorded: models with a physical object, standalone
        audits, and external models with audits (their audits run for their intervals)."""
        return self.kind.is_scheduled(bool(self.audits))

    @property
    def schema_name(self) -> str:
        return self.name.split(".")[0] if "." in self.name else "default"

    @property
    def table_name(self) -> str:
        return self.name.split(".")[-1]

    @property
    def interval_unit(self) -> IntervalUnit:
        """The unit of the model's intervals: as written, else inferred from the cron."""
        return unit_of_cron(self.cron, self.declared_unit)

    @property
    def time_column(self) -> str | None:
        """The time column of an INCREMENTAL_BY_TIME_RANGE model; other kinds have none."""
        time_range = self.kind.time_range
        return time_range.time_column if time_range is not None else None

    @property
    def lookback(self) -> int:
        """Intervals before a run's range that are recomputed with it (only incremental kinds have any)."""
        return self.kind.batching.lookback

    @property
    def batch_size(self) -> int | None:
        """Intervals per batch; None when a backfill is one batch (always, for kinds built whole)."""
        return self.kind.batching.size

    @property
    def batch_concurrency(self) -> int:
        """Batches of this model evaluated at once (1 for kinds built whole: they have one batch, and
        for models that build on their own past: each batch needs the one before)."""
        if self.depends_on_past:
            return 1
        return self.kind.batching.concurrency

    @property
    def depends_on_past(self) -> bool:
        """Whether an interval is computed from the table as the previous intervals left it (its query
        reads itself, or its kind folds each batch into the history): its intervals are computed in
        order, from its start, and never one whose predecessor is missing."""
        return self.self_referencing or self.kind.restates_full_history

    @property
    def forward_only(self) -> bool:
        """Whether every change keeps the model's table (only kinds with history can be)."""
        return self.kind.is_forward_only

    @property
    def disable_restatement(self) -> bool:
        """Whether restating this model is refused (its history cannot, or must not, be recomputed)."""
        return self.kind.restatement_disabled

    @property
    def schema_change_policies(self) -> tuple[SchemaChangePolicy, SchemaChangePolicy]:
        """(on_destructive_change, on_additive_change): kinds rebuilt whole never keep a table."""
        return self.kind.schema_change_policies

    @property
    def effective_partitioned_by(self) -> list[str]:
        """Incremental tables are always partitioned by their time column (first)."""
        cols = list(self.partitioned_by)
        tc = self.time_column
        if tc and tc not in cols:
            cols.insert(0, tc)
        return cols

    def line_of(self, prop: str) -> int:
        """Line of a MODEL property as written, else of the MODEL block (defaults have no line)."""
        return self.property_lines.get(prop, self.line)

    def where(self) -> str:
        """`file:line` for error messages."""
        return f"{self.path}:{self.line}" if self.path else self.name
