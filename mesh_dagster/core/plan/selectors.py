"""Model selectors: the expressions that flags such as `--select-model` take.

    sqlmesh_example.full_model      one model (`full_model` alone when no other schema has one)
    sqlmesh_example.*_model, db*    wildcards over full names
    tag:finance, tag:fin*           the models carrying a tag
    +x, x+                          x and everything upstream of it / downstream of it
    a & b, a | b, ^a, ( ... )       and, or, not; `^` binds tightest, then `&`, then `|`

Several selectors (a repeated flag) are a union. Evaluation looks at names, tags and the graph
only (a `ModelIndex`), so the local project and an environment's snapshots are selected from
alike. A plain name that names no model is an error, as is a selector that matches nothing: a
typo must not quietly select less. A tag or a wildcard inside a larger selector may match
nothing (`^tag:deprecated` in a project where nothing is deprecated yet).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, Protocol

from mesh_dagster.core.errors import SelectorError
from mesh_dagster.core.project.dag import DAG

if TYPE_CHECKING:
    from mesh_dagster.core.models.model import Model
    from mesh_dagster.core.snapshots.snapshot import Snapshot

TAG_PREFIX = "tag:"
_OPERATORS = "()&|^+"
_SUGGESTIONS = 3
_CUTOFF = 0.6  # how alike a name must be to be suggested (difflib's default)
_LISTED = 10


class ModelIndex:
    """What selectors look at: every model's tags, and the graph between the models."""

    def __init__(self, tags: Mapping[str, Collection[str]], parents: Mapping[str, Iterable[str]]):
        self.tags: dict[str, frozenset[str]] = {n: frozenset(t.lower() for t in ts) for n, ts in tags.items()}
        self.dag = DAG({n: [p for p in parents.get(n, ()) if p in self.tags] for n in self.tags})
        self._by_table: dict[str, list[str]] = {}
        for name in sorted(self.tags):
            self._by_table.setdefault(name.rpartition(".")[2], []).append(name)

    @classmethod
    def of_models(cls, models: Mapping[str, Model], dag: DAG) -> ModelIndex:
        """The local project's models (`Project.models`, `Project.dag`)."""
        return cls({n: m.tags for n, m in models.items()}, dag.parents)

    @classmethod
    def of_snapshots(cls, snapshots: Mapping[str, Snapshot]) -> ModelIndex:
        """The snapshots of an environment (or of a plan), by model name."""
        return cls({n: s.model.tags for n, s in snapshots.items()},
                   {n: [p.name for p in s.parents] for n, s in snapshots.items()})

    def over(self, other: ModelIndex) -> ModelIndex:
        """This index with `other`'s models it lacks (a plan selects from the project and from
        what the environment has, so that a removed model can be selected too)."""
        extra = {n: other.tags[n] for n in other.tags if n not in self.tags}
        return ModelIndex({**self.tags, **extra},
                          {**{n: other.dag.parents[n] for n in extra}, **self.dag.parents})

    @property
    def names(self) -> set[str]:
        return set(self.tags)

    @property
    def tables(self) -> list[str]:
        """The table parts of the names (`full_model` of `sqlmesh_example.full_model`)."""
        return sorted(self._by_table)

    def with_table(self, table: str) -> list[str]:
        """The models whose table part is `table`, in any schema."""
        return self._by_table.get(table, [])

    def with_upstream(self, names: Iterable[str]) -> set[str]:
        """`names` and everything they read from, directly or not."""
        found = set(names)
        return found | self.dag.upstream_of(found)

    def with_downstream(self, names: Iterable[str]) -> set[str]:
        """`names` and everything that reads from them, directly or not (what a restatement redoes)."""
        found = set(names)
        return found | self.dag.downstream_of(found)


def select_models(selectors: Sequence[str], index: ModelIndex, *, flag: str) -> set[str]:
    """The models any of `selectors` selects (their union).

    `flag` names where the selectors came from (`--select-model`): every error names it, the
    selector, and for a syntax error the position. Raises SelectorError.
    """
    selected: set[str] = set()
    for text in selectors:
        selected |= Selector.parse(text, flag).select(index)
    return selected


