"""Python models' frames and seeds' rows, on their way into Spark.

What a Python model returns (PySpark or pandas DataFrames) becomes one temporary view without
collecting anything to the driver; a seed's pandas frame is sent as booleans, 64-bit integers,
doubles or text and cast to its declared types by Spark, so `2020-01-01` becomes a DATE under
Spark's rules, not pandas'. The engine's session (statements.py) registers and drops these views;
its writes (writes.py) load seeds.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine.sql_text import ddl_type, quote_identifier, temp_name

if TYPE_CHECKING:
    from mesh_dagster.engine.statements import SparkStatements


def register_frames(session: SparkStatements, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
    """One temporary view over what a Python model returned; its name.

    A PySpark DataFrame is registered as it is (its rows stay on the executors: nothing here
    collects, counts or caches it); pandas frames are sent to Spark in types read from their
    values (cast to the declared ones by the query reading the view); chunks are cast to the
    declared columns and unioned; no frame at all is an empty view of the declared columns.
    """
    declared = _declared_schema(session, columns)
    spark_frames = [_spark_frame(session, frame, declared) for frame in frames]
    view = temp_name()
    with session.errors("Cannot register the output of a Python model"):
        if not spark_frames:
            combined = session.spark.createDataFrame([], schema=declared)
        elif len(spark_frames) == 1:
            combined = spark_frames[0]
        else:  # chunks may differ in column order and in types: each is cast to the declared ones
            casts = [f"CAST({quote_identifier(name)} AS {ddl_type(kind)}) AS {quote_identifier(name)}"
                     for name, kind in columns.items()]
            combined = functools.reduce(lambda a, b: a.union(b), (f.selectExpr(*casts) for f in spark_frames))
        combined.createOrReplaceTempView(view)
    return view


def _declared_schema(session: SparkStatements, columns: Mapping[str, str]) -> T.StructType:
    """Declared columns as Spark types (from analysis: no job runs)."""
    casts = ", ".join(f"CAST(NULL AS {ddl_type(kind)}) AS {quote_identifier(name)}"
                      for name, kind in columns.items())
    with session.errors(f"Invalid column type in {dict(columns)}"):
        return session.spark.sql(f"SELECT {casts}").schema


def _spark_frame(session: SparkStatements, frame: Any, declared: T.StructType) -> DataFrame:
    if isinstance(frame, pd.DataFrame):
        _check_output_columns([str(c) for c in frame.columns], declared.names)
        return _from_pandas(session, frame, declared)
    if isinstance(frame, DataFrame):
        with session.errors("Cannot read the columns of the DataFrame a Python model returned"):
            names = frame.columns
        _check_output_columns(names, declared.names)
        return frame
    raise EngineError(f"it returned a {type(frame).__name__}: return (or yield) PySpark or pandas DataFrames")


def _from_pandas(session: SparkStatements, frame: pd.DataFrame, declared: T.StructType) -> DataFrame:
    """A pandas frame as a Spark DataFrame of the declared columns (values typed as pandas holds
    them; missing values, NaN included, as NULL whatever the Arrow setting). `Decimal` values travel
    as their exact text, which the query casts to the declared type (Spark takes them only into a
    DECIMAL column of a precision they fit)."""
    by_name = {str(c).lower(): c for c in frame.columns}
    fields, data = [], {}
    for field in declared.fields:
        series = frame[by_name[field.name.lower()]]
        if pd.api.types.infer_dtype(series, skipna=True) == "decimal":
            series = series.map(lambda value: None if _is_missing(value) else str(value))
        fields.append(T.StructField(field.name, _transfer_type(series, field.dataType), True))
        data[field.name] = series.astype(object).where(series.notna(), None) if series.isna().any() else series
    with session.errors("Cannot turn the pandas DataFrame a Python model returned into a Spark DataFrame"):
        return session.spark.createDataFrame(pd.DataFrame(data, index=frame.index), schema=T.StructType(fields))


def check_seed_columns(table: str, df: pd.DataFrame, columns: Mapping[str, str]) -> None:
    """A seed's data must have exactly its declared columns (in any order and case)."""
    frame_columns = {str(c).lower() for c in df.columns}
    missing = [name for name in columns if name.lower() not in frame_columns]
    extra = [str(c) for c in df.columns if str(c).lower() not in {n.lower() for n in columns}]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        if extra:
            problems.append(f"undeclared column(s) {', '.join(extra)}")
        raise EngineError(f"Cannot load seed into {table}: the data has {' and '.join(problems)}")


