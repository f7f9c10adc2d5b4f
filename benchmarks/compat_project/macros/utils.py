"""Helpers the macros import (`from macros.utils import ...`), as SQLMesh projects do."""

CENT_DIGITS = 2
SHARE_DIGITS = 1


def rounded(sql: str, digits: int) -> str:
    return f"ROUND({sql}, {digits})"
