"""SQLMesh-style macros: `@var`, `@{var}`, `@'...'`, `@FUNC(...)` and user Python macros.

Macros are expanded on the SQL *text*, before sqlglot parses the query. SQLMesh works on the AST
with patched parsers, but every sqlglot dialect reads `@` differently (a parameter in Spark, the
absolute-value operator in DuckDB), `x -> ...` and `:=` are not valid everywhere, and we must not
subclass the dialects. So a small scanner that knows strings, quoted identifiers and comments
finds the macro calls; arguments are parsed by sqlglot only when a macro needs their structure (a
list to iterate, a condition to evaluate, an argument for a Python macro); results are spliced
back as SQL text in the model's dialect, and the query is parsed once afterwards.

A macro's value is one of: a sqlglot expression, `SQL` (text produced by a macro), a Python value
(from config variables or the temporal locals), a list of those, a `Lambda`, or None (the macro
vanishes, taking an adjacent comma with it).
"""

from __future__ import annotations

import contextvars
import inspect
import re
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import Dialect, exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.errors import MacroError, ModelError
from mesh_dagster.core.macro_depth import def_application
from mesh_dagster.core.macro_types import SQL, CoercionError, UnsupportedAnnotation, coerce, resolved_annotations
from mesh_dagster.core.parse_errors import describe
from mesh_dagster.core.user_modules import UserPackage

USER_MACROS_PACKAGE = "mesh_user_macros"
# Built-in macros whose value is a whole query, so that a model's query may be one of them
# (`@UNION('all', a, b)`) or start with it (`@WITH(cond) c AS (...) SELECT ...`).
QUERY_MACROS = frozenset({"UNION", "DEDUPLICATE", "DATE_SPINE", "WITH"})
RUNTIME_STAGES = ("loading", "creating", "evaluating", "promoting", "demoting", "testing", "auditing")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MACRO_ATTR = "__mesh_macro__"


@dataclass(frozen=True)
class Lambda:
    """`x -> body` or `(x, y) -> body`, kept as text until applied (the body may hold macros)."""

    params: tuple[str, ...]
    body: str
    line: int


@dataclass(frozen=True)
class MacroSpec:
    name: str
    metadata_only: bool = False


# ---------------------------------------------------------------------------------------------
# User macros: decorator, registry, loader


def macro(name: str | Callable | None = None, *, metadata_only: bool = False):
    """Mark a function in `macros/*.py` as a macro: `@macro()` or `@macro("name")`.

    The function is only tagged, not put in a global registry, so loading a project twice (or two
    projects in one process) never mixes their macros.
    """

    if callable(name):  # bare `@macro`
        return macro()(name)

    def tag(fn: Callable) -> Callable:
        setattr(fn, _MACRO_ATTR, MacroSpec((name or fn.__name__).lower(), metadata_only))
        return fn

    return tag


class MacroRegistry:
    """A project's user macros by lower-case name."""

    def __init__(self) -> None:
        self._functions: dict[str, Callable] = {}
        self._specs: dict[str, MacroSpec] = {}
        self._sources: dict[str, str] = {}

    def register(self, fn: Callable, name: str | None = None, metadata_only: bool | None = None) -> None:
        spec = getattr(fn, _MACRO_ATTR, None)
        spec = spec if isinstance(spec, MacroSpec) else MacroSpec((name or fn.__name__).lower())
        key = (name or spec.name).lower()
        self._functions[key] = fn
        self._specs[key] = MacroSpec(key, spec.metadata_only if metadata_only is None else metadata_only)
        self._sources.pop(key, None)

    def get(self, name: str) -> Callable | None:
        return self._functions.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._functions

    def __len__(self) -> int:
        return len(self._functions)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def is_metadata_only(self, name: str) -> bool:
        spec = self._specs.get(name.lower())
        return bool(spec and spec.metadata_only)

    def source(self, name: str) -> str:
        """The macro's source code: it goes into the fingerprint of every model that calls it."""
        key = name.lower()
        if key not in self._sources:
            fn = self._functions[key]
            try:
                self._sources[key] = inspect.getsource(fn)
            except (OSError, TypeError):
                code = getattr(fn, "__code__", None)
                self._sources[key] = repr(code.co_code) if code is not None else repr(fn)
        return self._sources[key]

    def used_by(self, sql_text: str) -> list[str]:
        """Names of the user macros `sql_text` calls (sorted)."""
        if not self._functions or "@" not in sql_text:
            return []
        return sorted({m.lower() for m in _CALL_NAMES.findall(sql_text) if m.lower() in self._functions})


