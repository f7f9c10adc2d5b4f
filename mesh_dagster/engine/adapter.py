"""DDL and write strategies on a SparkSession, for classic and Spark Connect alike.

Everything here goes through `spark.sql`, the DataFrame API and the `spark.catalog` calls both
session kinds implement; never `sparkContext`. Names are `schema.table` strings made of
`[A-Za-z0-9_]`, validated and backtick-quoted before they reach SQL.

Writes map query output to table columns by name (with a cast to the table's type), never by
position: INSERT resolves columns positionally, so a reordered SELECT would otherwise silently
shuffle values between columns of compatible types.

Spark failures leave this module as `EngineError` (a `SparkSQLError` carrying Spark's error
class): the layers above cannot import pyspark, so they could not catch its exception types.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import pandas as pd
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from mesh_dagster.core.config.names import IDENTIFIER
from mesh_dagster.core.config.names import TEMP_PREFIX as TEMP_PREFIX  # re-exported: part of this module's API
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.models.merge import Upsert
from mesh_dagster.engine import generations
from mesh_dagster.engine.session import (
    SparkSQLError,
    quiet_pyspark_error_logs,
    to_engine_error,
)
from mesh_dagster.engine.sql_text import (
    ddl_type,
    find_column,
    known_column,
    quote_identifier,
    quote_name,
    quote_schema,
    split_name,
    sql_string,
    strip_sql,
    temp_name,
)
from mesh_dagster.engine.writes import Journal, TableWrites

_HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
SQL_TRACE_ENV = "MESH_SQL_TRACE"  # a file path: every call to Spark is appended with its duration
_DROP_PARTITIONS_PER_STATEMENT = 100


def type_sql(data_type: T.DataType) -> str:
    """Spark DDL for a type: `int`, `decimal(10,2)`, `array<string>`, `struct<`a b`:int>`.

    `simpleString()` except that struct field names are quoted when they need it, and NULL-typed
    (`void`) columns, which Spark refuses to store, become strings.
    """
    if isinstance(data_type, T.NullType):
        return "string"
    if isinstance(data_type, T.StructType):
        fields = ",".join(f"{_struct_field_name(f.name)}:{type_sql(f.dataType)}" for f in data_type.fields)
        return f"struct<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"array<{type_sql(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{type_sql(data_type.keyType)},{type_sql(data_type.valueType)}>"
    return data_type.simpleString()


def _struct_field_name(name: str) -> str:
    return name if IDENTIFIER.fullmatch(name) else "`" + name.replace("`", "``") + "`"


class SparkEngine:
    """The operations the rest of mesh_dagster needs from Spark, on one session."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self._trace = os.environ.get(SQL_TRACE_ENV) or None
        # Schemas known to exist: a metastore round trip each otherwise, several per model. Another
        # process may drop one (the janitor drops empty environment schemas): `_in_schema` then
        # recreates it and retries, so a stale entry costs one failed statement, never a failure.
        self._schemas: set[str] = set()
        self._writes = TableWrites(self)
        quiet_pyspark_error_logs()
        # The write strategies rely on it: in Spark's default STATIC mode, INSERT OVERWRITE into a
        # partitioned table first deletes every partition, not just the ones written.
        with self._errors("Cannot configure the Spark session"):
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")

    # -- statements ------------------------------------------------------------------------

    def execute(self, sql: str) -> None:
        """Run a statement. DDL/DML run eagerly; a bare SELECT is only analyzed."""
        with self._errors("Spark SQL failed", sql):
            self.spark.sql(sql)

    def fetchall(self, sql: str) -> list[tuple]:
        with self._errors("Spark query failed", sql):
            return [tuple(row) for row in self.spark.sql(sql).collect()]

    def fetchdf(self, sql: str) -> pd.DataFrame:
        with self._errors("Spark query failed", sql):
            return self.spark.sql(sql).toPandas()

    # -- schemas and catalog ---------------------------------------------------------------

    def create_schema(self, name: str) -> None:
        # Checked first: on an existing schema, Hive's metastore logs an AlreadyExistsException
        # even under IF NOT EXISTS.
        if name.lower() in self._schemas:
            return
        if not self.schema_exists(name):
            self.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_schema(name)}")
        self._schemas.add(name.lower())

    def drop_schema(self, name: str, cascade: bool = True) -> None:
        self._schemas.discard(name.lower())
        self.execute(f"DROP SCHEMA IF EXISTS {quote_schema(name)}{' CASCADE' if cascade else ''}")

    def _in_schema(self, name: str, ddl: str, context: str) -> None:
        """Run DDL creating `name` after making sure its schema exists; when the schema was only
        remembered and has been dropped meanwhile, create it again and retry once."""
        schema, _ = split_name(name)
        if schema:
            self.create_schema(schema)
        try:
            with self._errors(context, ddl):
                self.spark.sql(ddl)
        except SparkSQLError as e:
            if not schema or e.condition != "SCHEMA_NOT_FOUND":
                raise
            self._schemas.discard(schema.lower())
            self.create_schema(schema)
            with self._errors(context, ddl):
                self.spark.sql(ddl)

    def schema_exists(self, name: str) -> bool:
        quote_schema(name)
        with self._errors(f"Cannot look up schema {name}"):
            return bool(self.spark.catalog.databaseExists(name))

    def table_exists(self, name: str) -> bool:
        """True for tables and views."""
        quote_name(name)
        with self._errors(f"Cannot look up {name}"):
            return bool(self.spark.catalog.tableExists(name))

    def list_objects(self, schema: str) -> dict[str, str]:
        """Tables and views of a schema: name -> "table" | "view"; {} for a schema that does not exist.
        Temporary views are not listed."""
        quoted = quote_schema(schema)
        if not self.schema_exists(schema):
            return {}
        with self._errors(f"Cannot list the objects of schema {schema}"):
            tables = [r for r in self.spark.sql(f"SHOW TABLES IN {quoted}").collect() if not r["isTemporary"]]
            views = {r["viewName"] for r in self.spark.sql(f"SHOW VIEWS IN {quoted}").collect() if not r["isTemporary"]}
        return {r["tableName"]: "view" if r["tableName"] in views else "table" for r in tables}

    def columns(self, name: str) -> dict[str, str]:
        """Column -> Spark type (`int`, `string`, `date`, ...), in table order (partition columns last)."""
        quoted = quote_name(name)
        with self._errors(f"Cannot read the columns of {name}"):
            schema = self.spark.table(quoted).schema
        return {field.name: type_sql(field.dataType) for field in schema.fields}

    def query_columns(self, query_sql: str) -> dict[str, str]:
        """The output columns of a query, from analysis only (nothing is executed)."""
        with self._errors("Cannot analyze query", query_sql):
            schema = self.spark.sql(query_sql).schema
        return {field.name: type_sql(field.dataType) for field in schema.fields}

    def canonical_types(self, columns: Mapping[str, str]) -> dict[str, str]:
        """Spark's own spelling of declared types (`integer` -> `int`, `varchar(10)` -> `string`),
        so that declared and stored schemas compare equal."""
        if not columns:
            return {}
        casts = ", ".join(f"CAST(NULL AS {ddl_type(kind)}) AS c{i}" for i, kind in enumerate(columns.values()))
        with self._errors(f"Invalid column type in {dict(columns)}"):
            schema = self.spark.sql(f"SELECT {casts}").schema
        return {name: type_sql(field.dataType) for name, field in zip(columns, schema.fields)}

    def partition_columns(self, table: str) -> list[str]:
        """Partition columns in partition order (from DESCRIBE: `catalog.listColumns` is ~8x slower)."""
        with self._errors(f"Cannot describe {table}"):
            described = self.spark.sql(f"DESCRIBE TABLE {quote_name(table)}").collect()
        return _partition_section(row[0] for row in described)

    def partitions(self, table: str) -> list[dict[str, str | None]]:
        """The table's partitions as {column: value}; a NULL partition value is None."""
        if not self.partition_columns(table):
            return []
        with self._errors(f"Cannot list the partitions of {table}"):
            rows = self.spark.sql(f"SHOW PARTITIONS {quote_name(table)}").collect()
        return [_parse_partition(row[0]) for row in rows]

    # -- tables and views --------------------------------------------------------------------

    def create_table(
        self,
        table: str,
        query_sql: str | None,
        partitioned_by: Sequence[str] = (),
        storage_format: str = "parquet",
        columns: Mapping[str, str] | None = None,
        comments: Mapping[str, str] | None = None,
    ) -> None:
        """CREATE TABLE IF NOT EXISTS with `columns`, or the query's columns (analyzed, not run);
        `comments` (column -> text) become column comments."""
        if columns is None:
            if query_sql is None:
                raise EngineError(f"Cannot create {table}: neither columns nor a query were given")
            columns = self.query_columns(query_sql)
        _check_partition_columns(table, columns, partitioned_by)
        definition = ", ".join(f"{quote_identifier(name)} {ddl_type(kind)}{_comment(comments, name)}"
                               for name, kind in columns.items())
        ddl = f"CREATE TABLE IF NOT EXISTS {quote_name(table)} ({definition}) USING {_storage_format(storage_format)}"
        if partitioned_by:
            ddl += f" PARTITIONED BY ({', '.join(quote_identifier(p) for p in partitioned_by)})"
        try:
            self._in_schema(table, ddl, f"Cannot create table {table}")
        except SparkSQLError as e:
            if e.condition != "LOCATION_ALREADY_EXISTS":
                raise
            # Files of a dropped table whose removal a crash interrupted (generations.drop): no
            # table owns them, and Spark refuses to create a managed table over them.
            generations.clear_default_location(self, table)
            self._in_schema(table, ddl, f"Cannot create table {table}")

    def add_columns(self, table: str, columns: Mapping[str, str]) -> None:
        """ALTER TABLE ADD COLUMNS: existing rows read NULL for them (no data is rewritten)."""
        if not columns:
            return
        added = ", ".join(f"{quote_identifier(name)} {ddl_type(kind)}" for name, kind in columns.items())
        sql = f"ALTER TABLE {quote_name(table)} ADD COLUMNS ({added})"
        with self._errors(f"Cannot add columns to {table}", sql):
            self.spark.sql(sql)
        self.refresh(table)

    def retype_table(self, table: str, columns: Mapping[str, str]) -> None:
        """Make the table hold exactly `columns` (name -> type, in order), keeping its rows: kept
        columns are cast, dropped ones go, new ones read NULL. Parquet tables cannot drop or retype a
        column in place, so the rows are copied to a staging table, the table recreated with the
        same partitioning and format, and the rows copied back; the staging table goes last, so a
        failure in between leaves the rows in it (`__mesh_tmp_...`), never lost."""
        current = self.columns(table)
        partitioned_by = self.partition_columns(table)
        storage = self._storage_format_of(table)
        select = ", ".join(
            (f"CAST({quote_identifier(found)} AS {ddl_type(kind)})" if (found := find_column(current, name))
             else f"CAST(NULL AS {ddl_type(kind)})") + f" AS {quote_identifier(name)}"
            for name, kind in columns.items())
        staging = self.stage(table, f"SELECT {select} FROM {quote_name(table)}")
        self.drop_table(table)
        ordered = {c: t for c, t in columns.items() if c not in partitioned_by}
        ordered.update({c: columns[c] for c in partitioned_by if c in columns})
        self.create_table(table, None, [p for p in partitioned_by if p in columns], storage, ordered)
        names = ", ".join(quote_identifier(c) for c in ordered)
        self.execute(f"INSERT INTO {quote_name(table)} SELECT {names} FROM {quote_name(staging)}")
        self.drop_table(staging)

    def _storage_format_of(self, table: str) -> str:
        rows = self.fetchall(f"DESCRIBE TABLE EXTENDED {quote_name(table)}")
        provider = next((str(r[1]) for r in rows if str(r[0]).strip().lower() == "provider"), "parquet")
        return provider.strip().lower() or "parquet"

    def refresh(self, table: str) -> None:
        """Forget what this session cached of the table (its files, its location): another process
        may have rewritten it since."""
        with self._errors(f"Cannot refresh {table}"):
            self.spark.catalog.refreshTable(quote_name(table))

    def load_seed(self, table: str, df: pd.DataFrame, columns: Mapping[str, str],
                  comments: Mapping[str, str] | None = None, *, journal: Journal | None = None) -> None:
        """(Re)create `table` with exactly `columns` and fill it from the frame, casting in Spark.

        Values travel as booleans, 64-bit integers, doubles or text and are cast to the declared
        types by Spark, so `2020-01-01` becomes a DATE under Spark's rules, not pandas'.
        """
        frame_columns = {str(c).lower(): c for c in df.columns}
        missing = [name for name in columns if name.lower() not in frame_columns]
        extra = [str(c) for c in df.columns if str(c).lower() not in {n.lower() for n in columns}]
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing column(s) {', '.join(missing)}")
            if extra:
                problems.append(f"undeclared column(s) {', '.join(extra)}")
            raise EngineError(f"Cannot load seed into {table}: the data has {' and '.join(problems)}")
        table_columns, _ = self._writes.ensure_table(table, dict(columns), (), "parquet", comments)

        names = list(columns)
        series = [df[frame_columns[name.lower()]] for name in names]
        kinds = [_seed_kind(s) for s in series]
        schema = T.StructType([T.StructField(f"c{i}", kind, True) for i, kind in enumerate(kinds)])
        rows = list(zip(*(_seed_values(s, kind) for s, kind in zip(series, kinds)))) if len(df) else []
        view = temp_name()
        with self._errors(f"Cannot load seed into {table}"):
            self.spark.createDataFrame(rows, schema=schema).createOrReplaceTempView(view)
        try:
            source = {name: f"c{i}" for i, name in enumerate(names)}
            select = ", ".join(
                f"CAST({quote_identifier(source[known_column(columns, name)])} AS {ddl_type(kind)})"
                f" AS {quote_identifier(name)}"
                for name, kind in table_columns.items()
            )
            self._writes.replace_rows(table, f"SELECT {select} FROM {quote_identifier(view)}", journal=journal)
        finally:
            self._drop_temp_view(view)

    def create_view(self, view: str, select_sql: str, comments: Mapping[str, str] | None = None) -> None:
        """CREATE OR REPLACE, every time, so the view picks up columns added to its tables.

        Column comments need the view's column list, which must name every output column: it is
        read from the query's analysis (one round trip, only when there are comments)."""
        column_list = ""
        if comments:
            names = self.query_columns(select_sql)
            column_list = " (" + ", ".join(f"{quote_identifier(n)}{_comment(comments, n)}" for n in names) + ")"
        ddl = f"CREATE OR REPLACE VIEW {quote_name(view)}{column_list} AS\n{strip_sql(select_sql)}"
        self._in_schema(view, ddl, "Spark SQL failed")

    def drop_view(self, name: str) -> None:
        self.execute(f"DROP VIEW IF EXISTS {quote_name(name)}")

    # -- Python models ----------------------------------------------------------------------

    def register_frames(self, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
        """One temporary view over what a Python model returned; its name.

        A PySpark DataFrame is registered as it is (its rows stay on the executors: nothing here
        collects, counts or caches it); pandas frames are sent to Spark in types read from their
        values (cast to the declared ones by the query reading the view); chunks are cast to the
        declared columns and unioned; no frame at all is an empty view of the declared columns.
        """
        declared = self._declared_schema(columns)
        spark_frames = [self._spark_frame(frame, declared) for frame in frames]
        view = temp_name()
        with self._errors("Cannot register the output of a Python model"):
            if not spark_frames:
                combined = self.spark.createDataFrame([], schema=declared)
            elif len(spark_frames) == 1:
                combined = spark_frames[0]
            else:  # chunks may differ in column order and in types: each is cast to the declared ones
                casts = [f"CAST({quote_identifier(name)} AS {ddl_type(kind)}) AS {quote_identifier(name)}"
                         for name, kind in columns.items()]
                combined = functools.reduce(lambda a, b: a.union(b), (f.selectExpr(*casts) for f in spark_frames))
            combined.createOrReplaceTempView(view)
        return view

    def drop_temp_view(self, name: str) -> None:
        self._drop_temp_view(name)

    def _declared_schema(self, columns: Mapping[str, str]) -> T.StructType:
        """Declared columns as Spark types (from analysis: no job runs)."""
        casts = ", ".join(f"CAST(NULL AS {ddl_type(kind)}) AS {quote_identifier(name)}"
                          for name, kind in columns.items())
        with self._errors(f"Invalid column type in {dict(columns)}"):
            return self.spark.sql(f"SELECT {casts}").schema

    def _spark_frame(self, frame: Any, declared: T.StructType) -> DataFrame:
        if isinstance(frame, pd.DataFrame):
            _check_output_columns([str(c) for c in frame.columns], declared.names)
            return self._from_pandas(frame, declared)
        if isinstance(frame, DataFrame):
            with self._errors("Cannot read the columns of the DataFrame a Python model returned"):
                names = frame.columns
            _check_output_columns(names, declared.names)
            return frame
        raise EngineError(f"it returned a {type(frame).__name__}: return (or yield) PySpark or pandas DataFrames")

    def _from_pandas(self, frame: pd.DataFrame, declared: T.StructType) -> DataFrame:
        """A pandas frame as a Spark DataFrame of the declared columns (values typed as pandas holds
        them; missing values, NaN included, as NULL whatever the Arrow setting)."""
        by_name = {str(c).lower(): c for c in frame.columns}
        fields, data = [], {}
        for field in declared.fields:
            series = frame[by_name[field.name.lower()]]
            fields.append(T.StructField(field.name, _transfer_type(series, field.dataType), True))
            data[field.name] = series.astype(object).where(series.notna(), None) if series.isna().any() else series
        with self._errors("Cannot turn the pandas DataFrame a Python model returned into a Spark DataFrame"):
            return self.spark.createDataFrame(pd.DataFrame(data, index=frame.index), schema=T.StructType(fields))

    def drop_table(self, name: str) -> None:
        """DROP TABLE, with every file of its current generation and of the one it started at."""
        generations.drop(self, name)

    @property
    def is_classic(self) -> bool:
        """A classic (py4j) session, which reaches Hadoop's file system; else Spark Connect."""
        return not type(self.spark).__module__.startswith("pyspark.sql.connect")

    # -- writes (engine/writes.py) ------------------------------------------------------------

    def replace_table(self, table: str, query_sql: str, partitioned_by: Sequence[str] = (),
                      storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                      comments: Mapping[str, str] | None = None, *, journal: Journal | None = None,
                      reads_self: bool = False) -> None:
        self._writes.replace_table(table, query_sql, partitioned_by, storage_format, columns, comments,
                                   journal=journal, reads_self=reads_self)

    def insert_overwrite_interval(self, table: str, query_sql: str, time_column: str, low_sql: str, high_sql: str,
                                  *, journal: Journal | None = None, reads_self: bool = False) -> None:
        self._writes.insert_overwrite_interval(table, query_sql, time_column, low_sql, high_sql, journal=journal,
                                               reads_self=reads_self)

    def rewrite_table(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        self._writes.rewrite_table(table, query_sql, journal=journal)

    def upsert(self, table: str, query_sql: str, upsert: Upsert, duplicates_shown: int = 5, *,
               journal: Journal | None = None) -> list[tuple]:
        return self._writes.upsert(table, query_sql, upsert, duplicates_shown, journal=journal)

    def overwrite_partitions(self, table: str, query_sql: str, *, journal: Journal | None = None,
                             reads_self: bool = False) -> None:
        self._writes.overwrite_partitions(table, query_sql, journal=journal, reads_self=reads_self)

    def append(self, table: str, query_sql: str, *, journal: Journal | None = None) -> None:
        self._writes.append(table, query_sql, journal=journal)

    def stage(self, table: str, query_sql: str) -> str:
        return self._writes.stage(table, query_sql)

    def finish_write(self, payload: dict[str, Any]) -> bool:
        return self._writes.finish(payload)

    def discard_write(self, payload: dict[str, Any]) -> None:
        self._writes.discard(payload)

    def table_location(self, table: str) -> str | None:
        described = generations.describe(self, table)
        return described[0] if described is not None else None

    def drop_locations(self, locations: Iterable[str]) -> None:
        generations.delete(self, list(locations))

    def _drop_temp_view(self, name: str) -> None:
        with self._errors(f"Cannot drop temporary view {name}"):
            self.spark.catalog.dropTempView(name)

    @contextmanager
    def _errors(self, context: str, sql: str | None = None) -> Iterator[None]:
        """Every call to Spark passes here: Spark's exceptions become `EngineError`, and with
        `MESH_SQL_TRACE` set the call is traced (the benchmark counts statements from it)."""
        began = time.perf_counter() if self._trace else 0.0
        try:
            yield
        except (PySparkException, Py4JError) as e:
            raise to_engine_error(e, context, sql) from e
        finally:
            if self._trace:
                _append_trace(self._trace, time.perf_counter() - began, sql or f"[{context}]")


def _append_trace(path: str, seconds: float, what: str) -> None:
    """One line per Spark call: duration in seconds, a tab, the statement on one line (or, for a
    catalog call, its `[description]`)."""
    with open(path, "a", encoding="utf-8") as trace:
        trace.write(f"{seconds:.4f}\t{' '.join(what.split())}\n")


def _comment(comments: Mapping[str, str] | None, column: str) -> str:
    """` COMMENT '...'` for a column that has a description (matched case-insensitively)."""
    known = comments or {}
    key = find_column(known, column)
    return f" COMMENT {sql_string(known[key])}" if key is not None else ""


def _storage_format(storage_format: str | None) -> str:
    fmt = (storage_format or "parquet").strip()
    if not IDENTIFIER.fullmatch(fmt):
        raise EngineError(f"Invalid storage format {storage_format!r}")
    return fmt.lower()


def _check_partition_columns(table: str, columns: Mapping[str, str], partitioned_by: Sequence[str]) -> None:
    missing = [p for p in partitioned_by if find_column(columns, p) is None]
    if missing:
        raise EngineError(
            f"Cannot create table {table}: partition column(s) {', '.join(missing)} are not among its "
            f"columns ({', '.join(columns)})"
        )


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


def _partition_section(col_names: Iterable[str]) -> list[str]:
    """Partition columns from DESCRIBE TABLE's first column: the rows after `# Partition Information`
    (and its `# col_name` header) up to the next blank or `#` row."""
    partitions: list[str] = []
    inside = False
    for name in col_names:
        name = (name or "").strip()
        if name == "# Partition Information":
            inside = True
        elif inside and name.startswith("#") and not partitions:
            continue
        elif inside and (not name or name.startswith("#")):
            break
        elif inside:
            partitions.append(name)
    return partitions


def _parse_partition(spec: str) -> dict[str, str | None]:
    """`ds=2020-01-01/ts=2020-01-01 00%3A00%3A00` -> {"ds": "2020-01-01", "ts": "2020-01-01 00:00:00"}."""
    result: dict[str, str | None] = {}
    for part in spec.split("/"):
        key, _, value = part.partition("=")
        result[unquote(key)] = None if value == _HIVE_NULL_PARTITION else unquote(value)
    return result


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
