"""Parsing of SQL definition files: the `MODEL (...)` / `AUDIT (...)` blocks and the statements.

sqlglot cannot parse SQLMesh's `MODEL` block, so the file is split on sqlglot's tokens (strings
and comments are handled for us, and every token knows its line) and the block's properties are
read by a small recursive-descent reader. The statements are kept as text: the data hash is
taken over the text as written, and rendering happens later with real dates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from sqlglot import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from mesh_dagster.core.errors import ModelError

_OPEN = {TokenType.L_PAREN: TokenType.R_PAREN, TokenType.L_BRACKET: TokenType.R_BRACKET}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET}


@cache
def _tokenizer(dialect: str):
    return Dialect.get_or_raise(dialect).tokenizer_class()


def tokenize(text: str, path: str, dialect: str = "spark", line_offset: int = 0) -> list[Token]:
    try:
        return _tokenizer(dialect).tokenize(text)
    except TokenError as e:
        raise ModelError(f"Cannot read SQL: {str(e).splitlines()[0]}", path, line_offset + 1) from None


@dataclass
class Value:
    """A property value: a scalar (`text`), a group `( ... )`/`[ ... ]` (`items`), or a call `NAME(...)`."""

    text: str
    line: int
    kind: str  # "scalar" | "string" | "number" | "group" | "call"
    head: str | None = None  # name of a call
    items: list[Entry] = field(default_factory=list)
    quoted: str | None = None  # a string as written, quotes and escapes included

    @property
    def source(self) -> str:
        """The value as written: what to hand on to a SQL parser."""
        return self.quoted if self.quoted is not None else self.text

    @property
    def is_group(self) -> bool:
        return self.kind in ("group", "call")

    def scalar(self) -> str:
        return self.text

    def as_list(self) -> list[str]:
        """`a` or `(a, b)` or `[a, b]` → ['a', 'b']."""
        if self.kind == "group":
            return [e.raw for e in self.items]
        return [self.text]


@dataclass
class Entry:
    """One comma-separated item of a block: `key value`, `key = value`, or a bare value."""

    raw: str  # the item's source text (strings unquoted when the item is a single string)
    line: int
    tokens: list[Token]
    key: str | None = None
    value: Value | None = None
    reader: _Reader | None = field(default=None, repr=False)
    span: tuple[int, int] = (0, 0)

    def as_property(self) -> Entry:
        """Re-read a bare item as `key value` (kind properties inside `KIND (...)`)."""
        if self.key is not None or self.reader is None:
            return self
        return self.reader.entries(*self.span, keyed=True)[0]


@dataclass
class Statement:
    text: str
    line: int
    tokens: list[Token]

    @property
    def first_word(self) -> str:
        return self.tokens[0].text.upper() if self.tokens else ""


@dataclass
class DefinitionFile:
    """A file split into its leading block (`MODEL`/`AUDIT`) properties and following statements."""

    path: str
    block_kind: str | None  # "MODEL" | "AUDIT" | None
    block_line: int
    properties: list[Entry]
    statements: list[Statement]


class _Reader:
    def __init__(self, text: str, tokens: list[Token], path: str):
        self.text = text
        self.tokens = tokens
        self.path = path

    def error(self, message: str, token: Token | None) -> ModelError:
        return ModelError(message, self.path, token.line if token else None)

    def matching(self, i: int) -> int:
        """Index of the bracket closing the one at `i`."""
        stack = [_OPEN[self.tokens[i].token_type]]
        j = i + 1
        while j < len(self.tokens):
            tt = self.tokens[j].token_type
            if tt in _OPEN:
                stack.append(_OPEN[tt])
            elif tt in _CLOSE:
                if tt != stack[-1]:
                    raise self.error(f"Unbalanced '{self.tokens[j].text}'", self.tokens[j])
                stack.pop()
                if not stack:
                    return j
            j += 1
        raise self.error(f"'{self.tokens[i].text}' is never closed", self.tokens[i])

    def span_text(self, start: int, end: int) -> str:
        """Source text of tokens[start:end] (end exclusive)."""
        if start >= end:
            return ""
        return self.text[self.tokens[start].start : self.tokens[end - 1].end + 1]

    def split(self, start: int, end: int, sep: TokenType) -> list[tuple[int, int]]:
        """Split tokens[start:end] at depth-0 separators; empty pieces are dropped."""
        parts, depth, begin = [], 0, start
        for j in range(start, end):
            tt = self.tokens[j].token_type
            if tt in _OPEN:
                depth += 1
            elif tt in _CLOSE:
                depth -= 1
            elif tt == sep and depth == 0:
                if j > begin:
                    parts.append((begin, j))
                begin = j + 1
        if end > begin:
            parts.append((begin, end))
        return parts

    def value(self, start: int, end: int) -> Value:
        toks = self.tokens
        first = toks[start]
        if first.token_type in _OPEN and self.matching(start) == end - 1:
            return Value(self.span_text(start, end), first.line, "group", items=self.entries(start + 1, end - 1))
        if end - start >= 3 and toks[start + 1].token_type == TokenType.L_PAREN and self.matching(start + 1) == end - 1:
            return Value(self.span_text(start, end), first.line, "call", head=first.text,
                         items=self.entries(start + 2, end - 1))
        if end - start == 1 and first.token_type == TokenType.STRING:
            return Value(first.text, first.line, "string", quoted=self.span_text(start, end))
        if end - start == 1 and first.token_type == TokenType.NUMBER:
            return Value(first.text, first.line, "number")
        return Value(self.span_text(start, end), first.line, "scalar")

    def entries(self, start: int, end: int, keyed: bool = False) -> list[Entry]:
        """Items of a block. `keyed` items are `key value` (MODEL properties, kind properties);
        other items are bare values, or `key = value` / `key := value` pairs."""
        out = []
        for s, e in self.split(start, end, TokenType.COMMA):
            toks = self.tokens[s:e]
            raw = toks[0].text if len(toks) == 1 and toks[0].token_type == TokenType.STRING else self.span_text(s, e)
            entry = Entry(raw=raw, line=toks[0].line, tokens=toks, reader=self, span=(s, e))
            if len(toks) >= 3 and toks[1].token_type in (TokenType.EQ, TokenType.COLON_EQ):
                entry.key, entry.value = toks[0].text, self.value(s + 2, e)
            elif keyed:
                if len(toks) < 2:
                    raise ModelError(f"Property '{toks[0].text}' has no value", self.path, toks[0].line)
                entry.key, entry.value = toks[0].text, self.value(s + 1, e)
            else:
                entry.value = self.value(s, e)
            out.append(entry)
        return out

    def statements(self, start: int) -> list[Statement]:
        out = []
        for s, e in self.split(start, len(self.tokens), TokenType.SEMICOLON):
            out.append(Statement(self.span_text(s, e), self.tokens[s].line, self.tokens[s:e]))
        return out


def read_definition(text: str, path: str, block_names: tuple[str, ...] = ("MODEL", "AUDIT")) -> DefinitionFile:
    """Split a file into its leading block's entries and the statements that follow."""
    tokens = tokenize(text, path)
    reader = _Reader(text, tokens, path)
    if (
        len(tokens) >= 2
        and tokens[0].text.upper() in block_names
        and tokens[1].token_type == TokenType.L_PAREN
    ):
        close = reader.matching(1)
        after = close + 1
        if after < len(tokens) and tokens[after].token_type != TokenType.SEMICOLON:
            raise reader.error(f"The {tokens[0].text.upper()} block must be followed by ';'", tokens[after])
        properties = reader.entries(2, close, keyed=True)
        return DefinitionFile(path, tokens[0].text.upper(), tokens[0].line, properties, reader.statements(after))
    return DefinitionFile(path, None, 1, [], reader.statements(0))


