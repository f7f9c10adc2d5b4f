"""Reading one property value of a definition file (`true`, `7`, a column name), or failing at its line.

Shared by the MODEL block reader (core/project/model_reader.py) and the kinds reading their own
properties (core/models/kinds.py), so a bad value reads the same wherever it is written.
"""

from __future__ import annotations

from collections.abc import Callable

from mesh_dagster.core.config.names import check_column
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Value


def read_bool(value: Value, path: str) -> bool:
    text = value.text.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ModelError(f"Expected true or false, got '{value.text}'", path, value.line)


def read_int(value: Value, path: str, what: str, minimum: int | None = None) -> int:
    try:
        number = int(value.text)
    except ValueError:
        raise ModelError(f"{what} must be an integer, got '{value.text}'", path, value.line) from None
    if minimum is not None and number < minimum:
        raise ModelError(f"{what} must be at least {minimum}, got {number}", path, value.line)
    return number


def checked(check: Callable[[str], str], text: str, path: str, line: int) -> str:
    """Run a name/value check that raises ValueError, as a ModelError at `path:line`."""
    try:
        return check(text)
    except ValueError as e:
        raise ModelError(str(e), path, line) from None


def read_column(text: str, path: str, line: int, what: str = "Column name") -> str:
    return checked(lambda t: check_column(t, what), text, path, line)
