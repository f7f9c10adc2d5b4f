"""The canonical form two renderings of a query are compared in, when their texts differ.

Two queries that Spark evaluates identically can be written differently: `id` or `id AS id`,
`col` or `src.col`, `GROUP BY 1` or `GROUP BY item_id`, `FROM t AS a` or `FROM t AS b`. The
canonical form removes those differences with sqlglot's `qualify` (every column qualified by its
source, using the parents' schemas; sources given positional aliases; `GROUP BY`/`ORDER BY`
ordinals resolved), so the categorizer sees only the differences that matter.

Rules that keep the form *never less strict than correct*:
- Anything that cannot be canonicalized (a parse error, a column no schema names, an ambiguous
  column, a `*` whose source is unknown, schemas of mixed depth) yields None, and the caller
  falls back to the stricter comparison of the raw trees.
- Output column names are kept *as Spark names them* (case as written; an unnamed expression is
  named by its own text), not as `qualify` normalises them: renaming an output column is a real
  change, so `COUNT(*)` and `COUNT(*) AS _col_1` stay different.

Canonicalizing costs a `qualify` pass, so callers do it lazily: only when two stored renderings
differ and the cheap raw comparison could not already classify the change.
"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

Schemas = dict[str, dict[str, str | None]]  # model name -> ordered column -> Spark type (None if unknown)

_UNKNOWN_TYPE = "UNKNOWN"


def parse_query(sql: str | None) -> exp.Expr | None:
    """A rendered query as a tree, or None when it cannot be parsed (e.g. stored by an older sqlglot)."""
    if sql is None:
        return None
    try:
        return parse_one(sql, read="spark")
    except Exception:  # noqa: BLE001 - any parse failure only means "cannot compare precisely"
        return None


def canonical_query(tree: exp.Expr, schemas: Schemas) -> exp.Expr | None:
    """The canonical tree of a parsed rendered query (left untouched), or None when it cannot be
    built with certainty.

    `schemas` are the parents' columns *now*. They serve the old rendering too: a column that moved
    from one parent to another is a removal in the first, which the plan already treats as a
    breaking upstream change, and a column that appeared in a second parent makes the old
    reference ambiguous, which yields None here.
    """
    names = _output_names(tree)
    if names is None:
        return None
    try:
        mapping = _mapping_schema(schemas)
        tree = qualify(tree.copy(), dialect="spark", schema=mapping, canonicalize_table_aliases=True,
                       quote_identifiers=True, identify=True, validate_qualify_columns=True)
    except Exception:  # noqa: BLE001 - sqlglot raises many error types; all mean "unknown" -> strict
        return None
    return tree if _restore_output_names(tree, names) else None


def _mapping_schema(schemas: Schemas) -> MappingSchema:
    """sqlglot's nested schema from `{'db.table': {col: type}}` (types it cannot know stay UNKNOWN)."""
    nested: dict = {}
    for name, columns in schemas.items():
        *path, table = name.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[table] = {column: kind or _UNKNOWN_TYPE for column, kind in columns.items()}
    return MappingSchema(nested, dialect="spark")


def _output_select(tree: exp.Expr) -> exp.Select | None:
    """The SELECT whose projections name the query's output (the left-most one of a set operation)."""
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def _output_names(tree: exp.Expr) -> list[str] | None:
    """The output column names Spark gives the query, as written; None if they cannot be known."""
    select = _output_select(tree)
    if select is None:
        return None
    names = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or isinstance(projection, exp.Column) and projection.is_star:
            return None  # positions would shift once `qualify` expands it
        names.append(_spark_name(projection))
    return names


def _spark_name(projection: exp.Expr) -> str:
    if isinstance(projection, exp.Alias):
        return projection.alias
    if isinstance(projection, exp.Column):
        return projection.name
    # Spark names an unnamed expression after its text; keep the text so that renaming it counts.
    return projection.sql(dialect="spark", comments=False)


def _restore_output_names(tree: exp.Expr, names: list[str]) -> bool:
    """Put the original output names back on the qualified output projections."""
    select = _output_select(tree)
    if select is None or len(select.expressions) != len(names):
        return False
    for projection, name in zip(select.expressions, names):
        if not isinstance(projection, exp.Alias):
            return False
        projection.set("alias", exp.to_identifier(name, quoted=True))
    return True