# -- parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    text: str
    position: int  # 1-based column in the selector

    @property
    def is_term(self) -> bool:
        return self.text not in _OPERATORS


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in _OPERATORS:
            out.append(_Token(char, i + 1))
            i += 1
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in _OPERATORS:
                i += 1
            out.append(_Token(text[start:i], start + 1))
    return out


class _Parser:
    """Recursive descent, loosest operator first: union := both ('|' both)*,
    both := unary ('&' unary)*, unary := '^' unary | lineage, lineage := ['+'] atom ['+'],
    atom := '(' union ')' | name | tag:pattern."""

    def __init__(self, text: str, flag: str):
        self.text = text
        self.flag = flag
        self.tokens = _tokens(text)
        self.i = 0

    def parse(self) -> _Node:
        if not self.tokens:
            raise SelectorError(f"{self.flag} '{self.text}': the selector is empty")
        node = self.union()
        token = self.peek()
        if token is not None:
            self.unexpected(token)
        return node

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, text: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.text == text:
            self.i += 1
            return token
        return None

    def union(self) -> _Node:
        node = self.both()
        while self.take("|"):
            node = _Or(node, self.both())
        return node

    def both(self) -> _Node:
        node = self.unary()
        while self.take("&"):
            node = _And(node, self.unary())
        return node

    def unary(self) -> _Node:
        if self.take("^"):
            return _Not(self.unary())
        return self.lineage()

    def lineage(self) -> _Node:
        upstream = self.take("+") is not None
        node = self.atom()
        downstream = self.take("+") is not None
        return _Lineage(node, upstream, downstream) if upstream or downstream else node

    def atom(self) -> _Node:
        token = self.peek()
        if token is None:
            self.fail("a model name, tag:NAME or '(' is missing", None)
        self.i += 1
        if token.text == "(":
            node = self.union()
            if not self.take(")"):
                after = self.peek()
                if after is None:
                    self.fail(f"the '(' at position {token.position} is never closed", None)
                self.unexpected(after)
            return node
        if not token.is_term:
            self.fail(f"unexpected '{token.text}' where a model name, tag:NAME or '(' belongs", token)
        return self.term(token)

    def unexpected(self, token: _Token) -> NoReturn:
        """What follows a complete selector: an operator it cannot take, or a second selector."""
        if token.is_term or token.text in "(^+":
            self.fail(f"'{token.text}' follows another selector without an operator: join them with & or |", token)
        self.fail(f"unexpected '{token.text}'", token)

    def term(self, token: _Token) -> _Node:
        text = token.text.strip("`")
        prefix, colon, rest = text.partition(":")
        if not colon:
            return _Name(text.lower(), token.position)
        if prefix.lower() != TAG_PREFIX[:-1]:
            self.fail(f"unknown selector '{prefix}:': write a model name, a wildcard (schema.*) or tag:NAME", token)
        if not rest:
            self.fail("'tag:' needs a tag name", token)
        return _Tag(rest.lower(), token.position)

    def fail(self, what: str, token: _Token | None) -> NoReturn:
        where = f"position {token.position}" if token else f"position {len(self.text) + 1} (the end)"
        raise SelectorError(f"{self.flag} '{self.text}', {where}: {what}")


# -- evaluation --------------------------------------------------------------------------------


class _Node(Protocol):
    def evaluate(self, ev: _Evaluation) -> set[str]: ...


@dataclass(frozen=True)
class _Name:
    """A model name, possibly with `*` wildcards, lower case."""

    text: str
    position: int

    @property
    def is_pattern(self) -> bool:
        return "*" in self.text

    def evaluate(self, ev: _Evaluation) -> set[str]:
        return ev.named(self)


@dataclass(frozen=True)
class _Tag:
    pattern: str
    position: int

    def evaluate(self, ev: _Evaluation) -> set[str]:
        match = _matcher(self.pattern)
        return {name for name, tags in ev.index.tags.items() if any(match(t) for t in tags)}


@dataclass(frozen=True)
class _Not:
    node: _Node

    def evaluate(self, ev: _Evaluation) -> set[str]:
        return ev.index.names - self.node.evaluate(ev)


@dataclass(frozen=True)
class _And:
    left: _Node
    right: _Node

    def evaluate(self, ev: _Evaluation) -> set[str]:
        return self.left.evaluate(ev) & self.right.evaluate(ev)


