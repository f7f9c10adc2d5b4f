"""Snapshots: a model's definition at a point in time, and the names derived from it.

The fingerprint splits what changes the data (data hash) from what does not (metadata hash),
for the model itself and for everything upstream. The *version* names the physical table and
only moves on data changes; indirect non-breaking and metadata changes keep the previous
version, so they reuse its table and intervals.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from enum import IntEnum
from functools import cached_property
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.config.names import physical_schema, physical_table
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.snapshots.capture import Capture

# The version suffix of a preview: a development environment's own table for a forward-only change
# (or a model reading one), filled over a preview range only, so the table prod keeps is not touched.
PREVIEW_SUFFIX = "__dev"


def hash_values(values: Iterable[str | None]) -> str:
    """Short, stable hash (unsigned crc32 as decimal) of a list of strings."""
    return str(zlib.crc32(";".join(v or "" for v in values).encode()))


class ChangeCategory(IntEnum):
    """How a change affects the data of a model and of those below it. Its spellings are derived
    here, in one place: callers hold the value and ask it for the text they show, never parse one."""

    BREAKING = 1
    NON_BREAKING = 2
    FORWARD_ONLY = 3
    INDIRECT_BREAKING = 4
    INDIRECT_NON_BREAKING = 5
    METADATA = 6

    @property
    def label(self) -> str:
        """As `mesh plan` shows it (and Dagster's `mesh/change`): `Indirect Non-breaking`."""
        return {
            ChangeCategory.BREAKING: "Breaking",
            ChangeCategory.NON_BREAKING: "Non-breaking",
            ChangeCategory.FORWARD_ONLY: "Forward-only",
            ChangeCategory.INDIRECT_BREAKING: "Indirect Breaking",
            ChangeCategory.INDIRECT_NON_BREAKING: "Indirect Non-breaking",
            ChangeCategory.METADATA: "Metadata",
        }[self]

    @property
    def slug(self) -> str:
        """As a tag or a word typed on the command line (`--categorize m=non-breaking`):
        `indirect-non-breaking`."""
        return self.label.lower().replace(" ", "-")

    @property
    def words(self) -> str:
        """As plan reviews record and show it: `indirect non breaking`."""
        return self.name.lower().replace("_", " ")

    @classmethod
    def from_words(cls, words: str) -> ChangeCategory:
        """The category a stored review names (`words`): reading a record, not a label shown."""
        return next(c for c in cls if c.words == words)

    @property
    def reuses_previous_version(self) -> bool:
        return self in (ChangeCategory.INDIRECT_NON_BREAKING, ChangeCategory.METADATA, ChangeCategory.FORWARD_ONLY)


class SnapshotFingerprint(BaseModel):
    """A model's hashes. Frozen, so its identifier is computed once (a plan asks for it thousands of
    times); a fingerprint with other hashes is made anew, never by `model_copy(update=...)`, which
    would carry the identifier computed for the old hashes along."""

    model_config = ConfigDict(frozen=True)

    data_hash: str
    metadata_hash: str
    parent_data_hash: str = "0"
    parent_metadata_hash: str = "0"

    def to_version(self) -> str:
        return hash_values([self.data_hash, self.parent_data_hash])

    @cached_property
    def identifier(self) -> str:
        return hash_values([self.data_hash, self.metadata_hash, self.parent_data_hash, self.parent_metadata_hash])


class SnapshotId(NamedTuple):
    name: str
    identifier: str


class Snapshot(BaseModel):
    """One model at one fingerprint. `version` is set once the change is categorized."""

    name: str
    fingerprint: SnapshotFingerprint
    model: Model
    parents: list[SnapshotId] = Field(default_factory=list)
    version: str | None = None
    change_category: ChangeCategory | None = None
    previous_versions: list[str] = Field(default_factory=list)
    created_ts: int = 0
    # The query rendered at load time (Spark SQL, stars expanded, references not rewritten):
    # what later plans compare against to tell metadata-only and additive changes apart.
    rendered_query: str | None = None
    # Everything else its evaluation reads (core/snapshots/capture.py); None in snapshots stored before
    # captures existed, which are evaluated from the project.
    capture: Capture | None = None

    @property
    def identifier(self) -> str:
        return self.fingerprint.identifier

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.name, self.identifier)

    @property
    def is_categorized(self) -> bool:
        return self.version is not None

    @property
    def is_preview(self) -> bool:
        return bool(self.version) and str(self.version).endswith(PREVIEW_SUFFIX)

    def preview(self) -> Snapshot:
        """This snapshot writing to a preview table of its own (see PREVIEW_SUFFIX). The preview
        is named after the version the change would have had as a rebuild, so two different
        forward-only changes of one model never share a preview."""
        return self.model_copy(update={"version": self.fingerprint.to_version() + PREVIEW_SUFFIX})

    def as_recorded(self, version: str) -> Snapshot:
        """This snapshot as an environment records it: a development environment may read it from
        a preview table rather than the table its version names."""
        return self if not version or version == self.version else self.model_copy(update={"version": version})

    def categorize(self, category: ChangeCategory, previous: Snapshot | None) -> None:
        """Fix the category and, from it, the version (the physical table this snapshot uses)."""
        self.change_category = category
        if previous is not None and previous.version and self.can_reuse(category, previous):
            self.version = previous.version
        else:
            self.version = self.fingerprint.to_version()
        if previous is not None and previous.version and previous.version != self.version:
            self.previous_versions = [previous.version, *previous.previous_versions][:10]

    def can_reuse(self, category: ChangeCategory, previous: Snapshot) -> bool:
        """Whether this snapshot may keep `previous`'s physical table.

        A VIEW model's physical object is a view over its parents' physical tables, so it must get
        its own when any parent moved to another table, whatever the category says.
        """
        if not category.reuses_previous_version:
            return False
        if self.model.kind.follows_parent_tables:
            return self.fingerprint.parent_data_hash == previous.fingerprint.parent_data_hash
        return True

    @property
    def physical_schema(self) -> str:
        return physical_schema(self.model.schema_name)

    @property
    def table_name(self) -> str:
        """Fully qualified physical table, e.g. `mesh__sqlmesh_example.sqlmesh_example__full_model__123`."""
        assert self.version, f"snapshot {self.name} is not categorized"
        return physical_table(self.name, self.version)

    @property
    def depends_on_past(self) -> bool:
        """See `Model.depends_on_past`: its batches run in order and stop at the first gap or failure."""
        return self.model.depends_on_past

    @property
    def interval_key(self) -> tuple[str, str]:
        """Intervals are shared by every snapshot writing the same physical table."""
        assert self.version
        return (self.name, self.version)


