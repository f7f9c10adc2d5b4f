"""Spark settings a model (or `model_defaults`) may set for its queries, and those it may not.

Which Spark settings can change while a session runs is Spark's to say, and the session does say
it when one is set (execution refuses the model then, before it writes); the settings below are
refused earlier, at load, with the line they are written at: those known to be fixed when a session
starts, and the one mesh's own writes depend on.
"""

from __future__ import annotations

from typing import Any

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
    reason = RESERVED_SETTINGS.get(key.lower())
    if reason is not None:
        raise ValueError(f"Spark setting {key} cannot be set per model: {reason}")
    return key


def setting_value(value: Any) -> str:
    """A setting's value as Spark takes it (text): `true`/`false` for booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
