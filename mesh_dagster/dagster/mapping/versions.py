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
# version. A re-stamp run never writes them: it yields a data version and Dagster does the rest.
# The one event mesh writes with them itself is the runless stamp saying what an environment
# serves after a run of its code location computed a version it does not serve yet
# (stamps.Stamper.served_events): Dagster reads staleness from these tags whoever wrote them, and
# that event copies them from Dagster's own earlier event of the served version where there is one.
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
DATA_VERSION_IS_USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
_PROVENANCE_PREFIXES = ("dagster/input_data_version/", "dagster/input_event_pointer/")


def is_provenance_tag(tag: str) -> bool:
    """Whether `tag` is one of the data-version tags Dagster reads staleness from."""
    return tag in (CODE_VERSION_TAG, DATA_VERSION_TAG, DATA_VERSION_IS_USER_PROVIDED_TAG) or \
        tag.startswith(_PROVENANCE_PREFIXES)


def input_event_pointer_tag(parent: str) -> str:
    """The tag of a materialization pointing at the parent's event it was built from (`parent`: the
    parent's key as Dagster writes it, `a/b`)."""
    return f"dagster/input_event_pointer/{parent}"
