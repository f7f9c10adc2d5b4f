"""The columns of a rendered query: `*` expanded against the parents' columns, and the output
columns with the Spark types that are cheaply and surely known.

Two paths, chosen per SELECT:
- the fast path, hand-written: FROM/JOIN items whose columns are known, plain or semi/anti joins.
  It is what almost every model takes, on the hot path of every plan, and it costs a walk of the
  SELECT: no copy, no scope analysis.
- sqlglot's `qualify_columns`, for the SELECTs whose `*` the fast path cannot expand because Spark
  merges or makes columns: USING and NATURAL joins (the join columns come first, once), PIVOT and
  UNPIVOT (grouping columns and one column per value), LATERAL VIEW (the generator's columns come
  last). It runs on a copy of the tree, and only the expansion of the `*` is taken over into the
  query, which is otherwise left as written: a USING key becomes the unqualified key (what Spark's
  `*` outputs, for every join side), not sqlglot's `COALESCE(l.k, r.k)`, whose type Spark widens.
  Whatever this path is not sure of (an unknown source, several `*`s in one SELECT, a PIVOT after
  a join, columns whose names differ only in case...) keeps its `*`, as before.

Types come from casts, literals and the sources' columns only, never from sqlglot's
`annotate_types`: it costs more than parsing the query, and its answers are not Spark's
(`COALESCE(int, int)` is BIGINT to it, `EXPLODE(array<string>)` an array). None means unknown.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.qualify_columns import qualify_columns
from sqlglot.schema import MappingSchema

from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.macros.syntax import lookup, normalize_name

SPARK = get_dialect("spark")
# Part of the project cache's salt: bumped whenever a query's expansion or output columns may come
# out differently, so cached output columns are recomputed (2: USING/NATURAL/PIVOT/LATERAL VIEW;
# 3: the output holds the column lineage of a plain SELECT; 4: COUNT is BIGINT).
COLUMN_RULES = 4
Schemas = dict[str, dict[str, str | None]]  # model name -> ordered column -> Spark type (None if unknown)

_TAG = "mesh_star_select"  # meta key marking a SELECT in the copy given to sqlglot
_UNKNOWN_TYPE = "UNKNOWN"


def table_key(table: exp.Table) -> str:
    return ".".join(p.name for p in table.parts).lower()


def cte_queries(tree: exp.Expr) -> dict[str, exp.CTE]:
    return {cte.alias_or_name.lower(): cte for cte in tree.find_all(exp.CTE)}


# ---------------------------------------------------------------------------------------------
# Star expansion


def expand_stars(tree: exp.Expr, schemas: Schemas, ctes: dict[str, exp.CTE]) -> None:
    """`*` / `t.*` over sources whose columns are all known → explicit columns, in place.

    Inner selects go first, and the passes repeat so a CTE reading another CTE sees its columns;
    sqlglot is asked only when the fast path is stuck and a SELECT needs it.
    """
    selects = [s for s in tree.find_all(exp.Select) if any(_is_star(p) for p in s.expressions)]
    selects.reverse()
    while selects:
        remaining = [s for s in selects if not _expand_select(s, schemas, ctes)]
        if len(remaining) == len(selects):
            scoped = [s for s in remaining if _needs_scopes(s)]
            if not scoped or not _expand_with_sqlglot(tree, scoped, schemas, ctes):
                return
            remaining = [s for s in remaining if any(_is_star(p) for p in s.expressions)]
        selects = remaining


def _is_star(projection: exp.Expr) -> bool:
    return isinstance(projection, exp.Star) or (
        isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
    )


def _expand_select(select: exp.Select, schemas: Schemas, ctes: dict[str, exp.CTE]) -> bool:
    """Whether every star of `select` could be expanded (partial progress is kept)."""
    sources = _sources(select, schemas, ctes)
    if sources is None:
        return False
    projections: list[exp.Expr] = []
    complete = True
    visible = [(alias, cols) for alias, cols, hidden in sources if not hidden]
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            excluded = {normalize_name(e) for e in (projection.args.get("except_") or [])}
            special = any(projection.args.get(k) for k in ("replace", "rename", "ilike"))
            if special or any(c is None for _, c in visible):
                projections.append(projection)
                complete = False
                continue
            qualify = len(visible) > 1
            for alias, cols in visible:
                projections += [exp.column(c, table=alias if qualify else None) for c in cols or []
                                if c.lower() not in excluded]
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            alias = projection.table.lower()
            cols = next((c for a, c, _ in sources if a.lower() == alias), None)
            if cols is None or projection.this.args.get("except_") or projection.this.args.get("replace"):
                projections.append(projection)
                complete = False
                continue
            projections += [exp.column(c, table=projection.table) for c in cols]
        else:
            projections.append(projection)
    select.set("expressions", projections)
    return complete


_Source = tuple[str, list[str] | None, bool]


def _needs_scopes(select: exp.Select) -> bool:
    """Whether Spark merges or makes columns in this SELECT's FROM (what the fast path refuses)."""
    from_ = select.args.get("from_")
    if from_ is None:
        return False
    joins = select.args.get("joins") or []
    return bool(select.args.get("laterals") or from_.this.args.get("pivots")
                or any(j.args.get("using") or _is_natural(j) or _join_pivots(j) for j in joins))


