"""SQLMesh's Jinja: `JINJA_QUERY_BEGIN; ... JINJA_END;` and `JINJA_STATEMENT_BEGIN; ... JINJA_END;`
blocks in model files, and the `{% macro %}`s of `macros/*.sql` they call.

A block is kept as written, markers included: that text is what the fingerprint hashes and what
plans diff, and its markers are what tells the renderer to run it through Jinja before the `@`
macros (SQLMesh renders Jinja first, so `@start_ds` still works inside a block). The template
sees the values our `@` macros see (`start_ds`, `end_date`, `execution_ts`, ...: the temporal
locals of core/macros/syntax.py), `var('name', default)`, `this_model`, `resolve_table('x')`,
`runtime_stage` and `gateway`. Anything else is an error, not an empty string (StrictUndefined).

Jinja cannot be read by sqlglot's tokenizer (`{# it's #}`, `;` between statements of one block),
so blocks are cut out of a model file before it is tokenized (`extract_blocks`), each replaced by
a one-word placeholder statement spanning the same lines.

The macros of `macros/*.sql` are kept one by one (a macro's own source, file and line), and a
snapshot captures those its blocks call, transitively: editing a Jinja macro changes exactly the
models that use it, and a plan's evaluation calls the macro as it was planned.
"""

from __future__ import annotations

import re
import traceback
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.syntax import lookup, normalize_name, table, temporal_locals

if TYPE_CHECKING:
    import jinja2

QUERY_BEGIN = "JINJA_QUERY_BEGIN"
STATEMENT_BEGIN = "JINJA_STATEMENT_BEGIN"
END = "JINJA_END"
MARKERS = frozenset({QUERY_BEGIN, STATEMENT_BEGIN, END})
_QUERY_NAME = "<jinja block>"  # template names: where an error's traceback frame points
_MACROS_NAME = "<jinja macros>"

_SKIP = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|--[^\n]*|/\*.*?\*/"
_SCAN = re.compile(
    rf"(?P<skip>{_SKIP})|\b(?:(?P<begin>JINJA_(?:QUERY|STATEMENT)_BEGIN)|(?P<end>JINJA_END))\b(?P<semi>\s*;)?",
    re.I | re.S)
_END = re.compile(r"\b(?P<word>JINJA_END)\b[ \t]*;?", re.I)
_BEGIN_AT_START = re.compile(r"\s*JINJA_(?:QUERY|STATEMENT)_BEGIN\s*;", re.I)
_MACRO_TAGS = re.compile(r"\{%[-+]?\s*(?P<tag>macro|endmacro)\b.*?[-+]?%\}", re.S)
_UNDEFINED_HINT = ("not a variable SQLMesh's Jinja defines (start_ds, var(), this_model, ...), a {% set %} "
                   "of the block or a {% macro %} in macros/*.sql")


# ---------------------------------------------------------------------------------------------
# Blocks in a model file


@dataclass(frozen=True)
class JinjaBlock:
    """A Jinja block as written, from its BEGIN marker through its `JINJA_END` (`;` excluded)."""

    text: str
    line: int
    is_query: bool


def is_jinja(text: str) -> bool:
    """Whether a query or statement text is a Jinja block (kept with its markers)."""
    return _BEGIN_AT_START.match(text) is not None


def line_key(text: str) -> str:
    """The key of a Jinja statement's line in `Model.property_lines` (statements keep no line)."""
    return f"jinja:{zlib.crc32(text.encode())}"


def extract_blocks(text: str, path: str) -> tuple[str, list[JinjaBlock]]:
    """`text` with each Jinja block replaced by the placeholder statement `JINJA_QUERY_BEGIN <i>;`
    (or `JINJA_STATEMENT_BEGIN <i>;`) on as many lines as the block, and the blocks (their
    templates checked). A marker is followed by `;` or starts its line: inside strings and
    comments, or as a column's name, the words are SQL."""
    if "jinja_" not in text.lower():
        return text, []
    pieces: list[str] = []
    blocks: list[JinjaBlock] = []
    cursor = pos = 0
    while (m := _SCAN.search(text, pos)) is not None:
        pos = m.end()
        if m.group("skip"):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        if not m.group("semi") and text[line_start:m.start()].strip():
            continue
        line = text.count("\n", 0, m.start()) + 1
        if m.group("end"):
            raise ModelError(f"{END}; without a {QUERY_BEGIN}; or {STATEMENT_BEGIN}; before it", path, line)
        begin = m.group("begin").upper()
        if not m.group("semi"):
            raise ModelError(f"{begin} must be followed by ';'", path, line)
        end = _END.search(text, m.end())
        if end is None:
            raise ModelError(f"{begin}; is never closed by {END};", path, line)
        block = JinjaBlock(text[m.start():end.end("word")], line, begin == QUERY_BEGIN)
        _template_checked(block.text, path, line)
        pieces += [text[cursor:m.start()], f"{begin} {len(blocks)}", "\n" * text.count("\n", m.start(), end.end()), ";"]
        blocks.append(block)
        cursor = pos = end.end()
    pieces.append(text[cursor:])
    return "".join(pieces), blocks


