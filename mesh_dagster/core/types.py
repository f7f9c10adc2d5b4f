"""Column types, always stored as Spark SQL type text."""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import ParseError


@lru_cache(maxsize=4096)
def to_spark_type(type_text: str, dialect: str = "spark") -> str:
    """Normalise a type written in `dialect` to Spark's spelling (`INTEGER` → `INT`)."""
    try:
        return exp.DataType.build(type_text, dialect=dialect).sql(dialect="spark")
    except (ParseError, ValueError) as e:
        raise ValueError(f"unknown type '{type_text}'") from e


@lru_cache(maxsize=None)
def check_dialect(name: str) -> str:
    """A sqlglot dialect name, lower case; an unknown one is a ValueError naming it (not a traceback
    from the first render that needs it)."""
    from sqlglot import Dialect

    key = name.strip().lower()
    try:
        Dialect.get_or_raise(key)
    except ValueError:
        raise ValueError(f"unknown SQL dialect '{name}' (e.g. spark, duckdb, snowflake, bigquery, postgres)") from None
    return key