def _join_pivots(join: exp.Join) -> bool:
    """A PIVOT written after a join (sqlglot hangs it on the join or its table; Spark pivots the
    whole FROM clause)."""
    return bool(join.args.get("pivots") or join.this.args.get("pivots"))


def _is_natural(join: exp.Join) -> bool:
    return (join.method or "").upper() == "NATURAL"


def _sources(select: exp.Select, schemas: Schemas, ctes: dict[str, exp.CTE]) -> list[_Source] | None:
    """(alias, columns or None, hidden by a semi/anti join) per FROM/JOIN item; None if `*` has
    semantics the fast path does not reproduce (see `_needs_scopes`)."""
    from_ = select.args.get("from_")
    if from_ is None or _needs_scopes(select):
        return None
    items = [(from_.this, False)]
    for join in select.args.get("joins") or []:
        kind = (join.kind or "").upper()
        items.append((join.this, kind in ("SEMI", "ANTI")))
    sources = []
    for item, hidden in items:
        sources.append((item.alias_or_name, _source_columns(item, schemas, ctes), hidden))
    return sources


def _source_columns(item: exp.Expr, schemas: Schemas, ctes: dict[str, exp.CTE]) -> list[str] | None:
    alias = item.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return [c.name for c in alias.columns]
    if isinstance(item, exp.Table):
        if not isinstance(item.this, exp.Identifier):
            return None
        key = table_key(item)
        if item.args.get("db") is None and key in ctes:
            cte = ctes[key]
            cte_alias = cte.args.get("alias")
            if isinstance(cte_alias, exp.TableAlias) and cte_alias.columns:
                return [c.name for c in cte_alias.columns]
            return _query_names(cte.this)
        cols = lookup(schemas, key) if schemas else None
        return list(cols) if cols else None
    if isinstance(item, exp.Subquery):
        return _query_names(item.this)
    return None


def _query_names(query: exp.Expr) -> list[str] | None:
    while isinstance(query, (exp.Subquery, exp.Paren)):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _query_names(query.this)
    if not isinstance(query, exp.Select):
        return None
    names = []
    for projection in query.expressions:
        name = _output_name(projection)
        if name is None:
            return None
        names.append(name)
    return names


def _output_name(projection: exp.Expr) -> str | None:
    """The column name a projection produces; None for stars and unaliased expressions (Spark
    would invent a name like `count(1)` that nobody should rely on)."""
    if isinstance(projection, exp.Alias):
        return projection.alias or None
    if isinstance(projection, (exp.Column, exp.Dot)) and not isinstance(projection.this, exp.Star):
        return projection.name or None
    return None


# ---------------------------------------------------------------------------------------------
# Star expansion by sqlglot (USING / NATURAL / PIVOT / UNPIVOT / LATERAL VIEW)