def at_line(value: Value, line: int) -> Value:
    """A value read from a string of its own (`read_value`), moved to the line the string is written at."""
    value.line = line
    for item in value.items:
        item.line = line
        if item.value is not None:
            at_line(item.value, line)
    return value


def read_value(text: str, path: str) -> Value:
    """One property value written on its own (a `model_defaults.audits` entry in config.yaml)."""
    tokens = tokenize(text, path)
    if not tokens:
        raise ModelError("Empty value", path)
    return _Reader(text, tokens, path).value(0, len(tokens))


def read_blocks(text: str, path: str, block_name: str = "AUDIT") -> list[tuple[DefinitionFile, Statement | None]]:
    """Files holding several `AUDIT (...); SELECT ...;` pairs (audits/*.sql)."""
    tokens = tokenize(text, path)
    reader = _Reader(text, tokens, path)
    out: list[tuple[DefinitionFile, Statement | None]] = []
    stmts = reader.statements(0)
    i = 0
    while i < len(stmts):
        st = stmts[i]
        if st.first_word == block_name and len(st.tokens) > 1 and st.tokens[1].token_type == TokenType.L_PAREN:
            sub = _Reader(text, st.tokens, path)
            close = sub.matching(1)
            if close != len(st.tokens) - 1:
                raise ModelError(f"The {block_name} block must be followed by ';'", path, st.tokens[close + 1].line
                                 if close + 1 < len(st.tokens) else st.line)
            props = sub.entries(2, close, keyed=True)
            query = stmts[i + 1] if i + 1 < len(stmts) else None
            out.append((DefinitionFile(path, block_name, st.line, props, []), query))
            i += 2
        else:
            raise ModelError(f"Expected an {block_name} (...) block, got '{st.text[:40]}'", path, st.line)
    return out


def relative_path(path: Path, root: Path) -> str:
    """`path` as shown to users: relative to the project `root`; a file of another repository of a
    multi-repo project (core/project/repos.py) leads out of it (`../repo_2/models/c.sql`)."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        if not path.is_absolute() or not root.is_absolute():
            return str(path)
        return os.path.relpath(path, root)
