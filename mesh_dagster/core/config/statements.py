"""Checking `before_all` / `after_all` entries when config.yaml loads, before any macro exists.

An entry without macros must parse in the project's dialect; one with macros is rendered (and
checked) by `core/project/environment_statements.py` when it is about to run."""

from __future__ import annotations

import logging

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mesh_dagster.core.config.parse_errors import describe
from mesh_dagster.core.config.types import get_dialect


def check_statement(text: str, dialect: str) -> str | None:
    """Why an entry cannot be run (None when it can, or when only rendering can tell: macros)."""
    if not text.strip():
        return "the statement is empty"
    if "@" in text:
        return None
    try:
        parse_statements(text, dialect)
    except (ParseError, TokenError) as e:
        return f"Cannot parse statement: {describe(e)}"
    return None


def parse_statements(text: str, dialect: str) -> list[exp.Expr]:
    """Statements sqlglot has no grammar for (`MSCK REPAIR TABLE`, `ADD JAR`) are kept as written,
    without sqlglot's warning that says so: they are valid Spark SQL."""
    fallback = _CommandFallbackFilter()
    logger = logging.getLogger("sqlglot")
    logger.addFilter(fallback)
    try:
        return [tree for tree in sqlglot.parse(text, read=get_dialect(dialect)) if tree is not None]
    finally:
        logger.removeFilter(fallback)


class _CommandFallbackFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()
