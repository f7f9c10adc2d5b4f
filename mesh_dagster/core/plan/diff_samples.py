"""What a data diff keeps of the rows that differ: how many, and which values it masks.

The rows are user data kept in the plan's record and shown to every reviewer (core/plan/data_diff.py),
so each model's are bounded by `plan.data_diff`: `sample_rows` of them (0: none for any model),
none for the models `no_samples` selects (`tag:pii`, `crm.customers`), and the values of columns
named like secrets or personal data masked as they are read (core/config/masking.py). A diff reused
from another plan keeps its rows only where this project would have kept them, masked as it masks.
"""

from __future__ import annotations

from typing import NamedTuple

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.config.masking import ColumnMask
from mesh_dagster.core.config.redaction import HIDDEN
from mesh_dagster.core.errors import ConfigError, SelectorError
from mesh_dagster.core.plan.data_diff import DataDiff
from mesh_dagster.core.plan.selectors import ModelIndex, select_models

NO_SAMPLES = "plan.data_diff.no_samples"
NO_ROWS = f"no sample rows ({NO_SAMPLES})"
VALUE_LIMIT = 200  # characters of a value shown


def check_no_samples(config: ProjectConfig, index: ModelIndex) -> None:
    """Refuse a `plan.data_diff.no_samples` selector that selects none of the models of `index`
    (a typo must not quietly show what it meant to hide), naming its line in config.yaml: checked
    when a plan is made, before its apply builds anything."""
    for position, selector in enumerate(config.plan.data_diff.no_samples):
        try:
            select_models([selector], index, flag=NO_SAMPLES)
        except SelectorError as e:
            raise ConfigError(e.message, *config.where(("plan", "data_diff", "no_samples", position))) from None


class SampleRows(NamedTuple):
    """What one model's diff keeps of its differing rows: at most `limit` (0: none, `off` says why
    when the project keeps some), its columns' values masked by `mask`."""

    mask: ColumnMask
    limit: int
    off: str | None = None

    @classmethod
    def per_model(cls, settings: DataDiffSettings, index: ModelIndex) -> dict[str, SampleRows]:
        """Each model of `index`'s. A selector that fails here, where nothing may be refused any more
        (the apply has built the tables), leaves every model without rows: none rather than too many."""
        try:
            off, why = select_models(settings.no_samples, index, flag=NO_SAMPLES), NO_ROWS
        except SelectorError as e:
            off, why = index.names, f"no sample rows: {e}"
        mask, limit = settings.mask, settings.sample_rows
        kept, none = cls(mask, limit), cls(mask, 0, why if limit else None)
        return {name: none if name in off else kept for name in index.names}

    def shown(self, keys: list[str], columns: list[str], row: tuple) -> list[str]:
        """One differing row (the keys, then each column new and old) as text, masked values as ***."""
        hidden = [self.mask.hides(k) for k in keys] + [self.mask.hides(c) for c in columns for _ in ("new", "old")]
        return ["NULL" if value is None else HIDDEN if hide else str(value)[:VALUE_LIMIT]
                for value, hide in zip(row, hidden, strict=True)]

    def withhold(self, diff: DataDiff) -> None:
        """Drop the rows of a diff computed elsewhere (a reused one) that this model would not keep
        here: none at all, or masked less than this project masks (not at all: a diff of an earlier
        version)."""
        if not diff.sample:
            return
        if not self.limit:
            diff.add_note(self.off)
        elif diff.masked_columns is None or set(self.mask.hidden([*diff.grain, *diff.column_changes])) \
                - set(diff.masked_columns):
            diff.add_note("sample rows left out: they were not masked as this project masks")
        else:
            return
        diff.sample, diff.sample_columns, diff.masked_columns = [], [], None
