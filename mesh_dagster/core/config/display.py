"""User text made safe to show for review: what a reviewer reads is what the file holds.

A model, a note or a name can carry characters a terminal or a browser obeys instead of showing:
`ESC [1A ESC [2K` moves the cursor up and erases the line above (a changed line of the diff being
approved disappears), a carriage return overwrites a line, and the Unicode bidirectional controls
(U+202A..U+202E, U+2066..U+2069) reorder what is read. Every such character is shown as its
escape instead (`\\x1b`, `\\r`, `\\u202e`); newline and tab stay as they are.
"""

from __future__ import annotations

import re

# Bidirectional formatting characters (and the invisible marks with the same effect) plus the
# Unicode line and paragraph separators: none is a "control" by category, all change what is read.
_REORDERING = frozenset("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LONGEST_BACKTICKS = re.compile(r"`+")
# One class for every character shown as its escape: the C0 controls but tab and newline, DEL and
# the C1 controls (exactly Unicode's "Cc" category), and the reordering characters above. One regex
# pass: a walk in Python over every character cost a third of a second on a 1,000-model plan.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_REORDERING)) + "]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab (C0, DEL, C1) and every bidi
    control shown as its escape."""
    return _HIDDEN.sub(_escape, text)


def has_hidden(text: str) -> bool:
    """Whether `printable` would change `text` (a search: what is shown unchanged is not copied)."""
    return _HIDDEN.search(text) is not None


def printable_line(text: str) -> str:
    """`printable` for text shown on one line: newlines and tabs are escaped too."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def markdown_fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`: user text inside a fenced code
    block cannot close it (and show the rest as Markdown or HTML)."""
    longest = max((len(run) for run in _LONGEST_BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def markdown_code(text: str) -> str:
    """`text` as an inline code span that no backtick in it can end early."""
    shown = printable_line(text)
    fence = "`" * (max((len(run) for run in _LONGEST_BACKTICKS.findall(shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"
