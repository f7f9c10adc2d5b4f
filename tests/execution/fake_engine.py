"""An in-memory engine for fast tests of `execution/`: it records every call, in order, with its
arguments, and keeps just enough of a catalog (schemas, tables with their columns, views) to
answer what the evaluator asks. It implements `mesh_dagster.execution.ports.Engine`: one object is
its session, its catalog and its writes (each part is the engine itself), so every call lands in
one ordered record, and a test's subclass overrides just the operation it intercepts.

(tests/races/fake_engine.py is a different tool: a log shared between processes, for ordering
races; this one lives in one process and keeps full arguments.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Call:
    method: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


class FakeEngine:
    def __init__(self, query_columns: Mapping[str, str] | None = None):
        # Columns a table created from a query gets (the fake cannot analyse SQL).
        self.output = dict(query_columns or {"id": "int", "ds": "date", "value": "double"})
        self.calls: list[Call] = []
        self.schemas: set[str] = set()
        self.tables: dict[str, dict[str, str]] = {}
        self.views: dict[str, str] = {}
        self.frames: dict[str, list[pd.DataFrame]] = {}  # temporary views over Python models' output
        self.duplicates: list[tuple] = []  # what `upsert` reports as repeated keys (then it writes nothing)

    @property
    def session(self) -> FakeEngine:
        return self

    @property
    def catalog(self) -> FakeEngine:
        return self

    @property
    def writes(self) -> FakeEngine:
        return self

    def methods(self) -> list[str]:
        return [c.method for c in self.calls]

    def _record(self, method: str, name: str, **args: Any) -> None:
        self.calls.append(Call(method, name, args))

    # -- statements
    def execute(self, sql: str) -> None:
        self._record("execute", "", sql=sql)

    def fetchall(self, sql: str) -> list[tuple]:
        self._record("fetchall", "", sql=sql)
        return [(0,)]

    def fetchdf(self, sql: str) -> pd.DataFrame:
        self._record("fetchdf", "", sql=sql)
        return pd.DataFrame()

    # -- Python models (pandas frames only: the fake has no Spark)
    @property
    def spark(self) -> Any:
        return None

    def register_frames(self, frames: Iterable[Any], columns: Mapping[str, str]) -> str:
        from mesh_dagster.core.errors import EngineError

        kept = list(frames)
        for frame in kept:
            if not isinstance(frame, pd.DataFrame):
                raise EngineError(f"it returned a {type(frame).__name__}: return (or yield) PySpark or pandas "
                                  "DataFrames")
            if sorted(str(c).lower() for c in frame.columns) != sorted(columns):
                raise EngineError(f"its DataFrame has columns {list(frame.columns)} (declared columns: "
                                  f"{', '.join(columns)})")
        name = f"__mesh_tmp_frames_{len(self.frames)}"  # as the engine names temporary views
        self.frames[name] = kept
        self._record("register_frames", name, rows=sum(len(f) for f in kept), chunks=len(kept))
        return name

    def drop_temp_view(self, name: str) -> None:
        self._record("drop_temp_view", name)

    @staticmethod
    def unavailable(error: BaseException) -> str | None:
        return None  # the fake offers everything it offers

    def set_session_settings(self, settings: Mapping[str, str]) -> dict[str, str | None]:
        self._record("set_session_settings", "", settings=dict(settings))
        return {key: None for key in settings}

    def restore_session_settings(self, previous: Mapping[str, str | None]) -> None:
        self._record("restore_session_settings", "", previous=dict(previous))

    # -- catalog
    def create_schema(self, name: str) -> None:
        self._record("create_schema", name)
        self.schemas.add(name)

    def drop_schema(self, name: str, cascade: bool = True) -> None:
        self._record("drop_schema", name)
        self.schemas.discard(name)

    def table_exists(self, name: str) -> bool:
        return name in self.tables or name in self.views

    def list_objects(self, schema: str) -> dict[str, str]:
        objects = {**{n: "table" for n in self.tables}, **{n: "view" for n in self.views}}
        return {n.split(".", 1)[1]: kind for n, kind in objects.items() if n.split(".", 1)[0] == schema}

    def table_names(self, schema: str) -> set[str]:
        return {name.lower() for name in self.list_objects(schema)}

    def columns(self, name: str) -> dict[str, str]:
        self._record("columns", name)
        return dict(self.tables[name])

    def existing_columns(self, name: str) -> dict[str, str] | None:
        return self.columns(name) if name in self.tables else None

    def query_columns(self, query_sql: str) -> dict[str, str]:
        self._record("query_columns", "", sql=query_sql)
        return dict(self.output)

    def canonical_types(self, columns: Mapping[str, str]) -> dict[str, str]:
        return {c: t.lower() for c, t in columns.items()}

    def add_columns(self, table: str, columns: Mapping[str, str]) -> None:
        self._record("add_columns", table, columns=dict(columns))
        self.tables[table].update(columns)

    def retype_table(self, table: str, columns: Mapping[str, str], *, journal: Any = None) -> None:
        self._record("retype_table", table, columns=dict(columns))
        self.tables[table] = dict(columns)

    # -- physical objects and writes
    def _require_table(self, table: str) -> None:
        assert table in self.tables, f"{table} written before it was created"
        assert table.split(".", 1)[0] in self.schemas, f"{table} created before its schema"

    def create_table(self, table: str, query_sql: str | None, partitioned_by: Sequence[str] = (),
                     storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                     comments: Mapping[str, str] | None = None) -> dict[str, str]:
        self._record("create_table", table, query=query_sql, partitioned_by=list(partitioned_by), columns=columns)
        self.tables.setdefault(table, dict(columns) if columns else dict(self.output))
        self._require_table(table)
        return dict(self.tables[table])

    def replace_table(self, table: str, query_sql: str, partitioned_by: Sequence[str] = (),
                      storage_format: str = "parquet", columns: Mapping[str, str] | None = None,
                      comments: Mapping[str, str] | None = None, *, journal: Any = None,
                      reads_self: bool = False,
                      produced: Mapping[str, str] | None = None) -> tuple[dict[str, str], bool]:
        self._record("replace_table", table, query=query_sql, partitioned_by=list(partitioned_by), reads_self=reads_self,
                     produced=produced)
        before = self.tables.get(table)
        self.tables[table] = dict(columns) if columns else dict(self.output)
        return dict(self.tables[table]), before != self.tables[table]

    def insert_overwrite_interval(self, table: str, query_sql: str, time_column: str, low_sql: str,
                                  high_sql: str, *, journal: Any = None, reads_self: bool = False,
                                  columns: Any = None) -> None:
        self._require_table(table)
        self._record("insert_overwrite_interval", table, query=query_sql, time_column=time_column, low=low_sql,
                     high=high_sql, reads_self=reads_self)

    def rewrite_table(self, table: str, query_sql: str, *, journal: Any = None) -> None:
        self._require_table(table)
        self._record("rewrite_table", table, query=query_sql)

    def stage(self, table: str, query_sql: str) -> str:
        staging = f"{table}__staged{sum(c.method == 'stage' for c in self.calls)}"
        self._record("stage", staging, table=table, query=query_sql)
        self.tables[staging] = dict(self.tables.get(table) or self.output)
        return staging

    def upsert(self, table: str, query_sql: str, upsert: Any, duplicates_shown: int = 5, *,
               journal: Any = None) -> list[tuple]:
        self._require_table(table)
        self._record("upsert", table, query=query_sql, upsert=upsert, duplicates_shown=duplicates_shown)
        return list(self.duplicates[:duplicates_shown])

    def overwrite_partitions(self, table: str, query_sql: str, *, journal: Any = None,
                             reads_self: bool = False) -> None:
        self._require_table(table)
        self._record("overwrite_partitions", table, query=query_sql)

    def append(self, table: str, query_sql: str, *, journal: Any = None) -> None:
        self._require_table(table)
        self._record("append", table, query=query_sql)

    def load_seed(self, table: str, df: pd.DataFrame, columns: Mapping[str, str],
                  comments: Mapping[str, str] | None = None, *, journal: Any = None,
                  batch_size: int | None = None) -> tuple[dict[str, str], bool]:
        self._record("load_seed", table, rows=len(df), columns=dict(columns))
        before = self.tables.get(table)
        self.tables[table] = dict(columns)
        return dict(columns), before != self.tables[table]

    def create_view(self, view: str, select_sql: str, comments: Mapping[str, str] | None = None) -> None:
        self._record("create_view", view, query=select_sql)
        self.views[view] = select_sql

    def drop_view(self, name: str) -> None:
        self._record("drop_view", name)
        self.views.pop(name, None)

    def drop_table(self, name: str) -> None:
        self._record("drop_table", name)
        self.tables.pop(name, None)

    # -- the journal of writes (the fake journals nothing, so there is never anything to finish)
    def finish(self, payload: dict[str, Any]) -> bool:
        if payload.get("operation") == "clear":  # the one journaled write the scheduler itself makes
            self.execute(f"TRUNCATE TABLE {payload['table']}")
            return True
        raise AssertionError(f"the fake engine journals no write, yet was asked to finish {payload}")

    def discard(self, payload: dict[str, Any]) -> None:
        self._record("discard", payload.get("table", ""))

    def table_location(self, table: str) -> str | None:
        return f"/warehouse/{table}" if table in self.tables else None

    def drop_locations(self, locations: Iterable[str]) -> None:
        self._record("drop_locations", "", locations=list(locations))
