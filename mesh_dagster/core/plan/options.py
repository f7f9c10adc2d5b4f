"""What a plan is asked for: one frozen `PlanOptions`, built once by the front door that plans.

The CLI's `plan`, Dagster's plan job, the git sensor and a reviewed plan's apply all describe the
plan they want with this one typed object; Context hands it to `build_plan` and the plan carries
it into its review record, so a reviewed plan is rebuilt from the very options it was made with.
An unknown option fails where it is named instead of travelling on as a stray keyword.

A record stores the options as JSON (`recorded()`), in the form records always had: only the
options given, categories by name, sets as sorted lists. `from_record` reads that form back,
including records written before the options were typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.snapshots.snapshot import ChangeCategory

# The record key of a plan made from a pushed commit (its sha); execution/plans/deployed.py reads it too.
FROM_COMMIT = "from_commit"


class PlanOptions(BaseModel):
    """Everything a plan is built from besides the project, the state and the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: str | None = None
    end: str | None = None
    execution_time: str | int | None = None
    create_from: str = PROD
    include_unmodified: bool | None = None  # None: the project's `plan.include_unmodified`
    skip_backfill: bool = False
    empty_backfill: bool = False
    allow_empty: bool = False
    forward_only: bool = False
    effective_from: str | None = None
    choices: dict[str, ChangeCategory] | None = None  # manual categories of directly modified models
    allow_destructive: frozenset[str] = frozenset()  # model names, selectors already resolved
    allow_additive: frozenset[str] = frozenset()
    select_models: tuple[str, ...] = ()  # selectors
    backfill_models: tuple[str, ...] = ()  # selectors
    min_intervals: int = 0
    no_gaps: bool = False
    render_added: bool = True  # False: a plan only looked at, never applied
    restate: tuple[str, ...] = ()  # a restatement of these models (core/plan/restatement.py)
    from_commit: str | None = None  # planned from the files of this pushed commit

    @classmethod
    def of(cls, options: PlanOptions | None = None, /, **keywords: Any) -> PlanOptions:
        """`options` with `keywords` on top. An unknown keyword is a TypeError, like a bad
        keyword argument, naming it."""
        unknown = sorted(set(keywords) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"unknown plan option(s): {', '.join(unknown)}")
        if options is None:
            return cls(**keywords)
        return options if not keywords else cls(**{**options.given(), **keywords})

    def given(self) -> dict[str, Any]:
        """The options set explicitly, as values (what a record stores, before JSON)."""
        return {name: getattr(self, name) for name in self.model_fields_set}

    def recorded(self) -> dict[str, Any]:
        """The options given, as the JSON a plan record stores."""
        out: dict[str, Any] = {}
        for key, value in sorted(self.given().items()):
            if key == "choices":
                out[key] = {name: category.name for name, category in (value or {}).items()}
            elif isinstance(value, frozenset):
                out[key] = sorted(value)
            elif isinstance(value, tuple):
                out[key] = list(value)
            else:
                out[key] = value
        return out

    @classmethod
    def from_record(cls, stored: Mapping[str, Any]) -> PlanOptions:
        """The options a record stored (`recorded()`, or the keyword dict of earlier versions)."""
        options = dict(stored)
        if options.get("choices"):
            options["choices"] = {n: ChangeCategory[c] for n, c in options["choices"].items()}
        return cls.of(**options)

    def rebuilding(self, execution_time: int) -> PlanOptions:
        """The options to rebuild a recorded plan with: at its recorded execution time, from the
        files at hand (a pushed commit's plan is rebuilt from that commit's files, not marked again)."""
        given = {k: v for k, v in self.given().items() if k != "from_commit"}
        return PlanOptions(**{**given, "execution_time": execution_time})
