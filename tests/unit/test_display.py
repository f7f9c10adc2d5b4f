"""core/config/display.py: user text shown, never obeyed (control characters and bidi controls as escapes)."""

from __future__ import annotations

import pytest

from mesh_dagster.core.config.display import markdown_code, markdown_fence, printable, printable_line


@pytest.mark.parametrize(("text", "shown"), [
    ("a\x1b[2Kb", "a\\x1b[2Kb"), ("a\rb", "a\\rb"), ("a\x7fb", "a\\x7fb"), ("a\x85b", "a\\x85b"),
    ("\u202aa\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", "\\u202aa\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067"
                                                                "\\u2068\\u2069"),
    ("kept:\n\ttab, é, 日本", "kept:\n\ttab, é, 日本"), ("", ""),
])
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_markdown_code_spans_hold_backticks() -> None:
    assert markdown_code("s.a") == "`s.a`"
    assert markdown_code("a`b") == "``a`b``"
    assert markdown_code("`a") == "`` `a ``"


def test_markdown_fence_is_longer_than_any_backtick_run() -> None:
    assert markdown_fence("no backticks") == "```"
    assert markdown_fence("a ``` b ````` c") == "``````"


def test_printable_line_escapes_newlines_and_tabs() -> None:
    assert printable_line("a\nb\tc\x1b") == "a\\nb\\tc\\x1b"


def test_printable_escapes_exactly_the_control_and_reordering_characters() -> None:
    """Every code point: the C0/C1 controls but newline and tab (Unicode's "Cc") and the reordering
    characters are escaped, nothing else (one regex pass decides, not a walk per character)."""
    import sys
    import unicodedata

    reordering = set("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        hidden = char not in "\n\t" and (char in reordering or unicodedata.category(char) == "Cc")
        assert (printable(char) != char) == hidden, hex(code)
