"""A model's output columns, worked out at load time, and every property checked against them.

`time_column`, the columns other kind properties name (`unique_key`...), `grain`, `partitioned_by`,
`column_descriptions`, declared `columns` and the columns named by built-in audits must be columns
the model outputs; the output must not name a column
twice; a model that writes a table must name every output column with letters, digits and
underscores (the engine quotes nothing else). Spark would otherwise refuse these only while the
apply creates or fills the table, after other models' tables were built.

Rendering every query once at load is the price; the result is cached by what determines it (the
model's text and its parents' columns), so a warm load renders nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.cache import ProjectCache, content_key
from mesh_dagster.core.config.names import COLUMN, COLUMN_RULE, IDENTIFIER
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.kinds import IncrementalByTimeRangeKind
from mesh_dagster.core.models.model import AuditRef, Model
from mesh_dagster.core.sql.lineage import Lineage, plain_select_lineage
from mesh_dagster.core.sql.query_columns import query_columns
from mesh_dagster.core.sql.renderer import RenderContext, read_rendered
from mesh_dagster.core.time.time_column import TimeColumnError, check_time_column

_CACHE_NAMESPACE = "output_columns"
Schemas = dict[str, dict[str, str | None]]


@dataclass(frozen=True)
class Projection:
    """One output column of a query as written: its name (None if unnamed), its SQL and its line."""

    name: str | None
    sql: str
    line: int


@dataclass(frozen=True)
class OutputColumns:
    columns: dict[str, str | None] | None  # name → Spark type (None if unknown); None if unknowable
    projections: tuple[Projection, ...] | None = None  # the query's own projections, when known
    # Column lineage of a plain SELECT (core/sql/lineage.py's fast path, a walk of the tree rendered
    # here anyway); None when the query needs sqlglot's lineage, which is left until it is asked for
    lineage: Lineage | None = None


def query_output(model: Model, macros: MacroRegistry, variables: dict, schemas: Schemas,
                 cache: ProjectCache | None) -> OutputColumns:
    """The output of a model's query rendered against its parents' columns (cached)."""
    parts: tuple = (model.name, model.dialect, model.kind.name.value, model.query, model.macro_definitions,
                    model.query_line, sorted((k, sorted(v.items())) for k, v in schemas.items()))
    if model.blueprint_variables:  # its values are part of what the query renders to
        parts += (sorted(model.blueprint_variables.items()),)
    key = content_key(repr(parts).encode())
    found = cache.get(_CACHE_NAMESPACE, key) if cache is not None else None
    if found is None:
        found = _render_output(model, macros, variables, schemas)
        if cache is not None:
            cache.put(_CACHE_NAMESPACE, key, found)
    return found


def _render_output(model: Model, macros: MacroRegistry, variables: dict, schemas: Schemas) -> OutputColumns:
    def read(tree: exp.Query) -> OutputColumns:  # changes nothing in the tree (see read_rendered)
        projections = _projections(tree, model.query_line)
        return OutputColumns(query_columns(tree, schemas), projections, plain_select_lineage(tree, schemas))

    return read_rendered(model, RenderContext(variables=variables, schemas=schemas), macros, read)


def _projections(query: exp.Expr, first_line: int) -> tuple[Projection, ...] | None:
    """The outermost SELECT's projections (the left-most one of a set operation); None while a
    `*` remains (its columns are not known)."""
    while isinstance(query, (exp.Subquery, exp.Paren, exp.SetOperation)):
        query = query.this
    if not isinstance(query, exp.Select):
        return None
    out = []
    for projection in query.expressions:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None
        if isinstance(projection, exp.Alias):
            name = projection.alias or None
        elif isinstance(projection, (exp.Column, exp.Dot)):
            name = projection.name or None
        else:
            name = None
        # The SQL is only shown for unnamed columns: generating it for every column costs a copy
        # (which the generator needs: it changes the tree it writes, and this one is shared).
        sql = "" if name else projection.sql(dialect="spark")[:60]
        out.append(Projection(name, sql, first_line + _relative_line(projection) - 1))
    return tuple(out)


def _relative_line(node: exp.Expr) -> int:
    for child in node.walk():
        line = child.meta.get("line") if child.meta else None
        if line:
            return line
    return 1


# ---------------------------------------------------------------------------------------------
# Checks


def check_output_columns(model: Model, output: OutputColumns) -> None:
    """Every property that names a column is checked against the model's output columns."""
    _check_partition_names(model)
    if output.projections is not None:
        _check_projections(model, output.projections)
    if model.self_referencing:
        _check_self_reference(model, output)
    columns = output.columns
    if columns is None:
        return
    _check_kind_columns(model, output, columns)
    known = set(columns)
    if model.columns is not None and output.projections is not None:
        produced = {p.name.lower() for p in output.projections if p.name}
        _require(model, "columns", [c for c in model.columns if c not in produced], sorted(produced),
                 "columns declares {names}, which the query does not output")
    time_range = model.kind.time_range
    if time_range is not None:
        time_column = time_range.time_column
        _require(model, "kind", [time_column], columns, "time_column {names} is not an output column of {model}")
        _check_time_column_type(model, time_range, columns[time_column])
    for prop, named in model.kind.named_columns().items():
        _require(model, "kind", named, columns, prop + " names {names}, not an output column of {model}")
    for prop in ("references", "partitioned_by", "column_descriptions"):  # `grain`: grain_warning
        _require(
            model, prop, list(getattr(model, prop)), columns, prop + " names {names}, not an output column of {model}"
        )
    for ref in model.audits:
        _check_audit_columns(model, ref, known)