def _template(text: str) -> tuple[str, int]:
    """The template inside a block's markers, and how many lines its first line is below the block's."""
    m = _BEGIN_AT_START.match(text)
    assert m is not None  # only blocks get here
    body = text[m.end():]
    end = body.upper().rfind(END)
    return (body[:end] if end >= 0 else body), text.count("\n", 0, m.end())


def _jinja2() -> Any:
    """The `jinja2` module, imported when first needed: importing it cost every command 20 ms, and
    only projects with Jinja blocks or Jinja macros need it."""
    import jinja2.meta  # the package, with the submodule this file uses

    return jinja2


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    """The one Jinja environment."""
    jinja = _jinja2()
    return jinja.Environment(undefined=jinja.StrictUndefined, keep_trailing_newline=True,
                             extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


def _template_checked(text: str, path: str | None, line: int) -> jinja2.Template:
    template, offset = _template(text)
    try:
        return _compiled(template, _QUERY_NAME)
    except _jinja2().TemplateSyntaxError as e:
        raise ModelError(f"Jinja syntax error: {e.message}", path, line + offset + (e.lineno or 1) - 1) from None


@lru_cache(maxsize=2048)
def _compiled(source: str, name: str) -> jinja2.Template:
    """A template compiled under `name` (the file name its frames carry in a traceback)."""
    env = _env()
    code = env.compile(source, name=name, filename=name)
    return env.template_class.from_code(env, code, env.make_globals(None), None)


@lru_cache(maxsize=2048)
def _names_read(source: str) -> frozenset[str]:
    """Names a template (or a macro's source) reads from its context: variables and macros."""
    return frozenset(_jinja2().meta.find_undeclared_variables(_env().parse(source)))


# ---------------------------------------------------------------------------------------------
# The macros of macros/*.sql


class JinjaMacro(BaseModel):
    """One `{% macro name(...) %} ... {% endmacro %}` of `macros/*.sql`, as written."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    path: str | None = None
    line: int = 1
    reads: list[str] = Field(default_factory=list)  # names its body reads (other macros among them)

    def hash_values(self) -> list[str]:
        return [f"jinja macro {self.name}", self.source]


class JinjaMacros:
    """A project's (or a snapshot's) Jinja macros by name."""

    def __init__(self, macros: Mapping[str, JinjaMacro] | None = None):
        self.macros: dict[str, JinjaMacro] = dict(sorted((macros or {}).items()))
        self._module: tuple[str, list[tuple[int, JinjaMacro]]] | None = None

    def __len__(self) -> int:
        return len(self.macros)

    def hash_values(self) -> list[str]:
        return [v for macro in self.macros.values() for v in macro.hash_values()]

    def used_by(self, texts: Iterable[str]) -> dict[str, JinjaMacro]:
        """The macros the Jinja blocks among `texts` call, and those these call (by name)."""
        if not self.macros:
            return {}
        pending = [n for text in texts if is_jinja(text) for n in _names_read(_template(text)[0]) if n in self.macros]
        found: dict[str, JinjaMacro] = {}
        while pending:
            name = pending.pop()
            if name not in found:
                found[name] = self.macros[name]
                pending += [n for n in found[name].reads if n in self.macros and n not in found]
        return dict(sorted(found.items()))

    def module(self) -> tuple[str, list[tuple[int, JinjaMacro]]]:
        """All macros as one template's source (so they call each other), and the line each starts at."""
        if self._module is None:
            parts, starts, line = [], [], 1
            for macro in self.macros.values():
                starts.append((line, macro))
                parts.append(macro.source)
                line += macro.source.count("\n") + 1
            self._module = ("\n".join(parts), starts)
        return self._module