def _expand_with_sqlglot(tree: exp.Expr, selects: list[exp.Select], schemas: Schemas,
                         ctes: dict[str, exp.CTE]) -> bool:
    """Expand the `*` of `selects` as sqlglot's `qualify_columns` does on a copy of `tree`;
    whether any was expanded."""
    candidates: list[tuple[exp.Select, dict[str, int]]] = []
    for select in selects:
        names = _scoped_names(select, schemas, ctes)
        if names is not None:
            select.meta[_TAG] = len(candidates)
            candidates.append((select, names))
    if not candidates:
        return False
    try:
        copy = tree.copy()
    finally:
        for select, _ in candidates:
            select.meta.pop(_TAG, None)
    try:
        qualify_columns(copy, _copy_schema(copy, schemas, ctes), expand_alias_refs=False, dialect=SPARK)
    except Exception:  # noqa: BLE001 - sqlglot raises many error types; all mean "keep the star"
        return False
    expanded = False
    for qualified in copy.find_all(exp.Select):
        index = qualified.meta.get(_TAG) if qualified.meta else None
        if index is not None:
            select, names = candidates[index]
            expanded = _take_expansion(select, qualified, names) or expanded
    return expanded


def _scoped_names(select: exp.Select, schemas: Schemas, ctes: dict[str, exp.CTE]) -> dict[str, int] | None:
    """How many sources of `select` have a column of each (lower-case) name, lateral views
    included; None unless `_take_expansion` can map sqlglot's expansion back with certainty: one
    `*`, every source's columns known (sqlglot names an unnamed column `_col_0`, Spark does not),
    no two columns whose names differ only in case (sqlglot would not merge them, Spark does), a
    PIVOT only on a lone source (Spark pivots the whole FROM clause), lateral views with a name
    and column names."""
    if sum(1 for p in select.expressions if _is_star(p)) != 1:
        return None
    from_ = select.args["from_"]
    joins = select.args.get("joins") or []
    laterals = select.args.get("laterals") or []
    pivots = from_.this.args.get("pivots")
    if any(_join_pivots(j) for j in joins) or (pivots and (joins or laterals or len(pivots) > 1)):
        return None
    columns: list[str] = []
    for item in [from_.this, *(j.this for j in joins)]:
        known = _source_columns(item, schemas, ctes) if isinstance(item, (exp.Table, exp.Subquery)) else None
        if known is None:
            return None
        columns += known
    for lateral in laterals:
        alias = lateral.args.get("alias")
        if not lateral.args.get("view") or not isinstance(alias, exp.TableAlias) or not alias.name \
                or not alias.columns:
            return None
        columns += [c.name for c in alias.columns]
    spelled: dict[str, str] = {}
    counts: dict[str, int] = {}
    for column in columns:
        key = column.lower()
        if spelled.setdefault(key, column) != column:
            return None
        counts[key] = counts.get(key, 0) + 1
    return counts


def _copy_schema(copy: exp.Expr, schemas: Schemas, ctes: dict[str, exp.CTE]) -> MappingSchema:
    """Every table of the copy renamed `_mesh_<n>` (aliased by the name the query uses for it),
    so sqlglot sees one flat schema whatever the depth of the names (`x` is `default.x`)."""
    return MappingSchema(flatten_tables(copy, schemas, ctes)[1], dialect=SPARK, normalize=False)


def flatten_tables(copy: exp.Expr, schemas: Schemas,
                   ctes: dict[str, exp.CTE]) -> tuple[dict[str, str], dict[str, object]]:
    """Rename every table of `copy` `_mesh_<n>`, one name per table, aliased by the name the query
    used (CTEs and table-valued functions stay); the flat name -> table key, and the flat schema of
    the tables whose columns are known (column analysis here, column lineage in lineage.py)."""
    flat: dict[str, str] = {}
    by_key: dict[str, str] = {}
    schema: dict[str, object] = {}
    for table in list(copy.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function
        key = table_key(table)
        if table.args.get("db") is None and key in ctes:
            continue  # a CTE
        name = by_key.setdefault(key, f"_mesh_{len(by_key)}")
        flat[name] = key
        columns = lookup(schemas, key) if schemas else None
        if columns:
            schema[name] = {c: t or _UNKNOWN_TYPE for c, t in columns.items()}
        if not table.args.get("alias"):
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(name))
        table.set("db", None)
        table.set("catalog", None)
    return flat, schema


