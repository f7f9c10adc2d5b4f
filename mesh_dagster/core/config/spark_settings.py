"""Spark settings given outside config.yaml (Dagster's `PySparkResource.spark_config`), merged
with a gateway's `connection`.

Keys are Spark's own: `spark.master` and `spark.remote` say where Spark is (the connection's
`master` and `remote`), every other key (`spark.jars.packages`, `spark.executor.memory`,
`spark.sql.shuffle.partitions`...) joins the connection's `config`. Two sources of one setting are
a question nobody should have to answer by reading code: a key both set, with different values,
is refused, naming both values.

On the embedded default (a `local` master with the Derby metastore inside the project) a run
works on the project's shared Spark Connect server, which `mesh ui` (or the first run) started
from config.yaml alone: only a session's settings (`spark.sql.*`, less Spark's static ones) can
still apply to it. Any other setting is refused rather than silently ignored; it belongs in
config.yaml, which the server's start reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_dagster.core.config.connections import Loc, SparkConnectionConfig
from mesh_dagster.core.config.redaction import HIDDEN, is_secret_name, redact_text

MASTER = "spark.master"
REMOTE = "spark.remote"
# `spark.sql.*` settings that Spark fixes when it starts (its StaticSQLConf): a session cannot change them.
_STATIC_SQL = ("spark.sql.warehouse.dir", "spark.sql.catalogImplementation", "spark.sql.extensions",
               "spark.sql.hive.metastore.", "spark.sql.globalTempDatabase", "spark.sql.queryExecutionListeners",
               "spark.sql.streaming.streamingQueryListeners", "spark.sql.legacy.sessionInitWithConfigDefaults",
               "spark.sql.ui.", "spark.sql.event.truncate.length", "spark.sql.connect.")


def setting_text(value: Any) -> str:
    """A setting as Spark reads it: booleans lower-case, everything else as text."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def session_setting(key: str) -> bool:
    """Whether a running Spark (a shared Connect server) still lets a new session set `key`."""
    return key.startswith("spark.sql.") and not key.startswith(_STATIC_SQL)


def spark_settings_refusal(conn: SparkConnectionConfig, settings: Mapping[str, Any],
                           source: str) -> tuple[Loc, str] | None:
    """Why `settings` (from `source`) cannot merge with `conn`: the connection key it contradicts
    (a path under the gateway's `connection`) and a one-line message naming both values."""
    for key, value in settings.items():
        refusal = _conflict(conn, key, setting_text(value), source)
        if refusal is not None:
            return refusal
    merged = with_spark_settings(conn, settings)
    if merged.is_local and not merged.shared_catalog:
        for key, value in settings.items():
            if not session_setting(key) and not _already(conn, key, setting_text(value)):
                return ("config",), (
                    f"{source} sets {key}={_shown(key, value)}, which applies only when Spark starts, but with "
                    f"a local master and the embedded Derby metastore runs use the project's shared Spark Connect "
                    f"server, started from config.yaml alone (by `mesh ui` or the first run): set it in the "
                    f"gateway's connection `config:` instead (only spark.sql.* session settings apply per run)")
    return None


def with_spark_settings(conn: SparkConnectionConfig, settings: Mapping[str, Any]) -> SparkConnectionConfig:
    """`conn` with `settings` merged in (checked first by `spark_settings_refusal`)."""
    update: dict[str, Any] = {}
    config = dict(conn.config)
    for key, value in settings.items():
        if key == MASTER:
            update["master"] = setting_text(value)
        elif key == REMOTE:
            update["remote"] = setting_text(value)
        else:
            config[key] = setting_text(value)
    return conn.model_copy(update={**update, "config": config})


def _conflict(conn: SparkConnectionConfig, key: str, value: str, source: str) -> tuple[Loc, str] | None:
    given = conn.model_fields_set
    mine = f"{source} sets {key}={_shown(key, value)}"
    if key == MASTER and conn.remote is not None:
        return ("remote",), f"{mine} but the gateway's connection uses Spark Connect (remote {_url(conn.remote)})"
    if key == MASTER and "master" in given and conn.master != value:
        return ("master",), f"{mine} but the gateway's connection says master {conn.master}"
    if key == REMOTE and conn.remote is not None and conn.remote != value:
        return ("remote",), f"{mine} but the gateway's connection says remote {_url(conn.remote)}"
    if key == REMOTE and "master" in given:
        return ("master",), f"{mine} but the gateway's connection says master {conn.master}"
    if key in conn.config and setting_text(conn.config[key]) != value:
        return ("config", key), f"{mine} but the gateway's connection config says {_shown(key, conn.config[key])}"
    return None


def _already(conn: SparkConnectionConfig, key: str, value: str) -> bool:
    """Whether config.yaml already says the same (nothing new for the running server to apply)."""
    if key == MASTER:
        return conn.master == value
    if key == REMOTE:
        return conn.remote == value
    return key in conn.config and setting_text(conn.config[key]) == value


def _shown(key: str, value: Any) -> str:
    return HIDDEN if is_secret_name(key) else repr(setting_text(value))


def _url(url: str) -> str:
    return repr(redact_text(url))
