"""Column types (always stored as Spark SQL type text), SQL dialects and table formats."""

from __future__ import annotations

from functools import cache, lru_cache

from sqlglot import Dialect, exp
from sqlglot.errors import ParseError

_T = exp.DataType.Type
# The types a Spark table column can have (what `CREATE TABLE` accepts).
SPARK_TYPES = frozenset({
    _T.BOOLEAN, _T.TINYINT, _T.SMALLINT, _T.INT, _T.BIGINT, _T.FLOAT, _T.DOUBLE, _T.DECIMAL, _T.TEXT, _T.VARCHAR,
    _T.CHAR, _T.BINARY, _T.DATE, _T.TIMESTAMP, _T.TIMESTAMPTZ, _T.TIMESTAMPNTZ, _T.TIMESTAMPLTZ, _T.ARRAY, _T.MAP,
    _T.STRUCT, _T.INTERVAL, _T.VARIANT,
})


@lru_cache(maxsize=4096)
def to_spark_type(type_text: str, dialect: str = "spark") -> str:
    """Normalise a type written in `dialect` to Spark's spelling (`INTEGER` → `INT`); a type Spark
    has no column type for (`BIGNUMERIC`, `GEOGRAPHY`, ...) is a ValueError now, not a failed
    CREATE TABLE halfway through an apply."""
    try:
        spark_text = exp.DataType.build(type_text, dialect=dialect).sql(dialect="spark")
        spark_type = exp.DataType.build(spark_text, dialect="spark")
    except (ParseError, ValueError) as e:
        raise ValueError(f"unknown type '{type_text}'") from e
    for node in spark_type.find_all(exp.DataType):
        if isinstance(node.this, _T) and node.this not in SPARK_TYPES:
            raise ValueError(f"type '{type_text}' has no Spark column type ({node.sql(dialect='spark')})")
    return spark_text


@cache
def check_dialect(name: str) -> str:
    """A sqlglot dialect name, lower case; an unknown one is a ValueError naming it (not a traceback
    from the first render that needs it)."""
    key = name.strip().lower()
    try:
        Dialect.get_or_raise(key)
    except ValueError:
        raise ValueError(f"unknown SQL dialect '{name}' (e.g. spark, duckdb, snowflake, bigquery, postgres)") from None
    return key


@cache
def get_dialect(name: str) -> Dialect:
    """One sqlglot Dialect instance per name: passing a name makes sqlglot build a new one per call."""
    return Dialect.get_or_raise(name)


# Table formats Spark can write (`USING <format>`); avro, delta, iceberg and hudi need the user's
# Spark to ship their jars (we cannot download them at run time).
STORAGE_FORMATS = ("parquet", "orc", "avro", "json", "csv", "delta", "iceberg", "hudi")


def check_storage_format(value: str) -> str:
    """A known `storage_format`, lower case; anything else would only fail when the table is created."""
    key = value.strip().lower()
    if key not in STORAGE_FORMATS:
        raise ValueError(f"unknown storage_format '{value}'. Known: {', '.join(STORAGE_FORMATS)}")
    return key
