"""The macro language's syntax: what a macro call, argument and lambda are, how the scanner
finds them in SQL text, and the values every rendering provides (the runtime stage, the temporal
variables `@start_ds`...). Everything else in core/macros builds on these; they depend on nothing
of it, which is what lets the built-in macros (registry.py and the modules registering into it)
and the evaluator (evaluator.py) import each other's pieces without a cycle.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from sqlglot import exp

# Built-in macros whose value is a whole query, so that a model's query may be one of them
# (`@UNION('all', a, b)`) or start with it (`@WITH(cond) c AS (...) SELECT ...`).
QUERY_MACROS = frozenset({"UNION", "DEDUPLICATE", "DATE_SPINE", "WITH"})
RUNTIME_STAGES = ("loading", "creating", "evaluating", "promoting", "demoting", "testing", "auditing")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)



@dataclass(frozen=True)
class Lambda:
    """`x -> body` or `(x, y) -> body`, kept as text until applied (the body may hold macros)."""

    params: tuple[str, ...]
    body: str
    line: int


# ---------------------------------------------------------------------------------------------
# Dependency discovery


_DISCOVERING = contextvars.ContextVar("mesh_discovering_dependencies", default=False)


@contextmanager
def discovering_dependencies() -> Iterator[None]:
    """While the loader finds which models a query reads, no model's columns are known yet (they
    depend on the parents being found). Macros that need a relation's columns (`@STAR`) stand in
    for them instead of failing; the loader renders every query again, with its parents'
    columns, once the graph is known, and that render reports what really is missing."""
    token = _DISCOVERING.set(True)
    try:
        yield
    finally:
        _DISCOVERING.reset(token)


def columns_pending() -> bool:
    return _DISCOVERING.get()


# ---------------------------------------------------------------------------------------------
# Temporal and runtime variables


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@lru_cache(maxsize=1024)
def _temporal_locals(start: datetime, end_inclusive: datetime, execution: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for prefix, moment in (("start", start), ("end", end_inclusive), ("execution", execution)):
        naive = moment.replace(tzinfo=None)
        values[f"{prefix}_ds"] = moment.strftime("%Y-%m-%d")
        values[f"{prefix}_ts"] = naive.isoformat(sep=" ")
        values[f"{prefix}_tstz"] = moment.isoformat(sep=" ")
        values[f"{prefix}_date"] = moment.date()
        values[f"{prefix}_dt"] = moment
        values[f"{prefix}_dtntz"] = naive
        values[f"{prefix}_hour"] = moment.hour
        values[f"{prefix}_epoch"] = moment.timestamp()
        values[f"{prefix}_millis"] = (moment - EPOCH) // timedelta(milliseconds=1)
    return values


def temporal_locals(start: datetime | None, end: datetime | None, execution_time: datetime | None) -> dict[str, Any]:
    """`start_*`, `end_*`, `execution_*` values for an interval whose `end` is EXCLUSIVE (UTC).

    Without an interval (loading, creating) everything is 1970-01-01, like SQLMesh.
    """
    start_utc = _utc(start) or EPOCH
    end_utc = _utc(end) or (start_utc + timedelta(days=1))
    if execution_time is not None:
        execution = _utc(execution_time)
    elif start is None and end is None:
        execution = EPOCH
    else:
        execution = datetime.now(UTC)
    return dict(_temporal_locals(start_utc, end_utc - timedelta(microseconds=1), execution))


# ---------------------------------------------------------------------------------------------
# The scanner


@lru_cache(maxsize=1024)
def table(name: str) -> exp.Table:
    return exp.to_table(name)


BACKSLASH_DIALECTS = frozenset({"spark", "spark2", "databricks", "hive", "bigquery", "mysql", "clickhouse",
                                 "doris", "starrocks", "drill", "singlestore"})


@dataclass(frozen=True)
class Patterns:
    macro: re.Pattern
    struct: re.Pattern
    bind: re.Pattern
    template: re.Pattern
    clause: re.Pattern


@cache
def patterns(backslash_escapes: bool) -> Patterns:
    if backslash_escapes:
        sq, dq = r"'(?:[^'\\]|\\.|'')*'", r'"(?:[^"\\]|\\.|"")*"'
    else:
        sq, dq = r"'(?:[^']|'')*'", r'"(?:[^"]|"")*"'
    skip = rf"{sq}|{dq}|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/"
    name = r"[A-Za-z_]\w*"
    return Patterns(
        macro=re.compile(
            rf"(?P<skip>{skip})|@(?:\{{\s*(?P<brace>{name})\s*\}}|(?P<tmpl>{sq})|(?P<name>{name})(?P<call>[ \t]*\()?)",
            re.S,
        ),
        struct=re.compile(rf"(?P<skip>{skip})|(?P<open>[(\[{{])|(?P<close>[)\]}}])|(?P<comma>,)", re.S),
        bind=re.compile(
            rf"(?P<tmpl>@{sq})|(?P<skip>{skip})|@(?:\{{\s*(?P<brace>{name})\s*\}}|(?P<name>{name}))"
            rf"|(?P<word>(?<![\w.@$]){name})",
            re.S,
        ),
        template=re.compile(rf"@(?:\{{\s*(?P<brace>{name})\s*\}}|(?P<name>{name}))"),
        clause=re.compile(
            rf"(?P<skip>{skip})|(?P<open>[(\[{{])|(?P<close>[)\]}}])|(?P<semi>;)|(?P<comma>,)"
            rf"|@(?P<macro>{name})(?=[ \t]*\()|(?P<word>(?<![\w.@$]){name})",
            re.S,
        ),
    )


LAMBDA = re.compile(r"\s*(?:\(\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*\)|([A-Za-z_]\w*))\s*->", re.S)
KWARG = re.compile(r"\s*([A-Za-z_]\w*)\s*(?::=|=>)", re.S)
SIMPLE = re.compile(r"[\w.]+|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`", re.S)
STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.|'')*)'", re.S)
AS_BEFORE = re.compile(r"\bAS\s*$", re.I)


@dataclass(frozen=True)
class Arg:
    """One argument of a macro call, as written, and the file line it starts on."""

    text: str
    line: int


@dataclass(frozen=True)
class Call:
    name: str
    args: list[Arg]
    kwargs: dict[str, Arg]
    line: int


@dataclass(frozen=True)
class Clause:
    """The value of a clause operator (`@WHERE(cond) x > 1`): the clause's keyword when the
    condition holds; otherwise the clause is left out, from the operator up to where the next
    clause starts (a word or operator in `next_clauses`, the end of the enclosing parentheses, `;`)."""

    keyword: str  # what the operator becomes: 'WHERE', 'GROUP BY', ...
    keep: bool
    next_clauses: frozenset[str]  # upper-case keywords, and operators as '@NAME'
    leading: frozenset[str] = frozenset()  # words just before the operator that belong to it (LEFT OUTER)
    ends_at_comma: bool = False


def normalize_name(name: str | exp.Expr) -> str:
    """`Schema.Table`, `"schema"."table"`, a sqlglot Table or Column → `schema.table`."""
    if isinstance(name, exp.Table):
        return ".".join(p.name for p in name.parts).lower()
    if isinstance(name, exp.Column):
        return ".".join(p.name for p in name.parts).lower()
    if isinstance(name, exp.Literal):
        name = name.this
    if isinstance(name, exp.Expression):
        name = name.name
    return ".".join(p.strip("`\" ") for p in str(name).split(".")).lower()


def lookup(mapping: Mapping[str, Any], key: str) -> Any:
    """Look a table name up, treating `x` and `default.x` as the same table."""
    found = mapping.get(key)
    if found is not None or not mapping:
        return found
    if "." not in key:
        return mapping.get(f"default.{key}")
    if key.startswith("default.") and key.count(".") == 1:
        return mapping.get(key[8:])
    return None


