"""Where Spark and the state store are: `gateways.<name>.connection`, `state_connection`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

Loc = tuple[str | int, ...]  # a key's path in config.yaml: keys and list indexes
MESH_DIR = ".mesh"


class Strict(BaseModel):
    """A config section: an unknown key is an error naming it."""

    model_config = ConfigDict(extra="forbid")


class MetastoreConfig(Strict):
    """Where the Hive catalog keeps its table definitions.

    `derby` (the default) is an embedded database inside the project's `.mesh/`: nothing to
    install, but one process at a time (hence the shared Connect server of `mesh spark start`).
    `postgres` is a catalog every process can open at once: the CLI, Dagster runs and colleagues
    each start their own Spark session on it. Spark reaches it through the PostgreSQL JDBC driver
    (Debian's `libpostgresql-jdbc-java`, or `driver_jar`).
    """

    type: Literal["derby", "postgres"] = "derby"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "mesh_metastore"
    user: str = "postgres"
    # A secret: kept out of reprs and dumps (`mesh info` prints the connection).
    password: str | None = Field(default=None, repr=False, exclude=True)
    driver_jar: str | None = None  # the JDBC driver jar; default: the Debian package's

    @property
    def is_shared(self) -> bool:
        """Several processes may open it at once."""
        return self.type != "derby"


class SparkServerConfig(Strict):
    """The project's warm Spark: on a local master with the embedded metastore, every command reaches
    Spark through one Spark Connect server of the project, started by the first command that needs
    it and kept warm between commands, so that a command does not pay a JVM start.

    `enabled: false` (or `MESH_SPARK_SERVER=0`) runs Spark in each command's own process instead,
    for one-shot scripts and for Python models that need what Spark Connect lacks (`sparkContext`,
    RDDs). `idle_minutes`: the server stops by itself once no client used it for that long.
    """

    enabled: bool = True
    idle_minutes: float = Field(default=30.0, gt=0)


class SparkConnectionConfig(Strict):
    """How to reach Spark: embedded `local[*]` (default), a cluster `master`, or Spark Connect."""

    type: Literal["spark"] = "spark"
    master: str = "local[*]"
    remote: str | None = None  # Spark Connect: used instead of `master` (the scaffold says so)
    config: dict[str, Any] = Field(default_factory=dict)
    catalog: str | None = None
    # Models (and batches) an apply or a run evaluates at once on the one Spark session; SQLMesh's Spark default.
    concurrent_tasks: int = Field(default=4, ge=1)
    # The Hive catalog of sessions mesh starts itself (`master`); a `remote` server has its own.
    metastore: MetastoreConfig | None = None
    # Where tables' files live: a path (or URI) that every process and every executor sees.
    warehouse: str | None = None
    # Seconds to wait for a cluster master, the metastore database or a Connect server before
    # saying it is unreachable (Spark alone waits a minute or more, silently).
    connect_timeout: float = Field(default=10.0, gt=0)
    # The project's warm Spark server (local master, embedded metastore only).
    server: SparkServerConfig = Field(default_factory=SparkServerConfig)

    @property
    def is_local(self) -> bool:
        return self.remote is None and self.master.startswith("local")

    @property
    def has_server(self) -> bool:
        """Whether the project's warm Spark server serves this connection: a local master on the
        embedded Derby metastore, which one process at a time may open. A cluster `master`, a
        `remote` server or a shared metastore let every process open its own session."""
        return self.is_local and not self.shared_catalog

    @property
    def shared_catalog(self) -> bool:
        """Whether every process may open its own session on the catalog (no Derby to share)."""
        return self.remote is None and self.metastore is not None and self.metastore.is_shared

    @property
    def remote_address(self) -> tuple[str, int]:
        """(host, port) of the Spark Connect server in `remote`."""
        assert self.remote is not None
        return connect_address(self.remote)

    @field_validator("remote")
    @classmethod
    def _remote_is_a_connect_url(cls, value: str | None) -> str | None:
        if value is not None:
            connect_address(value)
        return value


CONNECT_DEFAULT_PORT = 15002


def connect_address(url: str) -> tuple[str, int]:
    """`sc://host:port/;params` -> (host, port), Spark Connect's default port when none is given.

    The error never repeats the URL: its parameters may hold a token.
    """
    parsed = urlparse(url.split(";", 1)[0])
    try:
        port = parsed.port
    except ValueError:
        raise ValueError("the port of a Spark Connect URL is a number (sc://host:port)") from None
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ValueError("a Spark Connect URL looks like sc://host:port")
    return parsed.hostname, port or CONNECT_DEFAULT_PORT


class StateConnectionConfig(Strict):
    """Where plans, snapshots, environments and intervals live. Never Spark.

    The separate Postgres fields are written into the URL escaped: a password holding `@`, `/`,
    `#` or `%` reaches the server as written (unescaped, `p@ss` would make `ss` the host). The
    password, and `url` that may hold one, are kept out of reprs.
    """

    type: Literal["sqlite", "postgres"] = "sqlite"
    database: str | None = None
    host: str = "127.0.0.1"
    port: int = 5432
    user: str | None = None
    password: str | None = Field(default=None, repr=False)
    url: str | None = Field(default=None, repr=False)

    def to_url(self, project_dir: Path) -> str:
        if self.url:
            return self.url
        if self.type == "sqlite":
            db = Path(self.database or f"{MESH_DIR}/state.db")
            if not db.is_absolute():
                db = project_dir / db
            return f"sqlite:///{db}"
        auth = quote(self.user or "postgres", safe="")
        if self.password:
            auth += f":{quote(self.password, safe='')}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql+psycopg://{auth}@{host}:{self.port}/{quote(self.database or 'postgres', safe='')}"


class GatewayConfig(Strict):
    connection: SparkConnectionConfig = Field(default_factory=SparkConnectionConfig)
    state_connection: StateConnectionConfig | None = None
    variables: dict[str, Any] = Field(default_factory=dict)


_POSTGRES_ONLY = ("host", "port", "user", "password")


def state_connection_refusals(conn: StateConnectionConfig, loc: Loc) -> list[tuple[Loc, str]]:
    given = conn.model_fields_set
    if conn.url is not None:
        others = sorted(given - {"url"})
        if others:
            return [(loc + (others[0],), "is ignored when `url` is set: give either `url` or the separate fields")]
        return []
    if conn.type == "sqlite":
        for key in _POSTGRES_ONLY:
            if key in given:
                return [(loc + (key,), "applies to `type: postgres` only (a sqlite state store is a file: `database`)")]
    return []


# Spark settings that `metastore:` / `warehouse:` set (engine/ writes them): giving both would leave one
# silently unused.
METASTORE_URL_SETTING = "spark.hadoop.javax.jdo.option.ConnectionURL"
WAREHOUSE_SETTING = "spark.sql.warehouse.dir"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


def connection_refusals(conn: SparkConnectionConfig, loc: Loc) -> list[tuple[Loc, str]]:
    given = conn.model_fields_set
    if "server" in given and not conn.has_server:
        return [(loc + ("server",), "applies to a local `master` on the embedded Derby metastore only: with a "
                                    "cluster `master`, a `remote` server or a shared metastore every process opens "
                                    "its own session, and there is no project server to keep warm")]
    if conn.remote is not None:
        for key in ("metastore", "warehouse"):
            if key in given:
                return [(loc + (key,), "applies to sessions mesh starts (`master`); the Spark Connect server "
                                       "of `remote` uses its own catalog and warehouse")]
    if conn.metastore is not None:
        if METASTORE_URL_SETTING in conn.config:
            return [(loc + ("config", METASTORE_URL_SETTING), "clashes with `metastore`: give one of them")]
        meta_given = conn.metastore.model_fields_set
        if conn.metastore.type == "derby":
            extra = sorted(meta_given - {"type"})
            if extra:
                return [(loc + ("metastore", extra[0]), "applies to `type: postgres` only (the embedded "
                                                         "Derby metastore lives in the project's .mesh/)")]
        elif conn.metastore.driver_jar is not None and not conn.metastore.driver_jar.strip():
            return [(loc + ("metastore", "driver_jar"), "must be the path of the PostgreSQL JDBC driver jar")]
        elif conn.warehouse is None and WAREHOUSE_SETTING not in conn.config:
            return [(loc + ("metastore",), "a shared metastore needs `warehouse:` beside it, a path every process "
                                           "and executor sees: tables one process creates, the others read")]
    if conn.warehouse is not None:
        if WAREHOUSE_SETTING in conn.config:
            return [(loc + ("config", WAREHOUSE_SETTING), "clashes with `warehouse`: give one of them")]
        if not (_URI.match(conn.warehouse) or Path(conn.warehouse).expanduser().is_absolute()):
            return [(loc + ("warehouse",), f"'{conn.warehouse}' is relative: give an absolute path (or a URI "
                                           f"such as hdfs://...) that every process and executor sees")]
    return []
