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

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import MacroError

# The built-in macros register themselves in `registry.BUILTINS` as their modules load.
from mesh_dagster.core.macros import builtins as _control_flow  # noqa: F401
from mesh_dagster.core.macros import clauses as _clauses  # noqa: F401
from mesh_dagster.core.macros import library as _library  # noqa: F401
from mesh_dagster.core.macros import queries as _queries  # noqa: F401
from mesh_dagster.core.macros.calls import Parameter, bind, parameters
from mesh_dagster.core.macros.coercion import SQL, CoercionError, UnsupportedAnnotation, coerce
from mesh_dagster.core.macros.depth import def_application
from mesh_dagster.core.macros.registry import find_builtin
from mesh_dagster.core.macros.syntax import (
    AS_BEFORE,
    BACKSLASH_DIALECTS,
    KWARG,
    LAMBDA,
    SIMPLE,
    STRING_LITERAL,
    Arg,
    Call,
    Clause,
    Lambda,
    Patterns,
    columns_pending,
    lookup,
    normalize_name,
    patterns,
    table,
)
from mesh_dagster.core.macros.user import MacroRegistry

# SQLMesh's answer of `columns_to_types` while the project loads and the columns are not known yet.
UNAVAILABLE_AT_LOAD: dict[str, str | None] = {"__schema_unavailable_at_load__": "unknown"}

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
        blueprint_variables: Mapping[str, Any] | None = None,
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
        # A blueprint's values (core/project/blueprints.py): they shadow config variables of their name.
        self.blueprint_variables = {k.lower(): v for k, v in (blueprint_variables or {}).items()}
        self.runtime_stage = runtime_stage
        self.gateway = gateway
        self.path = path
        self.line = line
        self._this_model = this_model
        self._schemas = schemas or {}
        self._table_mapping = table_mapping or {}
        self._patterns = patterns(self.dialect.lower() in BACKSLASH_DIALECTS)
        self._sqlglot_dialect = get_dialect(self.dialect)
        self.locals: dict[str, Any] = {k.lower(): v for k, v in (locals or {}).items()}
        self._def_calls: list[str] = []  # the @DEF functions being applied (core/macros/depth.py)
        self.locals["runtime_stage"] = runtime_stage
        self.locals["gateway"] = gateway
        self.locals["model_kind_name"] = model_kind_name
        self.locals["this_model"] = table(this_model) if this_model else None  # shared: never mutated

    # -- API for user macros ------------------------------------------------------------------

    @property
    def this_model(self) -> str | None:
        """The table the model writes to (physical at evaluation, the model name at loading)."""
        return self._this_model

    def var(self, name: str, default: Any = None) -> Any:
        """A config variable (names are case-insensitive)."""
        return self.variables.get(name.lower(), default)

    def columns_to_types(self, model_name: str | exp.Expr) -> dict[str, str | None] | None:
        """Known columns (→ Spark type text or None) of an upstream model, or None; while the loader
        finds dependencies (no columns are known yet), SQLMesh's stand-in `UNAVAILABLE_AT_LOAD`
        (user code indexes what it gets). Our own macros ask `known_columns`."""
        found = self.known_columns(model_name)
        if found is None and columns_pending():
            return dict(UNAVAILABLE_AT_LOAD)
        return found

    def known_columns(self, model_name: str | exp.Expr) -> dict[str, str | None] | None:
        """Known columns (→ Spark type text or None) of an upstream model, or None."""
        found = lookup(self._schemas, normalize_name(model_name))
        return dict(found) if found is not None else None

    def resolve_table(self, model_name: str | exp.Expr) -> str:
        """What a reference to `model_name` reads at this stage (physical table, view or itself)."""
        key = normalize_name(model_name)
        return lookup(self._table_mapping, key) or key

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
            kw = KWARG.match(piece)
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
        builtin = find_builtin(key)
        if builtin is None:
            raise MacroError(f"Unknown macro @{call.name}: it is not a built-in macro, a @DEF function or a @macro in "
                             "macros/*.py", self.path, call.line)
        return builtin(self, call)

    def variable(self, name: str, line: int) -> Any:
        key = name.lower()
        if key in self.locals:
            value = self.locals[key]
        elif key in self.blueprint_variables:
            value = self.blueprint_variables[key]
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
        lam = LAMBDA.match(text)
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
                if after in (".", "(") or AS_BEFORE.search(text, max(0, m.start() - 12), m.start()):
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
                m = STRING_LITERAL.fullmatch(value)
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
        positional, keywords = bind(parameters(fn), call, self.path)
        args = [self._typed_arg(call, param, arg) for param, arg in positional]
        kwargs = {key: self._typed_arg(call, param, arg) for key, (param, arg) in keywords.items()}
        try:
            result = fn(self, *args, **kwargs)
        except MacroError:
            raise
        except Exception as e:  # user code
            raise MacroError(f"Macro @{call.name} failed: {type(e).__name__}: {e}", self.path, call.line) from e
        return _from_python(result)

    def _typed_arg(self, call: Call, param: Parameter, arg: Arg) -> Any:
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


def _is_atomic(sql: str, patterns: Patterns) -> bool:
    """Whether `sql` can stand next to an operator without parentheses."""
    if SIMPLE.fullmatch(sql):
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


