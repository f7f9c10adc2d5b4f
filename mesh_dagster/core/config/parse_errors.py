"""sqlglot parse failures in the user's words.

sqlglot's messages name its own internals (`<Token token_type: TokenType.SENTINEL, ...>`,
`<class 'sqlglot.expressions.query.Where'>`) and end with a position and a highlighted excerpt
that our messages give as `file:line` instead.
"""

from __future__ import annotations

import re

_POSITION = re.compile(r"\.? Line \d+, Col: \d+\.?$")
_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: .*?>")
_MISSING_ARG = re.compile(r"Required keyword: '\w+' missing for <class '(?:\w+\.)*(\w+)'>")
_CLAUSES = frozenset({"From", "Group", "Having", "Join", "Limit", "Offset", "Order", "Qualify", "Where"})


def describe(error: Exception) -> str:
    """The first line of a sqlglot ParseError/TokenError, without positions or reprs."""
    text = str(error).strip()
    first = _POSITION.sub("", text.splitlines()[0] if text else type(error).__name__)
    first = _TOKEN_REPR.sub(lambda m: "the end of the query" if m[1] == "SENTINEL" else f"'{m[2]}'", first)
    return _MISSING_ARG.sub(
        lambda m: f"Incomplete {m[1].upper()} clause" if m[1] in _CLAUSES else "the expression is incomplete", first)
