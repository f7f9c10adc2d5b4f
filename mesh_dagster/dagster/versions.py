"""Data versions we give Dagster: the physical version of the table holding the data.

Dagster's default data version hashes the code version, so every fingerprint change would look
like new data and mark everything downstream stale. Ours only changes when another physical table
is written: data a plan reuses keeps its data version. The interval is the partition itself, so it
is not repeated here: a ranged run gives every partition of its range one data version, and a
re-stamp must give the same partition the same one, or Dagster would see the same data change.
"""

from __future__ import annotations

# Materialization metadata: {parent model: parent version} of the data this partition was computed
# from (or, for a re-stamp, is kept on). When a parent's new version is materialized, children
# whose own version did not change (the categorizer found the parent change compatible) are
# re-stamped against it instead of turning stale; children computed from that same parent version
# are left to Dagster's own judgement.
BUILT_ON = "mesh/built_on"


def version_of(data_version_text: str | None) -> str | None:
    """The physical version a data version was written for (also for `<version>:<interval>`
    data versions written by earlier releases)."""
    if not data_version_text:
        return None
    return data_version_text.split(":", 1)[0]


# The tags Dagster writes on every materialization of a run (its "asset versioning" guide names
# them; dagster exports no constants): read back to tell which partitions carry an outdated code
# version. mesh never writes them: a re-stamp run yields a data version and Dagster does the rest.
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"


def input_event_pointer_tag(parent: str) -> str:
    """The tag of a materialization pointing at the parent's event it was built from (`parent`: the
    parent's key as Dagster writes it, `a/b`)."""
    return f"dagster/input_event_pointer/{parent}"
