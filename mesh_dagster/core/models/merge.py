"""Upserts: INCREMENTAL_BY_UNIQUE_KEY's MERGE written as one plain SELECT.

Parquet tables have no MERGE, so an upsert rewrites the table: the new content is a full outer
join of the table (`target`) and the batch's rows (`source`) on the unique key, where

- a table row no new row matches is kept as it is;
- a new row no table row matches is inserted;
- a matched pair becomes the new row (the default), or, with `when_matched`, goes through the
  first `WHEN MATCHED [AND condition]` clause whose condition holds: `UPDATE SET target.x = ...`
  sets those columns of the table row, `DELETE` drops it, and a pair no clause applies to keeps
  the table row.

`merge_filter` joins the key in the ON condition, as in a MERGE: it restricts which table rows a
new row can match (a new row whose key matches only rows the filter excludes is inserted beside
them). Keys are compared with `<=>`, so a NULL key matches a NULL key and re-running a batch never
duplicates its rows.

This module reads and checks the three properties at load time (Spark SQL out, whatever the
model's dialect) and writes the SQL the engine runs; the engine stages the batch's rows and
rewrites the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from mesh_dagster.core.config.types import get_dialect

SOURCE, TARGET = "source", "target"
_IN_SOURCE, _IN_TARGET = "__mesh_in_source", "__mesh_in_target"


class MergeSyntaxError(ValueError):
    """A unique_key, when_matched or merge_filter that cannot be honoured (the message says why)."""


# ---------------------------------------------------------------------------------------------
# Reading the properties (load time): each returns Spark SQL, or raises MergeSyntaxError


def normalize_unique_key(texts: Sequence[str], dialect: str) -> tuple[str, ...]:
    """Each key part (a column or an expression over the row's columns) as Spark SQL."""
    out = []
    for text in texts:
        tree = _parse(text, dialect, "unique_key")
        if tree.find(exp.AggFunc, exp.Window):
            raise MergeSyntaxError(f"unique_key '{text}' must be computed from one row (no aggregate or window)")
        columns = list(tree.find_all(exp.Column))
        if not columns:
            raise MergeSyntaxError(f"unique_key '{text}' names no column")
        qualified = [c.sql(dialect="spark") for c in columns if c.table]
        if qualified:
            raise MergeSyntaxError(f"unique_key '{text}' must name the row's columns unqualified "
                                   f"(got {', '.join(qualified)})")
        out.append(tree.sql(dialect="spark"))
    return tuple(out)


def normalize_merge_filter(text: str, dialect: str) -> str:
    tree = _parse(text, dialect, "merge_filter")
    _check_qualified(tree, "merge_filter")
    return tree.sql(dialect="spark")


def normalize_when_matched(text: str, dialect: str) -> str:
    """`WHEN MATCHED [AND condition] THEN UPDATE SET target.x = <expr>, ... | UPDATE SET * | DELETE`
    clauses (in order), as Spark SQL."""
    return " ".join(when.sql(dialect="spark") for when in _whens(text, dialect))


def _whens(text: str, dialect: str) -> list[exp.When]:
    body = text.strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    _refuse_macros(body, "when_matched")
    try:
        merge = sqlglot.parse_one(f"MERGE INTO {TARGET} USING {SOURCE} ON TRUE {body}", read=get_dialect(dialect))
    except (ParseError, TokenError) as e:
        raise MergeSyntaxError(f"Cannot read when_matched: {str(e).splitlines()[0]}. It is written "
                               "`when_matched (WHEN MATCHED [AND condition] THEN UPDATE SET target.col = "
                               "source.col, ...)`") from None
    whens = merge.args.get("whens")
    clauses = list(whens.expressions) if isinstance(whens, exp.Whens) else []
    if not clauses:
        raise MergeSyntaxError("when_matched holds no `WHEN MATCHED ... THEN ...` clause")
    for when in clauses:
        if not when.args.get("matched") or when.args.get("source"):
            raise MergeSyntaxError(f"when_matched takes WHEN MATCHED clauses only, got '{when.sql(dialect='spark')}' "
                                   "(new rows are always inserted)")
        then = when.args.get("then")
        if isinstance(then, exp.Update):
            _check_assignments(then)
        elif not (isinstance(then, exp.Var) and then.name.upper() == "DELETE"):
            raise MergeSyntaxError(f"when_matched clauses UPDATE SET or DELETE, got '{when.sql(dialect='spark')}'")
        if when.args.get("condition") is not None:
            _check_qualified(when.args["condition"], "when_matched")
    return clauses


def _check_assignments(update: exp.Update) -> None:
    for assignment in update.expressions:
        if isinstance(assignment, exp.Star):
            continue
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
            raise MergeSyntaxError(f"when_matched sets columns as `target.col = <expression>`, got "
                                   f"'{assignment.sql(dialect='spark')}'")
        if assignment.this.table.lower() not in ("", TARGET):
            raise MergeSyntaxError(f"when_matched can only set columns of target, got "
                                   f"'{assignment.sql(dialect='spark')}'")
        _check_qualified(assignment.expression, "when_matched")


def _check_qualified(tree: exp.Expr, what: str) -> None:
    """Columns must say which row they come from; nothing may read another table."""
    if tree.find(exp.Table, exp.Subquery):
        raise MergeSyntaxError(f"{what} may only use the columns of the source and target rows (no subquery)")
    loose = sorted({c.sql(dialect="spark") for c in tree.find_all(exp.Column)
                    if c.table.lower() not in (SOURCE, TARGET) or c.args.get("db") is not None})
    if loose:
        raise MergeSyntaxError(f"{what} must name columns as source.<column> or target.<column>, got "
                               f"{', '.join(loose)}")


def _parse(text: str, dialect: str, what: str) -> exp.Expr:
    _refuse_macros(text, what)
    try:
        tree = sqlglot.parse_one(text, read=get_dialect(dialect))
    except (ParseError, TokenError) as e:
        raise MergeSyntaxError(f"Cannot read {what} '{text}': {str(e).splitlines()[0]}") from None
    if tree is None or isinstance(tree, exp.Query):
        raise MergeSyntaxError(f"{what} must be an expression, got '{text}'")
    return tree.unnest()


def _refuse_macros(text: str, what: str) -> None:
    try:
        tokens = get_dialect("spark").tokenizer_class().tokenize(text)
    except TokenError as e:
        raise MergeSyntaxError(f"Cannot read {what}: {str(e).splitlines()[0]}") from None
    if any(t.token_type == TokenType.PARAMETER for t in tokens):
        raise MergeSyntaxError(f"Macros (@...) in {what} are not supported by mesh_dagster yet")


# ---------------------------------------------------------------------------------------------
# Columns the properties name (checked against the query's output at load time)


def key_columns(keys: Sequence[str]) -> list[str]:
    """Columns the unique key (Spark SQL, as `normalize_unique_key` wrote it) is computed from."""
    return _column_names(sqlglot.parse_one(k, read="spark") for k in keys)


def row_columns(when_matched: str | None, merge_filter: str | None) -> list[str]:
    """Columns of the source/target rows that `when_matched` and `merge_filter` (Spark SQL) name."""
    trees: list[exp.Expr] = [*_whens(when_matched, "spark")] if when_matched else []
    if merge_filter:
        trees.append(sqlglot.parse_one(merge_filter, read="spark"))
    return _column_names(trees)


def _column_names(trees: Iterable[exp.Expr]) -> list[str]:
    seen: dict[str, None] = {}
    for tree in trees:
        for column in tree.find_all(exp.Column):
            if column.name:
                seen.setdefault(column.name.lower())
    return list(seen)


# ---------------------------------------------------------------------------------------------
# The SQL of one upsert (evaluation time)


@dataclass(frozen=True)
class Upsert:
    """An upsert as the engine runs it; every text is Spark SQL as `normalize_*` wrote it."""

    keys: tuple[str, ...]
    when_matched: str | None = None
    merge_filter: str | None = None

    def describe_key(self) -> str:
        return self.keys[0] if len(self.keys) == 1 else f"({', '.join(self.keys)})"

    def duplicates_sql(self, source: str, limit: int) -> str:
        """Key values found more than once in `source` (a relation of new rows), with their count."""
        keys = ", ".join(f"{k} AS `k{i}`" for i, k in enumerate(self.keys))
        group = ", ".join(str(i + 1) for i in range(len(self.keys)))
        return (f"SELECT {keys}, COUNT(*) AS `n` FROM {source} GROUP BY {group} HAVING COUNT(*) > 1 "
                f"ORDER BY {group} LIMIT {int(limit)}")

    def merged_sql(self, target: str, source: str, columns: Sequence[str]) -> str:
        """The table's new content: `columns` (the table's, in its order) of the join of `target`
        (the table) and `source` (new rows with those columns, keys unique)."""
        on = " AND ".join(f"{_qualified(k, TARGET)} <=> {_qualified(k, SOURCE)}" for k in self.keys)
        if self.merge_filter:
            on += f" AND ({self.merge_filter})"
        only_target, only_source = f"{SOURCE}.`{_IN_SOURCE}` IS NULL", f"{TARGET}.`{_IN_TARGET}` IS NULL"
        projections = []
        for column in columns:
            cases = [f"WHEN {only_target} THEN {TARGET}.`{column}`", f"WHEN {only_source} THEN {SOURCE}.`{column}`"]
            cases += [f"WHEN {condition} THEN {value}" for condition, value in self._matched_values(column)]
            default = f"{TARGET}.`{column}`" if self._clauses else f"{SOURCE}.`{column}`"
            projections.append(f"CASE {' '.join(cases)} ELSE {default} END AS `{column}`")
        sql = (f"SELECT {', '.join(projections)}\n"
               f"FROM (SELECT *, TRUE AS `{_IN_TARGET}` FROM {target}) AS {TARGET}\n"
               f"FULL OUTER JOIN (SELECT *, TRUE AS `{_IN_SOURCE}` FROM {source}) AS {SOURCE}\nON {on}")
        deleted = self._deleted()
        if deleted:
            sql += f"\nWHERE {only_target} OR {only_source} OR NOT ({deleted})"
        return sql

    @cached_property
    def _clauses(self) -> list[exp.When]:
        return _whens(self.when_matched, "spark") if self.when_matched else []

    def _matched_values(self, column: str) -> list[tuple[str, str]]:
        """(condition, value of `column`) per clause, in order; the first that holds wins."""
        out = []
        for when in self._clauses:
            condition = when.args.get("condition")
            then = when.args["then"]
            value = f"{TARGET}.`{column}`"
            if isinstance(then, exp.Update):
                value = _assigned(then, column) or value
            out.append((condition.sql(dialect="spark") if condition is not None else "TRUE", value))
        return out

    def _deleted(self) -> str | None:
        """For a matched pair: whether the clause that applies to it deletes the row."""
        if not any(isinstance(w.args["then"], exp.Var) for w in self._clauses):
            return None
        cases = " ".join(
            f"WHEN {c.sql(dialect='spark') if (c := w.args.get('condition')) is not None else 'TRUE'} "
            f"THEN {'TRUE' if isinstance(w.args['then'], exp.Var) else 'FALSE'}"
            for w in self._clauses)
        return f"CASE {cases} ELSE FALSE END"


def _assigned(update: exp.Update, column: str) -> str | None:
    for assignment in update.expressions:
        if isinstance(assignment, exp.Star):
            return f"{SOURCE}.`{column}`"
        if assignment.this.name.lower() == column.lower():
            return assignment.expression.sql(dialect="spark")
    return None


def _qualified(key: str, alias: str) -> str:
    tree = sqlglot.parse_one(key, read="spark")
    for column in tree.find_all(exp.Column):
        column.set("table", exp.to_identifier(alias))
    return tree.sql(dialect="spark")