def load_jinja_macros(macros_dir: Path) -> JinjaMacros:
    """The `{% macro %}`s of `macros/**/*.sql` (a name defined twice is refused at its second
    definition). Top-level text and `{% set %}`s outside macros are not part of any macro."""
    found: dict[str, JinjaMacro] = {}
    if not macros_dir.is_dir():
        return JinjaMacros()
    for file in sorted(macros_dir.rglob("*.sql")):
        shown = f"{macros_dir.name}/{file.relative_to(macros_dir).as_posix()}"
        for macro in _file_macros(file.read_text(encoding="utf-8"), shown):
            if macro.name in found:
                other = found[macro.name]
                raise ModelError(f"Jinja macro '{macro.name}' is defined twice (also in {other.path}:{other.line})",
                                 shown, macro.line)
            found[macro.name] = macro
    return JinjaMacros(found)


def _file_macros(text: str, path: str) -> list[JinjaMacro]:
    jinja = _jinja2()
    try:
        tree = _env().parse(text)
    except jinja.TemplateSyntaxError as e:
        raise ModelError(f"Jinja syntax error: {e.message}", path, e.lineno) from None
    macros = []
    for node in tree.body:
        if isinstance(node, jinja.nodes.Macro):
            source = _macro_source(text, node.lineno, node.name, path)
            reads = sorted(_names_read(source) - {node.name})
            macros.append(JinjaMacro(name=node.name, source=source, path=path, line=node.lineno, reads=reads))
    return macros


def _macro_source(text: str, line: int, name: str, path: str) -> str:
    """The text of the macro `name` defined at `line`: its tag through its matching `endmacro`."""
    offset = sum(len(x) for x in text.splitlines(keepends=True)[:line - 1])
    depth, start = 0, None
    for m in _MACRO_TAGS.finditer(text, offset):
        if m.group("tag") == "macro":
            start = m.start() if start is None else start
            depth += 1
        elif start is not None:
            depth -= 1
            if depth == 0:
                return text[start:m.end()]
    raise ModelError(f"Jinja macro '{name}' has no {{% endmacro %}}", path, line)


# ---------------------------------------------------------------------------------------------
# Rendering


@dataclass(frozen=True)
class JinjaValues:
    """What a render gives the template besides the macros (see the module docstring)."""

    start: datetime | None = None
    end: datetime | None = None  # EXCLUSIVE
    execution_time: datetime | None = None
    variables: Mapping[str, Any] | None = None
    this_model: str | None = None
    table_mapping: Mapping[str, str] | None = None
    runtime_stage: str = "loading"
    gateway: str | None = None
    dialect: str = "spark"

    def context(self) -> dict[str, Any]:
        variables = {k.lower(): v for k, v in (self.variables or {}).items()}
        mapping = self.table_mapping or {}

        def var(name: str, default: Any = None) -> Any:
            return variables.get(str(name).lower(), default)

        def resolve_table(name: str) -> str:
            key = normalize_name(name)
            return lookup(mapping, key) or key

        return {
            **temporal_locals(self.start, self.end, self.execution_time),
            "var": var,
            "resolve_table": resolve_table,
            "this_model": table(self.this_model).sql(dialect=self.dialect) if self.this_model else None,
            "runtime_stage": self.runtime_stage,
            "gateway": self.gateway,
        }


def render(text: str, macros: JinjaMacros, values: JinjaValues, path: str | None, line: int) -> str:
    """A block's template rendered (markers gone, trailing `;` dropped); `line` is the block's.
    Errors name the file and line: the block's, or the macro's in macros/*.sql."""
    template = _template_checked(text, path, line)
    used = JinjaMacros(macros.used_by([text]))
    context = values.context()
    try:
        if used:
            source, _ = used.module()
            module = _compiled(source, _MACROS_NAME).make_module(vars=context)
            context.update({name: getattr(module, name) for name in used.macros})
        rendered = template.render(context)
    except Exception as e:  # noqa: BLE001 - user templates raise anything: each becomes a located ModelError
        jinja = _jinja2()
        where = _where(e, used, path, line + _template(text)[1])
        message = e.message if isinstance(e, jinja.TemplateError) and e.message else f"{type(e).__name__}: {e}"
        hint = f" ({_UNDEFINED_HINT})" if isinstance(e, jinja.UndefinedError) else ""
        raise ModelError(f"Jinja error: {message}{hint}", *where) from None
    return rendered.strip().rstrip(";").strip()


def _where(error: BaseException, used: JinjaMacros, path: str | None, first_line: int) -> tuple[str | None, int]:
    """The file and line of the innermost template frame of `error` (Jinja gives templates frames)."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename == _QUERY_NAME and frame.lineno:
            return path, first_line + frame.lineno - 1
        if frame.filename == _MACROS_NAME and frame.lineno:
            for start, macro in reversed(used.module()[1]):
                if start <= frame.lineno:
                    return macro.path, macro.line + frame.lineno - start
    return path, first_line
