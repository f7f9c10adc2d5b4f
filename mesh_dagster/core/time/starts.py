"""Where a model's history starts when it declares no `start`, as SQLMesh infers it.

SQLMesh's rule (measured with SQLMesh 0.236, see README "A model without `start`"): a model's
own `start` (or `model_defaults.start`, which is the model's own once loaded) wins; without one,
the earliest start inferred for its parents, recursively, and its own latest interval (the cron
tick before the latest one) — whichever is earlier. So a start-less child of a model starting on
the 5th is backfilled from the 5th, and a start-less model reading only external tables gets its
latest interval only. It is *not* the earliest start of the whole project.

Plans, runs, materializations and Dagster's partitions all take a model's start from here, so
they agree on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mesh_dagster.core.time.cron import cron_floor_ms, cron_prev_ms
from mesh_dagster.core.time.dates import TimeLike, ms_to_datetime, to_ms


@dataclass(frozen=True)
class StartNode:
    """What decides one model's start: its declared start, its cron and its parents' names."""

    start: TimeLike | None
    cron: str
    cron_tz: str | None = None
    parents: tuple[str, ...] = ()


def latest_interval_start(cron: str, execution_ms: int, cron_tz: str | None = None) -> int:
    """The start of the last interval whose cron has fired by `execution_ms`: where a model with
    no start anywhere upstream begins."""
    return cron_prev_ms(cron, cron_floor_ms(cron, execution_ms, cron_tz), cron_tz)


def inferred_starts(nodes: Mapping[str, StartNode], execution_ms: int | None = None) -> dict[str, int | None]:
    """Every node's start in epoch ms (relative starts read at `execution_ms`, else now).

    Without `execution_ms` (Dagster's partitions, which must not move with the clock) a node whose
    start comes from no declared start upstream gets None: only its latest interval, known once
    an execution time is. Parents missing from `nodes` are ignored.
    """
    base = None if execution_ms is None else ms_to_datetime(execution_ms)
    found: dict[str, int | None] = {}
    read: dict[TimeLike, int] = {}  # each start written once: most models share model_defaults' start

    def start_of(name: str) -> int | None:
        if name in found:
            return found[name]
        node = nodes[name]
        if node.start is not None:
            if node.start not in read:
                read[node.start] = to_ms(node.start, base)
            found[name] = read[node.start]
            return found[name]
        found[name] = None  # a cycle (refused when the project loads) cannot recurse forever
        candidates = [s for p in node.parents if p in nodes and (s := start_of(p)) is not None]
        if execution_ms is not None:
            candidates.append(latest_interval_start(node.cron, execution_ms, node.cron_tz))
        found[name] = min(candidates, default=None)
        return found[name]

    for name in nodes:
        start_of(name)
    return found
