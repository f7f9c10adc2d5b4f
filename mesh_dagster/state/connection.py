"""The state store's one connection: the URL, the SQLAlchemy engine, the schema, and the
transaction helper every part of the store (snapshots, environments, intervals, plans, locks, the
journal) writes through.

SQLite (one file under the project's `.mesh/`) for a single machine, Postgres for teams. Several
processes share it at once — the CLI beside Dagster's webserver, daemon and runs — so:

- every write is one transaction (`Database.write`); on SQLite writers start with `BEGIN IMMEDIATE`
  (the write lock is taken up front, so a reader never has to upgrade and fail) and wait on a busy
  timeout, and the file is in WAL mode so readers never block writers;
- on Postgres, writes that decide on what they read (promote, finalize, lock) first take a
  transaction-scoped advisory lock keyed by the record (`Database.serialize`), so even a record
  that does not exist yet cannot be created twice.

Every database failure reaches the caller as one `StateError` line naming the store and what
failed (connect, read, write); a SQLite file is created atomically, so a 0-byte `state.db` is never
ours and is refused instead of being initialised over.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Table, create_engine, event, func, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from mesh_dagster.core.config.redaction import redact_url
from mesh_dagster.core.errors import StateError
from mesh_dagster.state import schema
from mesh_dagster.state.migrations import (
    MIGRATIONS,
    Migration,
    apply_migrations,
    check_compatible,
    stamp,
    stored_schema_version,
)

# Ids per `IN (...)` query: one round trip per batch, far below every driver's parameter limit.
BATCH_SIZE = 500
SQLITE_BUSY_TIMEOUT_S = 30
POSTGRES_CONNECT_TIMEOUT_S = 10

T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


def or_now(ms: int | None) -> int:
    return now_ms() if ms is None else ms


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Database:
    """One state store's engine and transactions, shared by the parts of `StateStore`.

    Safe to share between threads (the engine pools connections; each transaction has its own).
    """

    def __init__(self, url: str, *, check_version: bool = True):
        """Connect, create the tables of an empty database, and check the schema version.

        `check_version=False` is for `mesh migrate`, which must open an out-of-date store.
        """
        self._url = _parse_url(url)
        self.url = self._url.render_as_string(hide_password=True)
        if self._url.get_backend_name() == "sqlite" and not _is_memory_sqlite(self._url):
            _prepare_sqlite_file(Path(self._url.database or ""), self.url)
        self._engine = _create_engine(self._url)
        self.is_postgres = self._engine.dialect.name == "postgresql"
        try:
            self._check_reachable()
            self.schema_version = self._initialize()
            if check_version:
                check_compatible(self.schema_version)
        except BaseException:
            self._engine.dispose()
            raise

    def dispose(self) -> None:
        self._engine.dispose()

    def migrate(self, target: int = schema.SCHEMA_VERSION,
                migrations: Mapping[int, Migration] = MIGRATIONS) -> list[int]:
        """Upgrade the tables to `target` in one transaction; returns the versions applied."""
        with self.write() as conn:
            self.serialize(conn, "schema")
            stored = stored_schema_version(conn)
            applied = apply_migrations(conn, target if stored is None else stored, target, migrations)
        self.schema_version = target
        return applied

    @contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as e:
            raise StateError(f"Cannot read the state store at {self.url}: {_reason(e)}") from e

    @contextmanager
    def write(self, what: str = "write to") -> Iterator[Connection]:
        """One transaction; a database failure becomes one line (nothing of it was written)."""
        try:
            with self._engine.connect() as conn:
                conn.execution_options(mesh_write=True)
                with conn.begin():
                    yield conn
        except DBAPIError as e:
            raise StateError(f"Cannot {what} the state store at {self.url}: {_reason(e)}") from e

    def serialize(self, conn: Connection, key: str) -> None:
        """Postgres: hold a transaction-scoped advisory lock on `key` (SQLite writers are
        already serialised by `BEGIN IMMEDIATE`)."""
        if self.is_postgres:
            conn.execute(select(func.pg_advisory_xact_lock(_advisory_key(key))))

    def insert(self, table: Table) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        if self.is_postgres:  # imported here: a SQLite state (every local command) never needs it, 30 ms
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        return sqlite.insert(table)

    def upsert(
        self, conn: Connection, table: Table, row: dict[str, Any], keys: list[str], keep: Sequence[str] = ()
    ) -> None:
        stmt = self.insert(table).values(**row)
        changes = {c: stmt.excluded[c] for c in row if c not in keys and c not in keep}
        conn.execute(stmt.on_conflict_do_update(index_elements=[table.c[k] for k in keys], set_=changes))

    def _check_reachable(self) -> None:
        try:
            with self._engine.connect():
                pass
        except DBAPIError as e:
            raise StateError(f"Cannot connect to the state store at {self.url}: {_reason(e)}{self._hint()}") from None

    def _hint(self) -> str:
        if self._url.get_backend_name() != "sqlite" or _is_memory_sqlite(self._url):
            return ""
        return _read_only_hint(Path(self._url.database or "").parent)

    def _initialize(self) -> int:
        """The stored schema version; an empty database (a new Postgres one) gets the tables."""
        with self.read() as conn:
            stored = stored_schema_version(conn)
        if stored is not None:
            return stored
        with self.write("initialise") as conn:
            self.serialize(conn, "schema")
            stored = stored_schema_version(conn)
            if stored is None:
                _create_tables(conn)
                stored = schema.SCHEMA_VERSION
        return stored


# ---------------------------------------------------------------------- engine


def _parse_url(url: str) -> URL:
    """The URL, or a refusal that shows it with its password hidden, all of it: an unescaped `@`
    in a password would end it early for the parser (and put the rest in the host), so a server
    URL with two is refused rather than guessed at."""
    shown = redact_url(url)
    if not url.startswith("sqlite") and url.count("@") > 1:
        raise StateError(f"Invalid state store URL '{shown}': its user or password holds an '@'; escape it as "
                         "%40 ('/' as %2F, '#' as %23, '%' as %25) or give `user` and `password` as separate "
                         "fields of state_connection")
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise StateError(f"Invalid state store URL '{shown}'") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise StateError(
            f"Unsupported state store URL '{parsed.render_as_string(hide_password=True)}': "
            "use sqlite:///path or postgresql+psycopg://…"
        )
    return parsed


def _is_memory_sqlite(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url)


def _create_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _create_sqlite_engine(url)
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = POSTGRES_CONNECT_TIMEOUT_S
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except NoSuchModuleError as e:
        raise StateError(f"Cannot use the state store at {url.render_as_string(hide_password=True)}: {e}") from None


def _prepare_sqlite_file(path: Path, shown: str) -> None:
    """Create a missing store atomically; refuse a 0-byte one.

    A new store is built in a temporary file and linked into place complete, so a `state.db`
    that mesh wrote is never empty — not even after a crash during the very first run. A 0-byte
    `state.db` therefore comes from outside (truncated by a full disk, a failed copy, `touch`,
    `> state.db`): initialising it would silently forget every environment and interval while
    the warehouse still holds their tables, so it is refused. An absent file is the first run.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StateError(f"Cannot connect to the state store at {shown}: cannot create {path.parent}: "
                         f"{e.strerror or e}") from None
    if path.is_file() and path.stat().st_size == 0:
        raise StateError(
            f"The state store at {shown} is an empty (0-byte) file: it was truncated or replaced (mesh never "
            "leaves one), and starting over would forget every environment the warehouse still holds. "
            "Restore it from a backup, or delete it if this project was never applied."
        )
    if not path.exists():
        _create_sqlite_file(path, shown)


