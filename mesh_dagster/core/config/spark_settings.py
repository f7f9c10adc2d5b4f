"""Spark settings given outside a gateway's `connection`: per model (`session_properties`, set
for that model's queries) and per Dagster deployment (`PySparkResource.spark_config`, merged with
the connection).

Which Spark settings can change while a session runs is Spark's to say, and the session does say
it when one is set (execution refuses the model then, before it writes); the settings below are
refused earlier, at load, with the line they are written at: those known to be fixed when a session
starts, and the one mesh's own writes depend on. That one is refused wherever it is given (a model,
a connection's `config`, a PySparkResource): the writes set it anyway, so another value would load
and then be ignored.

`PySparkResource` keys are Spark's own: `spark.master` and `spark.remote` say where Spark is (the
connection's `master` and `remote`), every other key joins the connection's `config`. A key both
set, with different values, is refused, naming both values. On the embedded default (a `local`
master with the Derby metastore inside the project) a run works on the project's shared Spark
Connect server, which `mesh ui` (or the first run) started from config.yaml alone: only a
session's settings (`spark.sql.*`, less Spark's static ones) can still apply to it. Any other
setting is refused rather than silently ignored; it belongs in config.yaml, which the server's
start reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh_dagster.core.config.connections import Loc, SparkConnectionConfig
from mesh_dagster.core.config.redaction import HIDDEN, is_secret_name, redact_text

MASTER = "spark.master"
REMOTE = "spark.remote"

# Settings fixed when a Spark session (or its application) starts: setting them per model would be
# silently ignored, or fail. Prefixes (ending in ".") or whole keys, lower case.
STATIC_SETTINGS = (
    "spark.master", "spark.app.", "spark.driver.", "spark.executor.", "spark.jars", "spark.submit.",
    "spark.serializer", "spark.local.dir", "spark.cores.max", "spark.dynamicallocation.", "spark.shuffle.service.",
    "spark.ui.", "spark.eventlog.", "spark.files", "spark.archives", "spark.remote", "spark.api.mode",
    "spark.sql.warehouse.dir", "spark.sql.catalogimplementation", "spark.sql.extensions",
    "spark.sql.hive.metastore.", "spark.sql.globaltempdatabase", "spark.sql.queryexecutionlisteners",
    "spark.sql.streaming.streamingquerylisteners", "spark.sql.cache.serializer", "spark.sql.connect.",
    "spark.sql.legacy.sessioninitwithconfigdefaults", "spark.sql.ui.", "spark.sql.event.truncate.length",
    "spark.sql.broadcastexchange.maxthreadthreshold", "spark.sql.subquery.maxthreadthreshold",
    "spark.sql.metadatacachettlseconds", "spark.sql.hive.thriftserver.", "spark.sql.filesourcetablerelationcachesize",
)
# Settings mesh's own writes rely on (engine/statements.py): a model changing them would corrupt them.
RESERVED_SETTINGS = {
    "spark.sql.sources.partitionoverwritemode": "mesh's writes replace exactly the partitions of an interval "
                                                "(dynamic partition overwrite)",
}


def static_setting(key: str) -> bool:
    low = key.lower()
    return any(low == s or (s.endswith(".") and low.startswith(s)) or (not s.endswith(".") and
               low.startswith(s + ".")) for s in STATIC_SETTINGS)


def check_setting(key: str) -> str:
    """The key, or a ValueError saying why it cannot be set for one model's queries."""
    if not key or any(c.isspace() for c in key):
        raise ValueError(f"'{key}' is no Spark setting name")
    if static_setting(key):
        raise ValueError(f"Spark setting {key} cannot change while a session runs (it is fixed when the session "
                         "starts): set it in the gateway's connection config instead")
    refusal = reserved_refusal(key, "per model")
    if refusal is not None:
        raise ValueError(refusal)
    return key


def reserved_refusal(key: str, where: str) -> str | None:
    """Why `key` cannot be set `where` (`per model`, `in PySparkResource.spark_config`): mesh's own
    writes set it to what they rely on, so any other value would be accepted and then ignored."""
    reason = RESERVED_SETTINGS.get(key.lower())
    return None if reason is None else f"Spark setting {key} cannot be set {where}: {reason}"


def setting_text(value: Any) -> str:
    """A setting as Spark reads it: booleans lower-case, everything else as text."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def session_setting(key: str) -> bool:
    """Whether a running Spark (a shared Connect server) still lets a new session set `key`."""
    return key.lower().startswith("spark.sql.") and not static_setting(key)


def spark_settings_refusal(conn: SparkConnectionConfig, settings: Mapping[str, Any],
                           source: str) -> tuple[Loc | None, str] | None:
    """Why `settings` (from `source`) cannot merge with `conn`: the connection key it contradicts
    (a path under the gateway's `connection`; None for a setting mesh's writes reserve, which no
    connection may set) and a one-line message naming both values."""
    for key in settings:
        reserved = reserved_refusal(key, f"in {source}")
        if reserved is not None:
            return None, reserved
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
