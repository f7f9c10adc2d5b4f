"""`mesh lineage MODEL [COLUMN]`: where a model's columns come from, as a tree of upstream columns
(Context.column_lineage, core/project/lineage.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from mesh_dagster.cli.console import Tree, print_tree
from mesh_dagster.cli.project import project_context
from mesh_dagster.core.errors import MeshError

if TYPE_CHECKING:
    from mesh_dagster.context import ColumnRef, Context, Lineage

UNKNOWN = "(upstream not known)"


@click.command()
@click.argument("model")
@click.argument("column", required=False)
@click.option("--depth", type=click.IntRange(1), default=None,
              help="Follow this many levels up (default: up to the seeds and external tables).")
@click.pass_context
def lineage(ctx: click.Context, model: str, column: str | None, depth: int | None) -> None:
    """Where MODEL's columns come from: each column (or COLUMN only) and the upstream columns it is
    computed from, recursively, as a tree (EMBEDDED models looked through).

    Computed from the rendered query with sqlglot; a Python model from its declared `columns` and
    `depends_on`. A column with no upstream reads no table (a seed's, an external table's, a
    literal); one whose upstream cannot be known is marked so.

      mesh lineage sqlmesh_example.full_model num_orders
    """
    from mesh_dagster.context import ColumnRef  # Context's modules: imported by the commands that use them

    context = project_context(ctx)
    name = context.project.model_name(model)
    if column is not None:
        context.column_upstream(name, column)  # an unknown column is an error naming it
    found = context.column_lineage(name)
    if found is None:
        click.echo(f"No column lineage is known for {name}" + (f".{column}" if column else "")
                   + " (a Python model says it only with declared `columns` and `depends_on`).")
        return
    # Every output column, those whose upstream is not known included (a Python model's undeclared ones)
    every = [c.lower() for c in context.project.columns(name) or {}] or list(found)
    wanted = [column.strip().strip("`").lower()] if column is not None else every
    tree = Tree(name)
    memo: dict[str, Lineage | None] = {name: found}
    shown: set[ColumnRef] = set()
    for key in wanted:
        _add(tree, context, ColumnRef(name, key), memo, shown, depth, top=True)
    print_tree(tree)


def _add(parent: Tree, context: Context, ref: ColumnRef, memo: dict[str, Lineage | None],
         shown: set[ColumnRef], depth: int | None, top: bool = False) -> None:
    """The column under `parent`, with its upstream columns; a column already drawn in full is
    drawn once more without them (a diamond in the DAG would repeat whole subtrees)."""
    if ref.table not in memo:
        try:
            memo[ref.table] = context.column_lineage(ref.table)
        except MeshError:  # a table no model declares
            memo[ref.table] = None
    upstream = (memo[ref.table] or {}).get(ref.column)
    label = ref.column if top else str(ref)
    if upstream is None:
        parent.add(f"{label}  {UNKNOWN}")
        return
    if ref in shown and upstream:
        parent.add(f"{label}  (upstream shown above)")
        return
    shown.add(ref)
    node = parent.add(label)
    if depth is not None and depth <= 0:
        return
    for dep in upstream:
        _add(node, context, dep, memo, shown, None if depth is None else depth - 1)