_CALL_NAMES = re.compile(r"@([A-Za-z_]\w*)[ \t]*\(")


def load_macros(macros_dir: Path) -> MacroRegistry:
    """Import `macros/` as the package `mesh_user_macros` (its `__init__.py` included) and every
    `macros/*.py` as `mesh_user_macros.<stem>`, and collect their `@macro` functions.

    A file the package's `__init__.py` already imported (`from .helpers import x`) is not run a
    second time. A file that fails to import is one error naming the file and line.
    """
    registry = MacroRegistry()
    package = _user_package(Path(macros_dir))
    for module in package.import_all():
        _collect(module, registry, package)
    return registry


def _user_package(macros_dir: Path) -> UserPackage:
    return UserPackage(USER_MACROS_PACKAGE, macros_dir, "macros")


def _collect(module: types.ModuleType, registry: MacroRegistry, package: UserPackage) -> None:
    for value in list(vars(module).values()):
        spec = getattr(value, _MACRO_ATTR, None) if callable(value) else None
        if not isinstance(spec, MacroSpec):
            continue
        existing = registry.get(spec.name)
        if existing is not None and existing is not value:
            raise ModelError(f"Macro '{spec.name}' is defined twice (also in {package.defined_in(existing)[0]})",
                             *package.defined_in(value))
        registry.register(value)


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


@cache
def get_dialect(name: str) -> Dialect:
    """One sqlglot Dialect instance per name: passing a name makes sqlglot build a new one per call."""
    return Dialect.get_or_raise(name)


@lru_cache(maxsize=1024)
def _table(name: str) -> exp.Table:
    return exp.to_table(name)


_BACKSLASH_DIALECTS = frozenset({"spark", "spark2", "databricks", "hive", "bigquery", "mysql", "clickhouse",
                                 "doris", "starrocks", "drill", "singlestore"})


@dataclass(frozen=True)
class _Patterns:
    macro: re.Pattern
    struct: re.Pattern
    bind: re.Pattern
    template: re.Pattern
    clause: re.Pattern


@cache
def _patterns(backslash_escapes: bool) -> _Patterns:
    if backslash_escapes:
        sq, dq = r"'(?:[^'\\]|\\.|'')*'", r'"(?:[^"\\]|\\.|"")*"'
    else:
        sq, dq = r"'(?:[^']|'')*'", r'"(?:[^"]|"")*"'
    skip = rf"{sq}|{dq}|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/"
    name = r"[A-Za-z_]\w*"
    return _Patterns(
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


_LAMBDA = re.compile(r"\s*(?:\(\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*\)|([A-Za-z_]\w*))\s*->", re.S)
_KWARG = re.compile(r"\s*([A-Za-z_]\w*)\s*(?::=|=>)", re.S)
_SIMPLE = re.compile(r"[\w.]+|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`", re.S)
_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.|'')*)'", re.S)
_AS_BEFORE = re.compile(r"\bAS\s*$", re.I)


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


# ---------------------------------------------------------------------------------------------
# The evaluator


