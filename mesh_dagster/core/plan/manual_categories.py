"""Manual categorization: which directly modified models a plan asks the user about, and how a
category is written on the command line (`--categorize MODEL=CATEGORY`).

A category is chosen only for a change this plan creates: a snapshot another plan stored already
has its version (its table), and changing its category would not move it.
"""

from __future__ import annotations

from mesh_dagster.core.config.config import AutoCategorize
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.plan.plan import Plan
from mesh_dagster.core.snapshots.snapshot import ChangeCategory

# What users type for each category they may choose: its slug.
CHOICES = {c.slug: c for c in (ChangeCategory.BREAKING, ChangeCategory.NON_BREAKING, ChangeCategory.FORWARD_ONLY)}


def source_type(model: Model) -> str:
    """The kind of source a model is written as, as `auto_categorize_changes` names them."""
    if model.kind.is_external:
        return "external"
    if not model.kind.has_query:
        return "seed"
    return "python" if model.is_python else "sql"


def needs_choice(plan: Plan, modes: AutoCategorize, *, ask_all: bool = False) -> list[str]:
    """The directly modified models whose category the user must choose: all of this plan's new
    ones with `ask_all` (`--no-auto-categorization`), else per their source type's mode."""
    new = {s.name for s in plan.new_snapshots}
    out = []
    for name in plan.directly_modified:
        if name not in new:
            continue
        mode = "off" if ask_all else getattr(modes, source_type(plan.snapshots[name].model))
        if mode == "off" or mode == "semi" and plan.category(name) == ChangeCategory.BREAKING:
            out.append(name)
    return out


def parse_choice(text: str) -> tuple[str, ChangeCategory]:
    """`schema.model=breaking` -> (name, category), with an error naming what is accepted."""
    name, sep, category = text.partition("=")
    key = category.strip().lower().replace("_", "-")
    if not sep or not name.strip() or key not in CHOICES:
        raise PlanError(f"--categorize '{text}' must be MODEL=CATEGORY with CATEGORY one of {', '.join(CHOICES)}")
    return name.strip(), CHOICES[key]
