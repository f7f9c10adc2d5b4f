"""The session part of the Spark engine: one SparkSession, its statements, and its failures.

Every call to Spark anywhere in engine/ passes through `SparkStatements.errors`: Spark's
exceptions leave as `EngineError` (a `SparkSQLError` carrying Spark's error class), since the
layers above cannot import pyspark and so could not catch its exception types; and with
`MESH_SQL_TRACE` set each call is traced (the benchmark counts statements from it).

The engine (adapter.py) is three parts, each an object a reader can take alone: this session, the
catalog (catalog.py: schemas, tables, views, what they hold), which is given the session, and the
writes (writes.py), given the catalog. The session also registers what Python models return
(frames.py), since a temporary view lives in the session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pandas as pd
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import frames as python_frames
from mesh_dagster.engine.server_record import SERVER_ENV
from mesh_dagster.engine.session import quiet_pyspark_error_logs, to_engine_error
from mesh_dagster.engine.sql_text import quote_name

SQL_TRACE_ENV = "MESH_SQL_TRACE"  # a file path: every call to Spark is appended with its duration
# What Spark Connect raises for what only a classic session has: `sparkContext`, `_jvm`..., RDDs.
_CONNECT_LACKS = ("JVM_ATTRIBUTE_NOT_SUPPORTED", "NOT_IMPLEMENTED")


class SparkStatements:
    """The engine's session part: statements on one SparkSession, for classic and Spark Connect
    sessions alike (never `sparkContext`)."""

    def __init__(self, spark: SparkSession, *, files_here: bool = False):
        self.spark = spark
        # Spark runs on this machine (a local master: in this process, or the project's warm
        # server), so the `file:` paths it names are this machine's files.
        self.files_here = files_here
        self._trace = os.environ.get(SQL_TRACE_ENV) or None
        quiet_pyspark_error_logs()
        # The write strategies rely on it: in Spark's default STATIC mode, INSERT OVERWRITE into a
        # partitioned table first deletes every partition, not just the ones written.
        with self.errors("Cannot configure the Spark session"):
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")

    def execute(self, sql: str) -> None:
        """Run a statement. DDL/DML run eagerly; a bare SELECT is only analyzed."""
        with self.errors("Spark SQL failed", sql):
            self.spark.sql(sql)

    def fetchall(self, sql: str) -> list[tuple]:
        with self.errors("Spark query failed", sql):
            return [tuple(row) for row in self.spark.sql(sql).collect()]

    def fetchdf(self, sql: str) -> pd.DataFrame:
        with self.errors("Spark query failed", sql):
            return self.spark.sql(sql).toPandas()

    @staticmethod
    def unavailable(error: BaseException) -> str | None:
        """What a Python model asked of a Spark Connect session that only a classic one offers, and what
        to do; None for any other error. The project's warm server is Spark Connect: a model that needs
        `sparkContext` or RDDs runs with Spark in the command's own process."""
        if not isinstance(error, PySparkException) or error.getCondition() not in _CONNECT_LACKS:
            return None
        parameters = error.getMessageParameters() or {}
        feature = parameters.get("attr_name") or parameters.get("feature") or "a feature"
        return (f"`{feature}`, which Spark Connect (the project's warm Spark server) does not offer: run it with "
                f"Spark in the command's own process ({SERVER_ENV}=0, or `server: {{enabled: false}}` in the "
                f"gateway's connection)")

    def refresh(self, table: str) -> None:
        """Forget what this session cached of the table (its files, its location): another process
        may have rewritten it since."""
        with self.errors(f"Cannot refresh {table}"):
            self.spark.catalog.refreshTable(quote_name(table))

    def register_frames(self, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
        """One temporary view over what a Python model returned (PySpark or pandas DataFrames;
        nothing is collected to the driver); its name. The caller drops it (`drop_temp_view`)."""
        return python_frames.register_frames(self, frames, columns)

    def drop_temp_view(self, name: str) -> None:
        with self.errors(f"Cannot drop temporary view {name}"):
            self.spark.catalog.dropTempView(name)

    def set_session_settings(self, settings: Mapping[str, str]) -> dict[str, str | None]:
        previous: dict[str, str | None] = {}
        try:
            for key, value in settings.items():
                with self.errors(f"Spark refuses to set {key} while the session runs"):
                    previous[key] = self.spark.conf.get(key, None)
                    self.spark.conf.set(key, value)
        except EngineError:
            self.restore_session_settings(previous)
            raise
        return previous

    def restore_session_settings(self, previous: Mapping[str, str | None]) -> None:
        with self.errors("Cannot restore the Spark session's settings"):
            for key, value in previous.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)

    @property
    def is_classic(self) -> bool:
        """A classic (py4j) session, which reaches Hadoop's file system; else Spark Connect."""
        return not type(self.spark).__module__.startswith("pyspark.sql.connect")

    @contextmanager
    def errors(self, context: str, sql: str | None = None) -> Iterator[None]:
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
