"""Column-level lineage of a rendered query: for each output column, the columns of the tables it
reads that its value is computed from.

Two paths, like core/sql/query_columns.py:
- the fast path, hand-written, for one plain SELECT over tables (joins on ON conditions, no CTE,
  subquery, set operation, lateral view or lambda): every column a projection names, resolved
  through the FROM/JOIN aliases. It is what most models are and it costs one walk, so building
  Dagster's definitions of a thousand models stays cheap.
- sqlglot's `lineage` for everything else (CTEs, subqueries, set operations, USING joins, `*`
  left over...), on a copy whose tables are renamed `_mesh_<n>` so that sqlglot sees one flat
  schema whatever the depth of the names (`x` and `db.x` and `cat.db.x` in one query).

Only the projections' own columns count (not WHERE, JOIN or GROUP BY columns: they decide which
rows, not what a value is), as in sqlglot's and Dagster's notion of column lineage. Whatever is
not sure gives None: no lineage rather than a guess.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, lineage
from sqlglot.schema import MappingSchema

from mesh_dagster.core.macros.syntax import lookup
from mesh_dagster.core.sql.query_columns import SPARK, Schemas, cte_queries, flatten_tables, table_key


class ColumnRef(NamedTuple):
    """A column of a table: `table` is the lower-case name the query reads (a model's name once
    the project resolved it), `column` the lower-case column name. A tuple: a project has
    thousands, and loading Dagster's definitions builds them all."""

    table: str
    column: str

    def __str__(self) -> str:
        return f"{self.table}.{self.column}"


# Output column (lower-case, in the query's order) -> the upstream columns it is computed from.
Lineage = dict[str, tuple[ColumnRef, ...]]


def query_lineage(tree: exp.Query, schemas: Schemas) -> Lineage | None:
    """Each output column's upstream columns; None when the output columns themselves are not
    known (a `*` over a table whose columns are unknown) or sqlglot cannot follow the query.

    `schemas`: the columns of the tables the query reads (by model name), for `*` and for
    unqualified columns over joins. The tree is not changed."""
    fast = plain_select_lineage(tree, schemas)
    if fast is not None:
        return fast
    return _sqlglot_lineage(tree, schemas)


# ---------------------------------------------------------------------------------------------
# Fast path: one plain SELECT


def plain_select_lineage(tree: exp.Query, schemas: Schemas) -> Lineage | None:
    """The fast path alone: None when the query is not one plain SELECT whose every column
    resolves surely (computing a project's output columns takes it on the tree it renders)."""
    sources = _plain_sources(tree)
    if sources is None:
        return None
    assert isinstance(tree, exp.Select)
    columns = {alias: lookup(schemas, key) if schemas else None for alias, key in sources.items()}
    out: Lineage = {}
    for projection in tree.expressions:
        name = _output_name(projection)
        if name is None or name.lower() in out:
            return None
        refs: set[ColumnRef] = set()
        for node in projection.walk():
            if isinstance(node, (exp.Select, exp.Lambda, exp.Star, exp.Dot)):
                return None
            if isinstance(node, exp.Column):
                ref = _resolve(node, sources, columns)
                if ref is None:
                    return None
                refs.add(ref)
        out[name.lower()] = tuple(sorted(refs))
    return out


def _plain_sources(tree: exp.Query) -> dict[str, str] | None:
    """alias (lower-case) -> table key, for a SELECT reading tables only; None otherwise."""
    if not isinstance(tree, exp.Select) or tree.args.get("with_") is not None or tree.args.get("laterals"):
        return None
    from_ = tree.args.get("from_")
    if from_ is None:
        return None
    joins = tree.args.get("joins") or []
    if any(j.args.get("using") or (j.method or "").upper() == "NATURAL" for j in joins):
        return None
    sources: dict[str, str] = {}
    for item in [from_.this, *(j.this for j in joins)]:
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier) or item.args.get("pivots"):
            return None
        alias = item.alias_or_name.lower()
        if alias in sources:
            return None
        sources[alias] = table_key(item)
    return sources


def _resolve(column: exp.Column, sources: dict[str, str], columns: dict[str, dict | None]) -> ColumnRef | None:
    """The table column a column names: by its alias, or the one source having it."""
    if column.args.get("db") is not None:
        return None
    name = column.name.lower()
    if column.table:
        key = sources.get(column.table.lower())
        known = columns.get(column.table.lower())
        if key is None or (known is not None and not _has(known, name)):
            return None
        return ColumnRef(key, name)
    if len(sources) == 1:
        ((alias, key),) = sources.items()
        known = columns[alias]
        # A name the table lacks is a reference to an alias of the SELECT (Spark resolves it so).
        return ColumnRef(key, name) if known is not None and _has(known, name) else None
    having = [alias for alias, known in columns.items() if known is not None and _has(known, name)]
    if len(having) != 1 or any(known is None for known in columns.values()):
        return None
    return ColumnRef(sources[having[0]], name)


def _has(columns: dict, name: str) -> bool:
    return any(c.lower() == name for c in columns)


def _output_name(projection: exp.Expr) -> str | None:
    if isinstance(projection, exp.Alias):
        return projection.alias or None
    if isinstance(projection, exp.Column) and not isinstance(projection.this, exp.Star):
        return projection.name or None
    return None


# ---------------------------------------------------------------------------------------------
# sqlglot's lineage


def _sqlglot_lineage(tree: exp.Query, schemas: Schemas) -> Lineage | None:
    copy = tree.copy()
    flat, schema = flatten_tables(copy, schemas, cte_queries(copy))
    try:
        nodes = lineage(None, copy, MappingSchema(schema, dialect=SPARK, normalize=False), dialect=SPARK,
                        trim_selects=False, copy=False, validate_qualify_columns=False)
    except (SqlglotError, KeyError, ValueError, AttributeError, IndexError):  # sqlglot cannot follow it
        return None
    out: Lineage = {}
    for name, node in nodes.items():
        if name == "*" or "*" in name:
            return None  # a `*` sqlglot could not expand: the output columns are unknown
        refs = _leaves(node, flat)
        if refs is None:
            return None
        out[name.lower()] = tuple(sorted(refs))
    return out


def _leaves(node: Node, flat: dict[str, str]) -> set[ColumnRef] | None:
    """The table columns at the ends of a column's lineage graph; None if one of them is a `*`."""
    refs: set[ColumnRef] = set()
    for found in node.walk():
        if found.downstream or not isinstance(found.expression, exp.Table):
            continue
        key = flat.get(found.expression.name)
        if key is None:
            continue  # a table-valued function, a VALUES list...
        column = found.name.split(".", 1)[-1] if "." in found.name else found.name
        if column == "*":
            return None
        refs.add(ColumnRef(key, column.lower()))
    return refs


__all__ = ["ColumnRef", "Lineage", "plain_select_lineage", "query_lineage"]