def _create_sqlite_file(path: Path, shown: str) -> None:
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        engine = create_engine(f"sqlite:///{temp}")
        try:
            with engine.begin() as conn:
                _create_tables(conn)
        finally:
            engine.dispose()
        try:
            os.link(temp, path)  # fails if another process created it first: theirs is as good
        except FileExistsError:
            pass
        except OSError:  # no hard links on this filesystem
            if not path.exists():
                os.replace(temp, path)
    except (OSError, DBAPIError) as e:
        reason = _reason(e) if isinstance(e, DBAPIError) else (e.strerror or str(e))
        raise StateError(f"Cannot create the state store at {shown}: {reason}{_read_only_hint(path.parent)}") from None
    finally:
        temp.unlink(missing_ok=True)


def _read_only_hint(folder: Path) -> str:
    """SQLite creates files beside the store (the store itself, `-wal`, `-shm`): say when it cannot."""
    return "" if os.access(folder, os.W_OK) else f" (the folder {folder} is read-only)"


def _create_tables(conn: Connection) -> None:
    schema.metadata.create_all(conn)
    stamp(conn, schema.SCHEMA_VERSION)


def _create_sqlite_engine(url: URL) -> Engine:
    memory = _is_memory_sqlite(url)
    if memory:
        # One shared connection, or every checkout would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # We emit BEGIN ourselves (below): the driver's own handling skips it for SELECT and
        # DDL, which would break read consistency and transactional migrations.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        if not memory:
            try:
                cursor.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as e:  # a read-only store can still be read
                if "readonly" not in str(e):
                    raise
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("mesh_write") else "BEGIN")

    return engine


def _reason(error: DBAPIError) -> str:
    """The driver's message, first line only (psycopg appends hints on further lines)."""
    message = str(error.orig if error.orig is not None else error).strip()
    return message.splitlines()[0] if message else type(error.orig or error).__name__


def _advisory_key(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"mesh_dagster:{key}".encode(), digest_size=8).digest(), "big", signed=True)