def seed_view(session: SparkStatements, table: str, df: pd.DataFrame, names: Sequence[str],
              batch_size: int | None = None) -> str:
    """A temporary view of the seed's rows, its columns `c0, c1, ...` holding `names` in order (as
    booleans, 64-bit integers, doubles or text: the query reading it casts them); its name. With
    `batch_size`, the rows travel to Spark in frames of at most that many rows (unioned)."""
    frame_columns = {str(c).lower(): c for c in df.columns}
    series = [df[frame_columns[name.lower()]] for name in names]
    kinds = [_seed_kind(s) for s in series]
    schema = T.StructType([T.StructField(f"c{i}", kind, True) for i, kind in enumerate(kinds)])
    rows = list(zip(*(_seed_values(s, kind) for s, kind in zip(series, kinds)))) if len(df) else []
    view = temp_name()
    with session.errors(f"Cannot load seed into {table}"):
        size = batch_size or max(len(rows), 1)
        batches = [session.spark.createDataFrame(rows[i:i + size], schema=schema) for i in range(0, len(rows), size)]
        combined = functools.reduce(lambda a, b: a.union(b), batches) if batches else \
            session.spark.createDataFrame([], schema=schema)
        combined.createOrReplaceTempView(view)
    return view


def _check_output_columns(produced: Sequence[str], declared: Sequence[str]) -> None:
    """A Python model's output must have exactly its declared columns (in any order and case)."""
    lowered = [name.lower() for name in produced]
    duplicated = sorted({name for name in lowered if lowered.count(name) > 1})
    missing = [name for name in declared if name.lower() not in lowered]
    extra = [name for name in produced if name.lower() not in {d.lower() for d in declared}]
    problems = []
    if missing:
        problems.append(f"lacks the declared column(s) {', '.join(missing)}")
    if extra:
        problems.append(f"has undeclared column(s) {', '.join(extra)}")
    if duplicated:
        problems.append(f"names column(s) {', '.join(duplicated)} more than once")
    if problems:
        raise EngineError(f"its DataFrame {' and '.join(problems)} (declared columns: {', '.join(declared)})")


def _transfer_type(series: pd.Series, declared: T.DataType) -> T.DataType:
    """The Spark type a pandas column travels in: what its values are (a query casts them to the
    declared type afterwards, under Spark's rules), or the declared type when pandas cannot tell."""
    if (by_dtype := _numeric_kind(series)) is not None:
        return by_dtype
    if pd.api.types.is_datetime64_any_dtype(series):
        return T.TimestampType()
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    by_values: dict[str, T.DataType] = {"string": T.StringType(), "boolean": T.BooleanType(),
                                        "integer": T.LongType(), "floating": T.DoubleType(),
                                        "mixed-integer-float": T.DoubleType(), "date": T.DateType(),
                                        "datetime": T.TimestampType(), "datetime64": T.TimestampType()}
    return by_values.get(inferred, declared)


def _numeric_kind(series: pd.Series) -> T.DataType | None:
    """The Spark type of a boolean, integer or floating pandas column; None for any other dtype."""
    if pd.api.types.is_bool_dtype(series):
        return T.BooleanType()
    if pd.api.types.is_integer_dtype(series):
        return T.LongType()
    if pd.api.types.is_float_dtype(series):
        return T.DoubleType()
    return None


def _seed_kind(series: pd.Series) -> T.DataType:
    kind = _numeric_kind(series)
    return T.StringType() if kind is None else kind


def _seed_values(series: pd.Series, kind: T.DataType) -> list[Any]:
    converters: dict[type[T.DataType], Callable[[Any], Any]] = {T.BooleanType: bool, T.LongType: int,
                                                                 T.DoubleType: float}
    convert = converters.get(type(kind), _seed_text)
    return [None if _is_missing(value) else convert(value) for value in series.tolist()]


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _seed_text(value: Any) -> str:
    """Text Spark can cast: ISO dates/timestamps (interpreted in the session time zone), `true`, `1`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