@dataclass(frozen=True)
class _Or:
    left: _Node
    right: _Node

    def evaluate(self, ev: _Evaluation) -> set[str]:
        return self.left.evaluate(ev) | self.right.evaluate(ev)


@dataclass(frozen=True)
class _Lineage:
    node: _Node
    upstream: bool
    downstream: bool

    def evaluate(self, ev: _Evaluation) -> set[str]:
        found = self.node.evaluate(ev)
        out = set(found)
        if self.upstream:
            out |= ev.index.dag.upstream_of(found)
        if self.downstream:
            out |= ev.index.dag.downstream_of(found)
        return out


def _matcher(pattern: str):
    """`*` matches any run of characters; everything else matches itself."""
    if "*" not in pattern:
        return pattern.__eq__
    regex = re.compile(".*".join(re.escape(part) for part in pattern.split("*")))
    return lambda value: regex.fullmatch(value) is not None


@dataclass(frozen=True)
class _Evaluation:
    index: ModelIndex
    selector: str
    flag: str

    def named(self, name: _Name) -> set[str]:
        key = name.text
        if name.is_pattern:
            match = _matcher(key)
            return {n for n in self.index.tags if match(n)}
        if key in self.index.tags:
            return {key}
        schema, dot, table = key.rpartition(".")
        if dot:
            base = f"{schema.split('__')[0]}.{table}"  # a view name of another environment: `schema__dev.model`
            if base in self.index.tags:
                return {base}
        else:
            found = self.index.with_table(key)
            if len(found) == 1:
                return set(found)
            if found:
                raise SelectorError(f"{self._where(name.text)} is ambiguous: {', '.join(found)}. "
                                    f"Write the schema too.")
        raise SelectorError(f"{self._where(name.text)} matches no model.{self._suggest_names(key)}")

    def _where(self, term: str) -> str:
        if term == self.selector.strip().strip("`").lower():
            return f"{self.flag} '{self.selector}'"
        return f"{self.flag} '{self.selector}': '{term}'"

    def _suggest_names(self, key: str) -> str:
        close = _close(key, self.index.tags)
        if not close and "." not in key:
            tables = _close(key, self.index.tables)
            close = [n for t in tables for n in self.index.with_table(t)][:_SUGGESTIONS]
        if close:
            return f" Did you mean: {', '.join(close)}?"
        return f" Models: {_listing(self.index.tags)}" if self.index.tags else " There are no models."

    def nothing_matched(self, node: _Node) -> SelectorError:
        """The error for a whole selector that selects no model: with close tags or names when it
        is a single tag or wildcard."""
        hint = ""
        if isinstance(node, _Tag):
            tags = sorted({t for ts in self.index.tags.values() for t in ts})
            close = _close(node.pattern.replace("*", ""), tags)
            if close:
                hint = f" Did you mean: {', '.join(TAG_PREFIX + t for t in close)}?"
            else:
                hint = f" Tags: {_listing(tags)}" if tags else " No model has tags."
        elif isinstance(node, _Name):
            hint = self._suggest_names(node.text.replace("*", ""))
        return SelectorError(f"{self.flag} '{self.selector}' matches no model.{hint}")


def _close(word: str, candidates: Iterable[str]) -> list[str]:
    """The candidates most like `word` (difflib's measure), best first, ties by name."""
    scored = []
    for candidate in candidates:
        matcher = difflib.SequenceMatcher(None, word, candidate)
        if matcher.real_quick_ratio() >= _CUTOFF and matcher.quick_ratio() >= _CUTOFF and \
                (ratio := matcher.ratio()) >= _CUTOFF:
            scored.append((-ratio, candidate))
    return [candidate for _, candidate in sorted(scored)[:_SUGGESTIONS]]


def _listing(names: Iterable[str]) -> str:
    names = sorted(names)
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


@dataclass(frozen=True)
class Selector:
    """One parsed selector expression."""

    text: str
    flag: str
    root: _Node

    @classmethod
    def parse(cls, text: str, flag: str) -> Selector:
        """Raises SelectorError naming the flag, the selector and the position of what is wrong."""
        return cls(text, flag, _Parser(text, flag).parse())

    def select(self, index: ModelIndex) -> set[str]:
        ev = _Evaluation(index, self.text, self.flag)
        found = self.root.evaluate(ev)
        if not found:
            raise ev.nothing_matched(self.root)
        return found
