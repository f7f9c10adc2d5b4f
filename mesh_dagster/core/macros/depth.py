"""How deep `@DEF` functions may call each other: a recursive `@DEF` is one error at its line.

`@DEF(f, x -> @f(x) + 1)` calls itself without end; Python's stack ran out first and the user got
"Unexpected RecursionError ... This is a bug", pointing at our code (or, caught by the renderer,
at the MODEL line). Each application of a `@DEF` function is counted here, and past `MAX_DEPTH`
nested applications the function being applied is reported at the line of its `@DEF`, with the
chain of calls that led there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mesh_dagster.core.errors import MacroError

if TYPE_CHECKING:
    from mesh_dagster.core.macros.syntax import Lambda

# Nested @DEF applications allowed: far more than any real macro needs, far less than what
# exhausts Python's stack (each level takes a dozen frames of the evaluator).
MAX_DEPTH = 40


@contextmanager
def def_application(stack: list[str], name: str, fn: Lambda, path: str | None) -> Iterator[None]:
    """While `@name` (defined as `fn`) is applied: `stack` holds the @DEF calls under way."""
    if len(stack) >= MAX_DEPTH:
        chain = " -> ".join(f"@{n}" for n in [*stack[-3:], name])
        raise MacroError(f"@DEF {name} is recursive: it is still calling itself {MAX_DEPTH} calls deep "
                         f"(... {chain}); a @DEF function cannot call itself", path, fn.line)
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


def def_line_key(index: int) -> str:
    """The key of a model's `property_lines` holding the line of its `index`-th `@DEF` statement
    (errors inside a @DEF point at it, not at the MODEL block)."""
    return f"@DEF {index + 1}"
