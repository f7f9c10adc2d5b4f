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
