"""`plan.data_diff` in config.yaml: how far a development plan's data diff reads, and what of the
data its sample rows may show."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from mesh_dagster.core.config.connections import Strict
from mesh_dagster.core.config.masking import ColumnMask, check_pattern


def _selector(text: str) -> str:
    if not text.strip():
        raise ValueError("a selector cannot be empty")
    return text


class DataDiffSettings(Strict):
    """The data diff attached to a development plan's record once its apply has built the new
    tables (execution/plans/data_diffs.py): each directly modified model's new table against the table
    the environment served before, on the model's grain. Bounded: above `max_rows` rows on either
    side only a deterministic sample of the grain's keys is compared, and no query starts once
    `timeout_s` is spent. Its sample rows are user data kept in the plan's record: values of columns
    named like secrets or personal data are masked (core/config/masking.py, `masked_columns` adds
    patterns), and `no_samples` (model selectors) or `sample_rows: 0` (every model) leave the rows
    out, the counts only."""

    enabled: bool = True
    max_rows: int = Field(default=100_000, ge=1)  # more rows on either side: compare a sample of keys this size
    sample_rows: int = Field(default=5, ge=0, le=100)  # differing rows shown per model
    timeout_s: float = Field(default=60.0, gt=0)  # no diff query starts after this many seconds
    # Column name patterns masked besides core/config/masking.py's MASKED_BY_DEFAULT.
    masked_columns: list[Annotated[str, AfterValidator(check_pattern)]] = Field(default_factory=list)
    # Selectors (`crm.customers`, `tag:pii`) of models whose diff keeps no rows: checked against the
    # models when a plan is made (core/plan/diff_samples.py).
    no_samples: list[Annotated[str, AfterValidator(_selector)]] = Field(default_factory=list)

    @property
    def mask(self) -> ColumnMask:
        return ColumnMask.with_defaults(self.masked_columns)
