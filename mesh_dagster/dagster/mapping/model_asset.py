"""`ModelAsset`: one model as Dagster sees it, plain data computed once at load time (graph.py
builds them), and the audits it carries as checks.

Its own module because both the graph (which builds them) and the translator (which maps each to
an asset spec, and which the graph asks for keys) read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING

from dagster import AssetKey

from mesh_dagster.context import ChangeCategory
from mesh_dagster.core.models.kinds import KindName
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.time.cron import IntervalUnit

if TYPE_CHECKING:
    from mesh_dagster.dagster.mapping.due import DueIntervals


class OtherChange(Enum):
    """A model's change against its environment when the plan gives it no category: it is new
    there, or the environment has it as planned. With `ChangeCategory`, the type of an asset's
    `change`, and spelled the same ways (`label`, `slug`)."""

    ADDED = "Added"
    UNCHANGED = "Unchanged"

    @property
    def label(self) -> str:
        return self.value

    @property
    def slug(self) -> str:
        return self.value.lower().replace(" ", "-")  # as `ChangeCategory.slug`


UNCHANGED = OtherChange.UNCHANGED
ADDED = OtherChange.ADDED
# What the plan does to a model, as its asset shows it.
AssetChange = ChangeCategory | OtherChange


@dataclass(frozen=True)
class AuditCheck:
    """An audit attached to a model, as an asset check."""

    check_name: str
    audit: str
    blocking: bool
    args: tuple[tuple[str, str], ...] = ()
    description: str | None = None  # the AUDIT block's own `description`
    digest: str = ""  # its definition's (execution/evaluate/verdicts.py): a verdict holds for this definition only


@dataclass
class ModelAsset:
    name: str
    key: tuple[str, ...]  # asset key path (MeshTranslator.get_asset_key): by default the model's view
    model: Model
    fingerprint: str
    version: str | None
    table: str | None
    change: AssetChange  # against the environment
    deps: list[tuple[str, ...]] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)  # model names behind `deps`
    checks: list[AuditCheck] = field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None
    columns: dict[str, str | None] | None = None
    environment: str = "prod"
    dep_keys: list[AssetKey] = field(default_factory=list)  # `deps` as AssetKeys (the parents' own objects)
    # The plan, as `mesh plan` prints it: intervals of the current version to compute, and those its
    # table already holds (reused: computed before, by any environment sharing the version)
    recompute: int = 0
    reuse: int = 0
    # A change making a new version the environment does not serve yet: `columns` are what its views
    # show (the served snapshot's), these the new version's
    pending_columns: dict[str, str | None] | None = None
    # Column lineage: output column -> (upstream asset key, column), the upstreams being this
    # environment's assets (graph.py); None when not known
    column_deps: dict[str, list[tuple[AssetKey, str]]] | None = None
    # What says which of its intervals are due now (due.py), which its automation condition asks:
    # the environment's, set by definitions() before the specs are built; None outside a code location
    due: DueIntervals | None = None

    @cached_property
    def asset_key(self) -> AssetKey:
        """`key` as Dagster's AssetKey, built once (schedules, specs and checks all ask for it)."""
        return AssetKey(self.key)

    @property
    def kind(self) -> KindName:
        return self.model.kind.name

    @property
    def is_external(self) -> bool:
        return self.model.kind.is_external

    @property
    def unit(self) -> IntervalUnit:
        return self.model.interval_unit

    @property
    def is_timeless(self) -> bool:
        """Seeds and views are built once for all time, whatever partition is asked for (a
        materialized VIEW is a table rebuilt on its cron, like FULL)."""
        return self.model.kind.is_timeless

    @property
    def is_partitioned(self) -> bool:
        """Whether Dagster shows the model's intervals as partitions: only models built interval by
        interval whose intervals can be recomputed alone (incremental by time range). A seed or
        view is built once, a FULL model rebuilt whole (thousands of partitions would each say the
        same), and models whose writes build on the rows before them (unique key, partition,
        unmanaged...) process every pending interval in order."""
        kind = self.model.kind
        return kind.is_incremental and not kind.restates_full_history