class MacroEvaluator:
    """Expands macros in SQL text of one dialect; user Python macros receive it as first argument."""

    def __init__(
        self,
        dialect: str = "spark",
        *,
        registry: MacroRegistry | None = None,
        variables: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        runtime_stage: str = "loading",
        this_model: str | None = None,
        model_kind_name: str | None = None,
        gateway: str | None = None,
        schemas: Mapping[str, Mapping[str, str | None]] | None = None,
        table_mapping: Mapping[str, str] | None = None,
        path: str | None = None,
        line: int = 1,
    ):
        self.dialect = dialect or "spark"
        self.registry = registry or MacroRegistry()
        self.variables = {k.lower(): v for k, v in (variables or {}).items()}
        self.runtime_stage = runtime_stage
        self.gateway = gateway
        self.path = path
        self.line = line
        self._this_model = this_model
        self._schemas = schemas or {}
        self._table_mapping = table_mapping or {}
        self._patterns = _patterns(self.dialect.lower() in _BACKSLASH_DIALECTS)
        self._sqlglot_dialect = get_dialect(self.dialect)
        self.locals: dict[str, Any] = {k.lower(): v for k, v in (locals or {}).items()}
        self._def_calls: list[str] = []  # the @DEF functions being applied (core/macro_depth.py)
        self.locals["runtime_stage"] = runtime_stage
        self.locals["gateway"] = gateway
        self.locals["model_kind_name"] = model_kind_name
        self.locals["this_model"] = _table(this_model) if this_model else None  # shared: never mutated

    # -- API for user macros ------------------------------------------------------------------

    @property
    def this_model(self) -> str | None:
        """The table the model writes to (physical at evaluation, the model name at loading)."""
        return self._this_model

    def var(self, name: str, default: Any = None) -> Any:
        """A config variable (names are case-insensitive)."""
        return self.variables.get(name.lower(), default)

    def columns_to_types(self, model_name: str | exp.Expr) -> dict[str, str | None] | None:
        """Known columns (→ Spark type text or None) of an upstream model, or None."""
        found = _lookup(self._schemas, normalize_name(model_name))
        return dict(found) if found is not None else None

    def resolve_table(self, model_name: str | exp.Expr) -> str:
        """What a reference to `model_name` reads at this stage (physical table, view or itself)."""
        key = normalize_name(model_name)
        return _lookup(self._table_mapping, key) or key

    def parse(self, sql: str) -> exp.Expr:
        """Parse SQL text in the model's dialect (for user macros building expressions)."""
        return self.parse_expression(sql, self.line).copy()

    # -- expansion ----------------------------------------------------------------------------

    def define(self, text: str, line: int | None = None) -> None:
        """Evaluate `@DEF(...)` statements (their output, if any, is dropped)."""
        self.expand(text, self.line if line is None else line)

    def expand(self, text: str, line: int | None = None) -> str:
        """`text` with every macro replaced by its SQL."""
        if "@" not in text:
            return text
        line = self.line if line is None else line
        pattern = self._patterns.macro
        out: list[str] = []
        pos = 0
        while True:
            m = pattern.search(text, pos)
            if m is None:
                break
            if m.group("skip") is not None:
                out.append(text[pos:m.end()])
                pos = m.end()
                continue
            start = m.start()
            out.append(text[pos:start])
            at_line = line + text.count("\n", 0, start)
            clause = False
            embed = start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_")
            end = m.end()
            if m.group("brace"):
                rendered = self.to_sql(self.variable(m.group("brace"), at_line), embed=True)
            elif m.group("tmpl"):
                rendered = self._template(m.group("tmpl"), at_line)
            elif m.group("call"):
                call, end = self.read_call(text, m.group("name"), m.end() - 1, at_line)
                value = self.call(call)
                if isinstance(value, Clause):
                    rendered, end = self._clause(value, out, text, end)
                    clause = True
                else:
                    rendered = self.to_sql(value, embed=embed)
            else:
                rendered = self.to_sql(self.variable(m.group("name"), at_line), embed=embed)
            newlines = text.count("\n", start, end)
            if not rendered and not clause:
                end = self._drop_comma(out, text, end)
            elif "\n" in rendered and "--" not in rendered:
                rendered = rendered.replace("\n", " ")
            # Keep the line count so that parse errors after a macro point at the right line.
            out.append(rendered + "\n" * (newlines - rendered.count("\n")) if newlines else rendered)
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def _clause(self, clause: Clause, out: list[str], text: str, end: int) -> tuple[str, int]:
        """A clause operator's text and where the text after it resumes."""
        if clause.keep:
            return clause.keyword, end
        if out and clause.leading:
            out[-1] = _drop_leading_words(out[-1], clause.leading)
        depth = 0
        for m in self._patterns.clause.finditer(text, end):
            if m.group("skip") is not None:
                continue
            if m.group("open"):
                depth += 1
            elif m.group("close"):
                if depth == 0:
                    return "", m.start()
                depth -= 1
            elif depth:
                continue
            elif m.group("semi") or (m.group("comma") and clause.ends_at_comma):
                return "", m.start()
            elif m.group("macro") and "@" + m.group("macro").upper() in clause.next_clauses:
                return "", m.start()
            elif m.group("word") and m.group("word").upper() in clause.next_clauses:
                return "", m.start()
        return "", len(text)

    @staticmethod
    def _drop_comma(out: list[str], text: str, end: int) -> int:
        """A vanished list element takes one adjacent comma with it."""
        if out:
            before = out[-1]
            stripped = before.rstrip()
            if stripped.endswith(","):
                out[-1] = stripped[:-1] + before[len(stripped):]
                return end
        m = re.match(r"\s*,", text[end:])
        if m:
            out.append(m.group()[:-1])
            return end + m.end()
        return end

    def read_call(self, text: str, name: str, open_index: int, line: int) -> tuple[Call, int]:
        """Split `@name(...)` at `open_index` into arguments; returns the call and the index after `)`."""
        pattern = self._patterns.struct
        depth = 0
        pieces: list[tuple[int, int]] = []
        piece_start = open_index + 1
        pos = open_index
        while True:
            m = pattern.search(text, pos)
            if m is None:
                raise MacroError(f"Malformed macro call @{name}(...): missing closing parenthesis", self.path, line)
            pos = m.end()
            if m.group("open"):
                depth += 1
            elif m.group("close"):
                depth -= 1
                if depth == 0:
                    pieces.append((piece_start, m.start()))
                    break
            elif m.group("comma") and depth == 1:
                pieces.append((piece_start, m.start()))
                piece_start = m.end()
        args: list[Arg] = []
        kwargs: dict[str, Arg] = {}
        if len(pieces) == 1 and not text[pieces[0][0]:pieces[0][1]].strip():
            pieces = []
        for a, b in pieces:
            piece = text[a:b]
            arg_line = line + text.count("\n", open_index, a + len(piece) - len(piece.lstrip()))  # where it starts
            if not piece.strip():
                raise MacroError(f"Malformed macro call @{name}(...): empty argument", self.path, arg_line)
            kw = _KWARG.match(piece)
            if kw:
                kwargs[kw.group(1).lower()] = Arg(piece[kw.end():], arg_line)
            elif kwargs:
                raise MacroError(f"Malformed macro call @{name}(...): positional argument after keyword argument",
                                 self.path, arg_line)
            else:
                args.append(Arg(piece, arg_line))
        return Call(name, args, kwargs, line), pos

    def call(self, call: Call) -> Any:
        key = call.name.lower()
        local = self.locals.get(key)
        if isinstance(local, Lambda):
            with def_application(self._def_calls, key, local, self.path):  # a recursive @DEF: one error
                return self.apply(local, [self.evaluate(a) for a in call.args], call.line)
        fn = self.registry.get(key)
        if fn is not None:
            return self._call_python(fn, call)
        from mesh_dagster.core.macro_builtins import find_builtin

        builtin = find_builtin(key)
        if builtin is None:
            raise MacroError(f"Unknown macro @{call.name}: it is not a built-in macro, a @DEF function or a @macro in "
                             "macros/*.py", self.path, call.line)
        return builtin(self, call)

    def variable(self, name: str, line: int) -> Any:
        key = name.lower()
        if key in self.locals:
            value = self.locals[key]
        elif key in self.variables:
            value = self.variables[key]
        else:
            raise MacroError(f"Macro variable '@{name}' is undefined", self.path, line)
        return exp.null() if value is None else value

    def evaluate(self, arg: Arg) -> Any:
        """An argument's value: a whole macro keeps its structure (a list stays a list), a lambda
        stays unapplied, anything else becomes its expanded SQL text."""
        text = arg.text.strip()
        if text.startswith("@"):
            m = self._patterns.macro.match(text)
            if m is not None and m.group("skip") is None:
                if m.group("call"):
                    call, end = self.read_call(text, m.group("name"), m.end() - 1, arg.line)
                    if not text[end:].strip():
                        return self.call(call)
                elif m.group("name") and m.end() == len(text):
                    return self.variable(m.group("name"), arg.line)
        lam = _LAMBDA.match(text)
        if lam:
            params = lam.group(1) or lam.group(2)
            return Lambda(tuple(p.strip().lower() for p in params.split(",")), text[lam.end():], arg.line)
        return SQL(self.expand(arg.text, arg.line).strip())

    def apply(self, fn: Any, values: list[Any], line: int) -> Any:
        if not isinstance(fn, Lambda):
            raise MacroError("Expected a lambda such as `x -> x + 1`", self.path, line)
        if len(values) != len(fn.params):
            raise MacroError(f"Lambda ({', '.join(fn.params)}) takes {len(fn.params)} argument(s), got {len(values)}",
                             self.path, line)
        body = self._bind(fn.body, dict(zip(fn.params, values)))
        return self.evaluate(Arg(body, fn.line))

    def _bind(self, text: str, bound: dict[str, Any]) -> str:
        """Replace lambda parameters in a body: `@x`, `@{x}` and bare column references `x`."""
        out: list[str] = []
        pos = 0
        for m in self._patterns.bind.finditer(text):
            if m.group("skip") is not None:
                continue
            if m.group("tmpl") is not None:
                out.append(text[pos:m.start()])
                out.append(self._bind_template(m.group("tmpl"), bound))
                pos = m.end()
                continue
            word = m.group("word")
            name = m.group("brace") or m.group("name") or word
            key = name.lower()
            if key not in bound:
                continue
            value = bound[key]
            after = text[m.end():].lstrip()[:1]
            if word is not None:
                if after in (".", "(") or _AS_BEFORE.search(text, max(0, m.start() - 12), m.start()):
                    continue
                rendered = self.atomic_sql(value)
            elif m.group("name") is not None and text[m.end():m.end() + 1] == "(":
                continue
            else:
                embed = bool(m.group("brace")) or (m.start() > 0 and (text[m.start() - 1].isalnum()
                                                                     or text[m.start() - 1] == "_"))
                rendered = self.to_sql(value, embed=True) if embed else self.atomic_sql(value)
            out.append(text[pos:m.start()])
            out.append(rendered)
            pos = m.end()
        out.append(text[pos:])
        return "".join(out)

    def _bind_template(self, template: str, bound: dict[str, Any]) -> str:
        """Lambda parameters inside `@'...'`; other variables stay for the template's expansion."""

        def sub(m: re.Match) -> str:
            key = (m.group("brace") or m.group("name")).lower()
            return self.to_sql(bound[key], embed=True).replace("'", "''") if key in bound else m.group()

        return self._patterns.template.sub(sub, template)

    def atomic_sql(self, value: Any) -> str:
        sql = self.to_sql(value)
        return sql if _is_atomic(sql, self._patterns) else f"({sql})"

    def _template(self, literal: str, line: int) -> str:
        """`@'...@{x}...'`: variables substituted inside a string literal."""
        body = literal[1:-1].replace("''", "'")

        def sub(m: re.Match) -> str:
            return self.to_sql(self.variable(m.group("brace") or m.group("name"), line), embed=True)

        return exp.Literal.string(self._patterns.template.sub(sub, body)).sql(dialect=self._sqlglot_dialect)

    # -- conversions --------------------------------------------------------------------------

    def to_sql(self, value: Any, embed: bool = False) -> str:
        """SQL text of a value; `embed` is for values written inside identifiers (`col_@{x}`)."""
        if value is None:
            return ""
        if isinstance(value, SQL):
            if embed:
                m = _STRING_LITERAL.fullmatch(value)
                return m.group(1).replace("''", "'") if m else str(value)
            return str(value)
        if isinstance(value, exp.Expression):
            if embed:
                if isinstance(value, exp.Literal):
                    return str(value.this)
                if isinstance(value, exp.Identifier) or (isinstance(value, exp.Column) and not value.table):
                    return value.name
            # Only queries are rewritten by the generator's transforms; small values can skip the copy.
            return value.sql(dialect=self._sqlglot_dialect, copy=isinstance(value, exp.Query))
        if isinstance(value, (list, tuple)):
            return ", ".join(s for s in (self.to_sql(v, embed) for v in value) if s)
        if isinstance(value, Lambda):
            raise MacroError("A lambda cannot be used as a value", self.path, value.line)
        if isinstance(value, Clause):
            raise self._misplaced(value)
        if embed and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        try:
            return _python_sql(value, type(value), self.dialect)  # type: ignore[arg-type]  # typeshed: a type is Hashable
        except TypeError:  # unhashable (dict, ...)
            return exp.convert(value).sql(dialect=self._sqlglot_dialect)

    def _misplaced(self, clause: Clause) -> MacroError:
        name = clause.keyword.replace(" ", "_")
        return MacroError(f"@{name}(...) is a clause operator: write it where its clause starts, e.g. "
                          f"`@{name}(condition) ...`", self.path, self.line)

    def to_exp(self, value: Any, line: int | None = None) -> exp.Expr:
        if isinstance(value, exp.Expression):
            return value
        if isinstance(value, SQL):
            return self.parse_expression(value, self.line if line is None else line)
        if isinstance(value, (list, tuple)):
            return exp.Array(expressions=[self.to_exp(v, line) for v in value])
        if isinstance(value, Lambda):
            return exp.Lambda(this=self.parse_expression(value.body, value.line),
                              expressions=[exp.to_identifier(p) for p in value.params])
        if isinstance(value, Clause):
            raise self._misplaced(value)
        if value is None:
            return exp.null()
        return exp.convert(value)

    def items(self, value: Any, line: int) -> list[Any]:
        """The elements of a list-like value: a Python list, `[a, b]`, `(a, b)` or a single value."""
        if value is None:
            return []
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, SQL):
            value = self.parse_expression(value, line)
        if isinstance(value, (exp.Array, exp.Tuple)):
            return list(value.expressions)
        if isinstance(value, exp.Paren):
            return [value.this]
        return [value]

    def parse_expression(self, sql: str, line: int) -> exp.Expr:
        """Parsed argument text; cached and shared, so callers must copy before changing it."""
        try:
            parsed = _parse_argument(sql, self.dialect)
        except (ParseError, TokenError) as e:
            message = f"Cannot parse macro argument `{sql.strip()}`: {describe(e)}"
            raise MacroError(message, self.path, line) from None
        if parsed is None:
            raise MacroError("Empty macro argument", self.path, line)
        return parsed

    # -- Python macros ------------------------------------------------------------------------

    def _call_python(self, fn: Callable, call: Call) -> Any:
        positional, keywords = _bind(_parameters(fn), call, self.path)
        args = [self._typed_arg(call, param, arg) for param, arg in positional]
        kwargs = {key: self._typed_arg(call, param, arg) for key, (param, arg) in keywords.items()}
        try:
            result = fn(self, *args, **kwargs)
        except MacroError:
            raise
        except Exception as e:  # user code
            raise MacroError(f"Macro @{call.name} failed: {type(e).__name__}: {e}", self.path, call.line) from e
        return _from_python(result)

    def _typed_arg(self, call: Call, param: _Parameter, arg: Arg) -> Any:
        """The argument parsed and converted to the parameter's annotation."""
        value = self._python_arg(arg)
        try:
            return coerce(value, param.annotation, self.dialect)
        except UnsupportedAnnotation as e:
            raise MacroError(f"Macro @{call.name}: parameter '{param.name}' {e}", self.path, arg.line) from None
        except CoercionError as e:
            raise MacroError(f"Macro @{call.name}: argument '{param.name}' {e}", self.path, arg.line) from None

    def _python_arg(self, arg: Arg) -> exp.Expr:
        return self.to_exp(self.evaluate(arg), arg.line).copy()  # the user's macro may change it


