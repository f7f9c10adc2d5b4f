"""What an evaluation knows of tables' columns, so that Spark analyses a query only when something
it reads may have changed since the analysis was last made (issue 36).

A query's analysis (its output columns: what a migration check compares a kept table with, what a
full rewrite lays its table out by) is a function of the SQL text, of the columns of the tables it
reads and of Spark's settings. So an answer is remembered under the digest of exactly those
inputs (`inputs`): the SQL, the snapshot (its session properties), the project's Spark settings and
pyspark's version, and for each table the SQL reads, its columns (its *token*):

- a table of ours (the physical table of a snapshot in play): the columns mesh last left it with,
  learned in this evaluation (its migration check, its write) or else remembered in the state store
  (state/shapes.py) by the evaluation that wrote it. Every write that may change a table's columns
  forgets them first, in the store too (`changing`), so a write killed halfway leaves them unknown,
  never wrong;
- a view of ours (a VIEW model's physical view): its own SQL and the tokens of what it reads, from
  which its columns follow;
- any other table (an external model, a table a query names itself), and one of ours whose columns
  are unknown (never remembered, or a CUSTOM model's, whose materialization may change them behind
  our back): its columns read from Spark, once per evaluation.

The daily run finds every input as the previous run left it: its migration checks and full rewrites
ask Spark for no analysis. A parent whose columns changed (a migration, a forward-only change, a new
layout) or an external table that did changes the digest, and the analysis is made again.

Not seen: a table of ours whose columns someone changed by hand, read by a query while mesh does not
write that table. Its own next write reads its real columns (its migration check, or the full
rewrite's look at its table) and remembers them; its readers are analysed again from then on.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from importlib import metadata

import sqlglot
from sqlglot import exp

from mesh_dagster.core.config.names import TEMP_PREFIX
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.execution.ports import Engine, ShapeState
from mesh_dagster.state.shapes import TableShape

Columns = dict[str, str]


def _pyspark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return ""


_SPARK_VERSION = _pyspark_version()


class Shapes:
    """The columns of the tables one evaluation reads and writes, and the analyses of its queries.
    Safe to share between the evaluation's threads."""

    def __init__(self, snapshots: Mapping[str, Snapshot], engine: Callable[[], Engine], store: ShapeState | None,
                 render: Callable[[Snapshot], str], settings: Mapping[str, object]) -> None:
        """`render`: a snapshot's query as it is created (a view's definition); `settings`: the
        Spark settings the project's connection gives every session."""
        self._ours = {s.table_name.lower(): s for s in snapshots.values() if not s.model.kind.is_symbolic}
        self._engine, self._store, self._render = engine, store, render
        self._settings = json.dumps(sorted((str(k), str(v)) for k, v in settings.items()))
        self._known: dict[str, TableShape] | None = None  # by table, loaded from the store on first use
        self._read: dict[str, Columns | None] = {}  # columns read from Spark in this evaluation
        self._answers: dict[str, Columns] = {}  # analyses made in this evaluation, by inputs
        self._views: dict[str, str] = {}  # views' definitions, rendered in this evaluation
        # Tables' changes seen in this evaluation (a migration, a new layout, a view redefined), by table.
        self._epochs: dict[str, int] = {}
        self._lock = threading.RLock()

    # -- what is known ---------------------------------------------------------------------------

    def _shapes(self) -> dict[str, TableShape]:
        with self._lock:
            if self._known is None:
                stored = self._store.table_shapes(s.table_name for s in self._ours.values()) if self._store else {}
                self._known = dict(stored)
            return self._known

    def columns(self, snapshot: Snapshot) -> Columns | None:
        """The columns mesh last left the snapshot's table with; None when unknown."""
        if snapshot.model.kind.custom is not None:
            return None  # its materialization may change them: never trusted
        shape = self._shapes().get(snapshot.table_name)
        return dict(shape.columns) if shape is not None and shape.columns is not None else None

    def output(self, purpose: str, snapshot: Snapshot, sql: str,
               analyse: Callable[[], Columns]) -> tuple[Columns, str | None]:
        """The columns `analyse` answers for `sql` (what `purpose` asks of it), and the digest of its
        inputs (None: some input is unknown, nothing is remembered): the answer remembered under
        that digest if there is one, else `analyse()`'s."""
        inputs = self.inputs(purpose, snapshot, sql)
        if inputs is not None:
            with self._lock:
                answered = self._answers.get(inputs)
            shape = self._shapes().get(snapshot.table_name)
            if answered is None and shape is not None and shape.inputs == inputs and shape.output is not None:
                answered = dict(shape.output)
            if answered is not None:
                return dict(answered), inputs
        answer = analyse()
        if inputs is not None:
            with self._lock:
                self._answers[inputs] = dict(answer)
        return answer, inputs

    # -- what changes -----------------------------------------------------------------------------

    def changing(self, snapshot: Snapshot, expected: Mapping[str, str] | None = None) -> None:
        """The snapshot's table is about to change: forget its columns, here and in the store, before
        it does. `expected`: a write that lays the table out as those columns (if it does not have
        them already, which it then tells `learned`): forgotten only where they are not the ones known."""
        table = snapshot.table_name
        if expected is not None:
            known = self.columns(snapshot)
            if known is not None and _same(known, expected):
                return
        with self._lock:
            dropped = self._shapes().pop(table, None)
            if expected is None:
                self._epochs[table] = self._epochs.get(table, 0) + 1
        if dropped is not None and self._store is not None:
            self._store.forget([table])

    def learned(self, snapshot: Snapshot, columns: Mapping[str, str] | None, inputs: str | None = None,
                output: Mapping[str, str] | None = None, *, relaid: bool = False) -> None:
        """The snapshot's table has `columns` now (None: unknown; `relaid`: a write has just laid it out
        anew), and its query, under `inputs`, outputs `output`: kept here, and in the store when it
        differs from what the store had."""
        table = snapshot.table_name
        if relaid:
            with self._lock:
                self._epochs[table] = self._epochs.get(table, 0) + 1
        if snapshot.model.kind.custom is not None:
            return
        shape = TableShape(table, dict(columns) if columns is not None else None, inputs,
                           dict(output) if output is not None else None)
        if inputs is None:  # an earlier analysis under other inputs would still be right: keep it
            earlier = self._shapes().get(table)
            if earlier is not None and earlier.inputs is not None:
                shape = TableShape(shape.table, shape.columns, earlier.inputs, earlier.output)
        with self._lock:
            before = self._shapes().get(table)
            self._shapes()[table] = shape
        if before != shape and self._store is not None:
            self._store.remember(shape)

    def seen(self, snapshot: Snapshot, columns: Mapping[str, str]) -> None:
        """The snapshot's table was just read to have `columns` (its migration check): what this
        evaluation goes by from now on (a query reading the table itself is analysed on them)."""
        table = snapshot.table_name
        with self._lock:
            known = self._shapes().get(table)
            if known is not None and known.columns is not None and _same(known.columns, columns):
                return
            self._epochs[table] = self._epochs.get(table, 0) + 1
            inputs, output = (known.inputs, known.output) if known is not None else (None, None)
            self._shapes()[table] = TableShape(table, dict(columns), inputs, output)
        if self._store is not None and known is not None:
            self._store.forget([table])  # not what the store says: `learned` keeps the truth once checked

    def defined(self, snapshot: Snapshot) -> None:
        """The snapshot's view was (re)defined: what reads it may see other columns."""
        with self._lock:
            self._epochs[snapshot.table_name] = self._epochs.get(snapshot.table_name, 0) + 1

    def stamp(self, sql: str) -> str | None:
        """What a view defined as `sql` saw of its tables in this evaluation: equal stamps, equal
        definitions. None when it reads a table not of ours, or a CUSTOM model's (which may change
        without this evaluation knowing)."""
        tables = tables_read(sql)
        if tables is None or any(t not in self._ours or self._ours[t].model.kind.custom is not None for t in tables):
            return None
        with self._lock:
            return json.dumps([sql, [[t, self._epochs.get(t, 0)] for t in sorted(tables)]])

    # -- the digest -------------------------------------------------------------------------------

    def inputs(self, purpose: str, snapshot: Snapshot, sql: str) -> str | None:
        """The digest of what an analysis of `sql` depends on; None when the columns of a table it
        reads cannot be known (Spark cannot look it up)."""
        tokens = self._tokens(sql, True, ())
        if tokens is None:
            return None
        parts = [purpose, snapshot.identifier, sql, self._settings, _SPARK_VERSION, tokens]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]

    def _tokens(self, sql: str, read: bool, within: tuple[str, ...]) -> list[list[str]] | None:
        tables = tables_read(sql)
        if tables is None:
            return None
        tokens = []
        for table in sorted(tables):
            token = self._token(table, read, within)
            if token is None:
                return None
            tokens.append([table, token])
        return tokens

    def _token(self, table: str, read: bool, within: tuple[str, ...]) -> str | None:
        """What stands for a table's columns in a digest (see the module's docstring). A temporary
        view (a Python model's output) is new in every evaluation: it has none, the query is analysed."""
        if table.rpartition(".")[2].startswith(TEMP_PREFIX):
            return None
        snapshot = self._ours.get(table)
        if snapshot is not None and snapshot.model.kind.is_view:
            if table in within:
                return None
            sql = self._view_sql(snapshot)
            inner = self._tokens(sql, read, (*within, table))
            return None if inner is None else json.dumps(["view", sql, inner])
        columns = self.columns(snapshot) if snapshot is not None else None
        if columns is None and read:
            columns = self._read_columns(table)
        return None if columns is None else json.dumps(_normal(columns))

    def _view_sql(self, snapshot: Snapshot) -> str:
        """A view's definition, rendered once per evaluation (it is the same every time)."""
        with self._lock:
            sql = self._views.get(snapshot.table_name)
        if sql is None:
            sql = self._render(snapshot)
            with self._lock:
                self._views[snapshot.table_name] = sql
        return sql

    def _read_columns(self, table: str) -> Columns | None:
        with self._lock:
            if table in self._read:
                return self._read[table]
        try:
            columns = self._engine().catalog.existing_columns(table)
        except MeshError:  # a name Spark cannot look up (a path, a function): unknown
            columns = None
        with self._lock:
            self._read[table] = columns
        return columns


def tables_read(sql: str) -> set[str] | None:
    """The lowercase names of the tables a query reads (CTEs left out); None when it cannot be parsed."""
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except sqlglot.errors.SqlglotError:
        return None
    if tree is None:
        return None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = set()
    for table in tree.find_all(exp.Table):
        parts = [p for p in (table.catalog, table.db, table.name) if p]
        name = ".".join(parts).lower()
        if name and not (len(parts) == 1 and name in ctes):
            names.add(name)
    return names


def _normal(columns: Mapping[str, str]) -> list[list[str]]:
    """Columns as compared: in order, names and types in one case and spacing (Spark's spelling
    and a declared one may differ there only)."""
    return [[name.lower(), "".join(kind.lower().split())] for name, kind in columns.items()]


def _same(one: Mapping[str, str], other: Mapping[str, str]) -> bool:
    return _normal(one) == _normal(other)