def _take_expansion(select: exp.Select, qualified: exp.Select, names: dict[str, int]) -> bool:
    """Replace the `*` of `select` by what sqlglot expanded it to in `qualified` (the same SELECT
    in the qualified copy, where every other projection stayed one projection)."""
    position = next(i for i, p in enumerate(select.expressions) if _is_star(p))
    items = qualified.expressions
    count = len(items) - (len(select.expressions) - 1)
    if count < 0 or any(_is_star(p) for p in items):
        return False
    # One source and a bare `*`: unqualified columns, as the fast path writes them.
    lone = isinstance(select.expressions[position], exp.Star) and not (
        select.args.get("joins") or select.args.get("laterals"))
    columns: list[exp.Expr] = []
    for item in items[position:position + count]:
        column = _plain_column(item, names)
        if column is None:
            return False
        if lone and isinstance(column.this, exp.Identifier):
            column.set("table", None)
        columns.append(column)
    select.set("expressions", [*select.expressions[:position], *columns, *select.expressions[position + 1:]])
    return True


def _plain_column(item: exp.Expr, names: dict[str, int]) -> exp.Column | None:
    """One expanded column as Spark's `*` outputs it; None for a form we do not know."""
    if isinstance(item, exp.Alias) and isinstance(item.this, exp.Column) and item.this.name == item.alias:
        item = item.this  # `p.q1 AS q1` (PIVOT)
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item
    if isinstance(item, exp.Alias) and isinstance(item.this, exp.Coalesce):
        # A USING / NATURAL key: the unqualified key is what `*` outputs, from whichever side the
        # join keeps, as long as no other source has a column of that name (Spark: ambiguous).
        sides = [item.this.this, *item.this.expressions]
        if all(isinstance(s, exp.Column) and s.name == item.alias for s in sides) \
                and names.get(item.alias.lower(), 0) == len(sides):
            return exp.column(item.args["alias"].copy())
    return None


# ---------------------------------------------------------------------------------------------
# Output columns and their types


def query_columns(tree: exp.Expr, schemas: Schemas) -> dict[str, str | None] | None:
    """Ordered output columns of a rendered query → Spark type (None when not cheaply known)."""
    return _query_columns(tree, schemas, cte_queries(tree))


def _query_columns(query: exp.Expr, schemas: Schemas, ctes: dict[str, exp.CTE]) -> dict[str, str | None] | None:
    while isinstance(query, (exp.Subquery, exp.Paren)):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _query_columns(query.this, schemas, ctes)
    if not isinstance(query, exp.Select):
        return None
    sources = _typed_sources(query, schemas, ctes)
    merged = any(j.args.get("using") or _is_natural(j) for j in query.args.get("joins") or [])
    columns: dict[str, str | None] = {}
    for projection in query.expressions:
        name = _output_name(projection)
        if name is None:
            return None
        columns.setdefault(name.lower(), _projection_type(projection, sources, merged))
    return columns


def _typed_sources(select: exp.Select, schemas: Schemas, ctes: dict[str, exp.CTE]) -> dict[str, dict[str, str | None]]:
    """alias → columns with types, for the FROM/JOIN items whose types we know."""
    out: dict[str, dict[str, str | None]] = {}
    from_ = select.args.get("from_")
    items = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
    for item in items:
        typed: dict[str, str | None] | None = None
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
            key = table_key(item)
            if item.args.get("db") is None and key in ctes:
                typed = _query_columns(ctes[key].this, schemas, ctes)
            elif schemas:
                typed = lookup(schemas, key)
        elif isinstance(item, exp.Subquery):
            typed = _query_columns(item.this, schemas, ctes)
        if typed:
            out[item.alias_or_name.lower()] = {k.lower(): v for k, v in typed.items()}
    return out


def _projection_type(projection: exp.Expr, sources: dict[str, dict[str, str | None]], merged: bool) -> str | None:
    """`merged`: the SELECT has USING / NATURAL joins, whose unqualified key is one column that
    Spark takes from one side or coalesces, so its type is known when every side agrees."""
    node = projection.this if isinstance(projection, exp.Alias) else projection
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return node.to.sql(dialect=SPARK)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "STRING"
        text = str(node.this)
        if text.isdigit():
            return "INT" if int(text) < 2**31 else "BIGINT"
        return None
    if isinstance(node, exp.Boolean):
        return "BOOLEAN"
    if isinstance(node, exp.Count):  # Spark counts in a LongType, whatever it counts
        return "BIGINT"
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        column = node.name.lower()
        if node.table:
            return (sources.get(node.table.lower()) or {}).get(column)
        having = [cols[column] for cols in sources.values() if column in cols]
        if len(having) == 1 or (merged and having and all(t == having[0] for t in having)):
            return having[0]
        return None
    return None
