"""Data versions we give Dagster: the physical version plus the interval the data covers.

Dagster's default data version hashes the code version, so every fingerprint change would look
like new data and mark everything downstream stale. Ours only changes when another physical table
or another interval is written: data a plan reuses keeps its data version.
"""

from __future__ import annotations

from mesh_dagster.core.dates import ms_to_datetime
from mesh_dagster.core.intervals import Interval
from mesh_dagster.core.plan import ALL_TIME


# Materialization metadata: {parent model: parent version} of the data this partition was computed
# from (or, for a re-stamp, is kept on). When a parent's new version is materialized, children
# whose own version did not change (the categorizer found the parent change compatible) are
# re-stamped against it instead of turning stale; children computed from that same parent version
# are left to Dagster's own judgement.
BUILT_ON = "mesh/built_on"


def data_version(version: str, window: Interval | None) -> str:
    """`<version>` for seeds and views (built for all time), `<version>:<start>..<end>` otherwise,
    `<version>:empty` for a range outside the model's lifetime."""
    if window is None:
        return f"{version}:empty"
    if window == ALL_TIME:
        return version
    return f"{version}:{_boundary(window[0])}..{_boundary(window[1])}"


def version_of(data_version_text: str | None) -> str | None:
    """The physical version a data version was written for."""
    if not data_version_text:
        return None
    return data_version_text.split(":", 1)[0]


def _boundary(ms: int) -> str:
    dt = ms_to_datetime(ms)
    return dt.strftime("%Y-%m-%d") if (dt.hour, dt.minute, dt.second) == (0, 0, 0) else dt.strftime("%Y-%m-%dT%H:%M")