def grain_warning(model: Model, output: OutputColumns) -> str | None:
    """A `grain` naming columns the model does not output is metadata SQLMesh accepts: so does the
    loader, saying what it cannot do with it (pair the rows of two versions on it)."""
    columns = output.columns
    missing = [c for c in model.grain if columns is not None and c not in columns]
    if not missing:
        return None
    names = ", ".join(f"'{c}'" for c in missing)
    return (f"{model.path}:{model.line_of('grain')}: grain names {names}, not an output column of {model.name}: "
            f"kept as metadata, as SQLMesh does; data diffs of {model.name} compare row counts only, and "
            "`mesh table_diff` needs --on")


def _check_partition_names(model: Model) -> None:
    """Partition columns are plain identifiers: the Hive metastore cannot filter partitions by a
    name with spaces or hyphens (Spark fails every write of an interval on such a table)."""
    if not _writes_table(model):
        return
    for column in model.effective_partitioned_by:
        if not IDENTIFIER.fullmatch(column):
            prop = "partitioned_by" if column in model.partitioned_by else "kind"
            raise ModelError(f"Partition column '{column}' is not supported: the Hive metastore cannot filter "
                             f"partitions by a name with spaces or hyphens; output it as "
                             f"`{re.sub('[ -]+', '_', column)}` instead", model.path, model.line_of(prop))


def _check_kind_columns(model: Model, output: OutputColumns, columns: dict[str, str | None]) -> None:
    """The columns the kind's properties name are output columns; those it adds are not."""
    for prop, names in model.kind.named_columns().items():
        _require(model, "kind", names, columns, prop + " names {names}, not an output column of {model}")
    kind_name = model.kind.name.value
    for column in model.kind.added_columns():
        if column not in columns:
            continue
        line = next((p.line for p in output.projections or () if p.name and p.name.lower() == column),
                    model.line_of("columns" if model.columns is not None else "kind"))
        raise ModelError(f"The query outputs a column '{column}', which {kind_name} adds itself: rename the "
                         f"column, or name the kind's column otherwise (valid_from_name / valid_to_name)",
                         model.path, line)


def _check_self_reference(model: Model, output: OutputColumns) -> None:
    """A model reading its own table needs that table before its first run, so its column types
    must be known without running the query: declared (`columns`) or all inferred from casts,
    literals and typed parents. Kinds without a table of their own cannot read themselves, and its
    batches run one after another, each reading what the previous one wrote."""
    kind = model.kind
    if not kind.is_materialized:
        raise ModelError(f"Model {model.name} reads itself, which a {kind.name.value} model cannot do (it has no "
                         "table holding its previous state): make it FULL or incremental", model.path, model.query_line)
    concurrency = kind.batching.concurrency
    if concurrency > 1:
        raise ModelError(f"batch_concurrency {concurrency} cannot apply: model {model.name} "
                         "reads its own table, so each batch needs the one before it and they run one after another",
                         model.path, model.line_of("kind"))
    if model.columns is not None:
        return
    columns = output.columns
    untyped = [name for name, kind_ in (columns or {}).items() if kind_ is None]
    if columns is not None and not untyped:
        return
    line = next((p.line for p in output.projections or () if p.name and p.name.lower() in untyped), model.query_line)
    which = f"the type of {', '.join(untyped)} is" if untyped else "its columns are"
    raise ModelError(f"Model {model.name} reads its own table, so its column types must be known before it first "
                     f"runs, but {which} not: cast each column (`CAST(x AS INT) AS x`) or declare `columns (...)`",
                     model.path, line)


