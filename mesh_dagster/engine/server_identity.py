"""What a warm Spark server was started with, so that no command ever talks to a stale one.

A server outlives the commands that use it, for up to its idle time. Meanwhile the user may
upgrade PySpark or mesh_dagster, edit the Spark settings of `config.yaml`, or point JAVA_HOME at
another JDK; a client of the old server would then run on what the user no longer has. So each
server records its identity (`ServerInfo.identity`) and a client whose own differs restarts it
first, saying why (`identity_change`).

Everything here is cheap (no process is run): a command computes it before every use of the server.
"""

from __future__ import annotations

import hashlib
import json

from pyspark.version import __version__ as pyspark_version

from mesh_dagster import __version__ as mesh_version
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.java import find_java

# Connection fields that shape the server itself; the others are read by each command on its own
# (how many models at once, how long to wait for Spark) or by the idle stop, which follows the
# config without a restart.
_CLIENT_SIDE = {"concurrent_tasks", "connect_timeout", "server"}
_WHAT = {
    "pyspark": "the installed PySpark",
    "mesh_dagster": "the installed mesh_dagster",
    "java": "the Java it runs on",
    "settings": "the Spark settings of config.yaml",
}


def server_identity(conn: SparkConnectionConfig) -> dict[str, str]:
    """The parts of what a server of `conn` would be started with that can change under it."""
    settings = conn.model_dump(mode="json", exclude=_CLIENT_SIDE)
    return {
        "pyspark": pyspark_version,
        "mesh_dagster": mesh_version,
        "java": _java_identity(),
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16],
    }


def identity_change(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    """What changed since the server started, as the end of a sentence; None when nothing did."""
    changed = [key for key in _WHAT if recorded.get(key) != current.get(key)]
    if not changed:
        return None
    parts = []
    for key in changed:
        before, after = recorded.get(key), current.get(key)
        versions = f" ({before} -> {after})" if key in ("pyspark", "mesh_dagster") and before else ""
        parts.append(f"{_WHAT[key]}{versions}")
    return ", ".join(parts) + (" changed" if len(parts) == 1 else " have changed")


def _java_identity() -> str:
    """The JDK spark-submit would launch: its resolved path and its `release` file (version, vendor),
    whose modification also shows an upgrade in place."""
    java = find_java()
    if java is None:
        return "none"
    java = java.resolve()
    release = java.parents[1] / "release"
    try:
        stamp = f"{release.stat().st_mtime_ns}:{release.read_text(errors='replace')}"
    except OSError:
        stamp = str(java.stat().st_mtime_ns) if java.exists() else ""
    return f"{java}@{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"