@lru_cache(maxsize=8192)
def _python_sql(value: Any, kind: type, dialect: str) -> str:
    """SQL of a Python value; cached because the temporal locals are rendered over and over."""
    if kind is bool:
        return "TRUE" if value else "FALSE"
    if kind is str:
        return exp.Literal.string(value).sql(dialect=get_dialect(dialect))
    return exp.convert(value).sql(dialect=get_dialect(dialect))


@lru_cache(maxsize=4096)
def _parse_argument(sql: str, dialect: str) -> exp.Expr | None:
    return sqlglot.parse_one(sql, read=get_dialect(dialect))


def _from_python(result: Any) -> Any:
    if result is None or isinstance(result, (exp.Expression, Lambda, SQL)):
        return result
    if isinstance(result, str):
        return SQL(result)
    if isinstance(result, (list, tuple)):
        return [_from_python(r) for r in result]
    return exp.convert(result)


def _drop_leading_words(text: str, words: frozenset[str]) -> str:
    """`text` without the trailing run of `words` (`... LEFT OUTER ` → `... `), keeping its line breaks."""
    cut = len(text)
    for m in reversed(list(re.finditer(r"[A-Za-z_]\w*|\S", text))):
        if m.group().upper() not in words or text[m.end():cut].strip():
            break
        cut = m.start()
    return text[:cut] + "\n" * text.count("\n", cut) if cut < len(text) else text


