"""Data versions we give Dagster: the physical version of the table holding the data.

Dagster's default data version hashes the code version, so every fingerprint change would look
like new data and mark everything downstream stale. Ours only changes when another physical table
is written: data a plan reuses keeps its data version. The interval is the partition itself, so it
is not repeated here: a ranged run gives every partition of its range one data version, and a
re-stamp must give the same partition the same one, or Dagster would see the same data change.
"""

from __future__ import annotations

from dagster import AssetKey

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


# The provenance tags Dagster reads from a materialization to tell fresh from stale (Dagster's
# "asset versioning and caching" guide names them). A re-stamp yields them on its events the way
# a run would write them; dagster exports no constants for them, so they are spelled here.
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
DATA_VERSION_IS_USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"


def input_data_version_tag(parent: AssetKey) -> str:
    """The tag holding the data version of `parent` this data was built on."""
    return f"dagster/input_data_version/{parent.to_user_string()}"


def input_event_pointer_tag(parent: AssetKey) -> str:
    """The tag holding the storage id of `parent`'s materialization this data was built on."""
    return f"dagster/input_event_pointer/{parent.to_user_string()}"
