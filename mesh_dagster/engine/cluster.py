"""A Spark standalone cluster (`master: spark://host:port`), asked before a driver starts.

Spark's own client tries an unreachable master three times twenty seconds apart and only then
gives up with "All masters are unresponsive" (after the session was already handed out, so the
first query fails instead). A TCP connect within the connection's `connect_timeout` says the same
in seconds, before a JVM starts. A master on a loopback address can only have workers on this
machine: their executors reach the driver on loopback too, so the driver binds 127.0.0.1 there
(Spark would bind the host's external address, reachable from the network).
"""

from __future__ import annotations

import ipaddress
import socket

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import EngineError

__all__ = [
    "ClusterUnreachableError",
    "check_master",
    "loopback_master",
    "standalone_masters",
    "unreachable_reason",
]

STANDALONE_PORT = 7077
_LOOPBACK_NAMES = ("localhost",)


class ClusterUnreachableError(EngineError):
    """No standalone master answers at the configured address (raised before Spark starts)."""


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """`spark://a:7077,b:7077` -> [(a, 7077), (b, 7077)]; [] for any other kind of master."""
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.strip().rstrip("/").rpartition(":")
        if not host:
            host, port = port, ""
        try:
            out.append((host.strip("[]"), int(port) if port else STANDALONE_PORT))
        except ValueError:
            raise EngineError(f"Cannot read the Spark master '{master}': a standalone master looks like "
                              f"spark://host:7077. Check `master:` in config.yaml.") from None
    return out


def loopback_master(master: str) -> bool:
    """Every master of a `spark://` URL is on this machine's loopback."""
    masters = standalone_masters(master)
    return bool(masters) and all(_is_loopback(host) for host, _ in masters)


def check_master(conn: SparkConnectionConfig) -> None:
    """Raise ClusterUnreachableError unless some standalone master of `conn` accepts a connection."""
    masters = standalone_masters(conn.master)
    reasons = []
    for host, port in masters:
        reason = unreachable_reason(host, port, conn.connect_timeout)
        if reason is None:
            return
        reasons.append(f"{host}:{port} {reason}")
    if reasons:
        raise ClusterUnreachableError(
            f"Cannot reach the Spark master {conn.master} ({'; '.join(reasons)}, connect_timeout "
            f"{conn.connect_timeout:g} s). Is the cluster running? Check `master:` in config.yaml.")


def unreachable_reason(host: str, port: int, timeout_s: float = 10.0) -> str | None:
    """Why nothing accepts a TCP connection at host:port (None when something does)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except socket.gaierror as e:
        return f"unknown host ({e.strerror or e})".lower()
    except OSError as e:
        return (e.strerror or str(e)).lower()


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