def _is_atomic(sql: str, patterns: _Patterns) -> bool:
    """Whether `sql` can stand next to an operator without parentheses."""
    if _SIMPLE.fullmatch(sql):
        return True
    m = re.match(r"\w*\s*[(\[]", sql)
    if not m:
        return False
    depth = 0
    for t in patterns.struct.finditer(sql, m.end() - 1):
        if t.group("open"):
            depth += 1
        elif t.group("close"):
            depth -= 1
            if depth == 0:
                return t.end() == len(sql)
    return False


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


def _lookup(mapping: Mapping[str, Any], key: str) -> Any:
    """Look a table name up, treating `x` and `default.x` as the same table."""
    found = mapping.get(key)
    if found is not None or not mapping:
        return found
    if "." not in key:
        return mapping.get(f"default.{key}")
    if key.startswith("default.") and key.count(".") == 1:
        return mapping.get(key[8:])
    return None


# ---------------------------------------------------------------------------------------------
# Binding a call to a Python macro's parameters


@dataclass(frozen=True)
class _Parameter:
    name: str
    annotation: Any
    required: bool


@dataclass(frozen=True)
class _Signature:
    """A user macro's parameters after the evaluator, with their resolved annotations."""

    positional: list[_Parameter]
    var_positional: _Parameter | None
    by_name: dict[str, _Parameter]  # lower-case name -> keyword-passable parameter
    var_keyword: _Parameter | None
    takes_evaluator: bool