def _check_time_column_type(model: Model, kind: IncrementalByTimeRangeKind, column_type: str | None) -> None:
    """Intervals must be expressible on the time column's type in its format (an INT `ds` needs a
    numeric format such as '%Y%m%d'): core.time_column decides, for writes and audits alike."""
    if column_type is None:
        return
    try:
        check_time_column(column_type, kind.time_column_format)
    except TimeColumnError as e:
        raise ModelError(f"time_column {kind.time_column}: {e}", model.path, model.line_of("kind")) from None


def _writes_table(model: Model) -> bool:
    return model.kind.is_materialized


def _check_projections(model: Model, projections: tuple[Projection, ...]) -> None:
    if model.kind.is_inlined:
        return  # inlined as a subquery: only the columns its readers select matter
    seen: dict[str, Projection] = {}
    for projection in projections:
        if projection.name is None:
            if _writes_table(model):
                raise ModelError(f"The query's column `{projection.sql}` needs a name: write `... AS name`",
                                 model.path, projection.line)
            continue
        key = projection.name.lower()
        if _writes_table(model) and not COLUMN.fullmatch(projection.name):
            raise ModelError(f"Column name '{projection.name}' is not supported: {COLUMN_RULE}",
                             model.path, projection.line)
        if key in seen:
            raise ModelError(f"The query outputs column '{key}' twice (also at line {seen[key].line})",
                             model.path, projection.line)
        seen[key] = projection


def _require(model: Model, prop: str, named: list[str], known, message: str) -> None:
    """`named` columns must all be `known`; the message shows what the model does output."""
    missing = [c for c in named if c not in known]
    if missing:
        outputs = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
        text = message.format(names=", ".join(f"'{c}'" for c in missing), model=model.name)
        raise ModelError(f"{text} (it outputs: {outputs or 'nothing known'})", model.path, model.line_of(prop))


_COLUMN = ("column",)
_TWO = ("column", "target_column")
# The arguments of the built-in audits (core/project/builtin_audits.py) that name columns.
_AUDIT_COLUMN_ARGS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("not_null", "unique_values", "unique_combination_of_columns"), ("columns",)),
    **dict.fromkeys(("accepted_values", "not_accepted_values", "at_least_one", "not_null_proportion", "not_constant",
                     "sequential_values", "accepted_range", "not_empty_string", "string_length_equal",
                     "string_length_between", "valid_uuid", "valid_email", "valid_url", "valid_http_method",
                     "match_regex_pattern_list", "not_match_regex_pattern_list", "match_like_pattern_list",
                     "not_match_like_pattern_list", "mean_in_range", "stddev_in_range", "z_score"), _COLUMN),
    **dict.fromkeys(("kl_divergence", "chi_square"), _TWO),
    "mutually_exclusive_ranges": ("lower_bound_column", "upper_bound_column"),
}


def _check_audit_columns(model: Model, ref: AuditRef, known: set[str]) -> None:
    """Built-in audits name the columns they check: each must exist (or the audit fails in Spark)."""
    args = _AUDIT_COLUMN_ARGS.get(ref.name.removesuffix("_non_blocking"), ())
    named = [c for arg in args if arg in ref.args for c in _column_names(ref.args[arg], model.dialect)]
    missing = list(dict.fromkeys(c for c in named if c not in known))
    if missing:
        source = " (attached by model_defaults.audits in config.yaml)" if ref.default else ""
        names = ", ".join(f"'{c}'" for c in missing)
        raise ModelError(f"Audit {ref.name}{source}: column {names} is not an output column of {model.name}",
                         model.path, model.line_of("audits"))


def _column_names(text: str, dialect: str) -> list[str]:
    """Plain column names in an audit argument such as `(id, item_id)`; expressions are skipped."""
    try:
        tree = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError):
        return []  # the audit's own rendering reports what is wrong with its arguments
    items = (
        tree.expressions
        if isinstance(tree, (exp.Tuple, exp.Array))
        else [tree.this if isinstance(tree, exp.Paren) else tree]
    )
    return [item.name.lower() for item in items if isinstance(item, exp.Column) and not item.table]
