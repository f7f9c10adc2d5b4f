"""The schema changes a plan makes to the tables it keeps, judged at plan time.

Forward-only changes keep their model's table, so what their new query outputs must fit it. The
plan compares what the project knows of the old and new outputs (names always, types when they
are declared or inferable) and applies each model's policies: a refused change stops the plan
before anything is written, naming the model and the columns. The apply checks again against
the real table (execution/evaluate/migration.py), whose types are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.models.schema_evolution import PolicyVerdict, SchemaDiff, diff_schemas, judge
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.core.sql.canonical import parse_query
from mesh_dagster.core.sql.query_columns import query_columns


@dataclass(frozen=True)
class SchemaChange:
    diff: SchemaDiff
    verdict: PolicyVerdict


def plan_schema_changes(project: Project, snapshots: Mapping[str, Snapshot], previous: Mapping[str, Snapshot],
                        forward: list[str], *, allow_destructive: frozenset[str] = frozenset(),
                        allow_additive: frozenset[str] = frozenset()) -> dict[str, SchemaChange]:
    """The schema change of each forward-only model whose output changes; refuses the plan when
    a policy does (every refusal named at once)."""
    changes: dict[str, SchemaChange] = {}
    errors: list[str] = []
    for name in forward:
        old = previous.get(name)
        new_columns = project.columns(name) if name in project.models else None
        old_columns = _old_columns(project, old) if old is not None else None
        if new_columns is None or old_columns is None:
            continue  # unknown here: the apply checks against the real table
        diff = diff_schemas(old_columns, new_columns)
        if diff.is_empty:
            continue
        destructive, additive = snapshots[name].model.schema_change_policies
        verdict = judge(name, diff, destructive, additive, allow_destructive=name in allow_destructive,
                        allow_additive=name in allow_additive)
        errors += verdict.errors
        changes[name] = SchemaChange(diff, verdict)
    if errors:
        raise PlanError("Forward-only changes refused by their schema-change policies:\n  " + "\n  ".join(errors))
    return changes


def _old_columns(project: Project, old: Snapshot) -> dict[str, str | None] | None:
    """What the kept table holds, as far as the old snapshot tells: its declared columns, else its
    stored rendering's output (typed where the current parents' columns allow)."""
    if old.model.columns is not None:
        return dict(old.model.columns)
    tree = parse_query(old.rendered_query)
    return query_columns(tree, project.parent_schemas(old.name)) if tree is not None else None