@cache
def _parameters(fn: Callable) -> _Signature:
    signature = inspect.signature(fn)
    hints = resolved_annotations(fn)
    params = list(signature.parameters.values())
    first = params[0].kind if params else None
    takes_evaluator = first in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                inspect.Parameter.VAR_POSITIONAL)
    if first in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        params = params[1:]  # the evaluator (a leading *args takes it along with the arguments)
    positional: list[_Parameter] = []
    by_name: dict[str, _Parameter] = {}
    var_positional = var_keyword = None
    for p in params:
        entry = _Parameter(p.name, hints.get(p.name, Any), p.default is p.empty)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(entry)
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            by_name[p.name.lower()] = entry
        if p.kind == p.VAR_POSITIONAL:
            var_positional = _Parameter(p.name, entry.annotation, False)
        if p.kind == p.VAR_KEYWORD:
            var_keyword = _Parameter(p.name, entry.annotation, False)
    return _Signature(positional, var_positional, by_name, var_keyword, takes_evaluator)


def _bind(signature: _Signature, call: Call, path: str | None) -> tuple[list[tuple[_Parameter, Arg]],
                                                                       dict[str, tuple[_Parameter, Arg]]]:
    """Which parameter each argument of the call goes to; a call that does not fit is an error."""
    name, line = f"Macro @{call.name}", call.line
    if not signature.takes_evaluator:
        raise MacroError(f"{name} cannot be called: its first parameter must receive the evaluator", path, line)
    positional: list[tuple[_Parameter, Arg]] = []
    for i, arg in enumerate(call.args):
        if i < len(signature.positional):
            positional.append((signature.positional[i], arg))
        elif signature.var_positional is not None:
            positional.append((signature.var_positional, arg))
        else:
            raise MacroError(f"{name} takes at most {len(signature.positional)} argument(s), got {len(call.args)}",
                             path, arg.line)
    taken = {p.name for p, _ in positional}
    keywords: dict[str, tuple[_Parameter, Arg]] = {}
    for key, arg in call.kwargs.items():
        param = signature.by_name.get(key)
        if param is not None and param.name in taken:
            raise MacroError(f"{name} got argument '{param.name}' twice", path, arg.line)
        if param is None and signature.var_keyword is None:
            raise MacroError(f"{name} has no argument '{key}'", path, arg.line)
        keywords[param.name if param else key] = (param or signature.var_keyword, arg)  # type: ignore[assignment]
    missing = [p.name for p in signature.positional + list(signature.by_name.values())
               if p.required and p.name not in taken and p.name not in keywords]
    if missing:
        raise MacroError(f"{name} is missing argument '{missing[0]}'", path, line)
    return positional, keywords
