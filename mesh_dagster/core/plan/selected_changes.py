"""Plans limited by `--select-model` and `--backfill-model` (SQLMesh's model selection).

`--select-model` decides which *local changes* enter a plan: a selected model comes from the
project; every other model stays as the target environment has it — an unselected edit is left
out, an unselected new model stays out, an unselected removal does not happen. A model kept as
the environment has it still sits below the selected changes: when a parent changes it is
re-fingerprinted (its definition the environment's) and becomes indirectly modified, as any
child of a change. A model the project no longer defines is kept exactly as stored.

`--backfill-model` (development environments only) decides which models a plan computes: the
selected ones and everything upstream of them. Without it, a development plan limited by
`--select-model` computes the selection (and its upstream). Changed models left out are not
computed, so they get no view in the environment either: views never point at a table whose
backfill has not run. Prod computes everything a plan changes, always.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.selectors import ModelIndex, select_models
from mesh_dagster.core.project.dag import DAG
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.environment import EnvironmentSnapshot
from mesh_dagster.core.snapshots.fingerprint import with_parents
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotId

SELECT_FLAG = "--select-model"
BACKFILL_FLAG = "--backfill-model"


@dataclass(frozen=True)
class PlanSelection:
    """What the two flags leave of a plan."""

    snapshots: dict[str, Snapshot]  # the snapshots the plan compares with its base, parents first
    backfill: set[str] | None  # the only models the plan may compute (upstream included); None: no limit

    def promoted(self, promoted: list[str], changed: set[str], snapshots: dict[str, Snapshot]) -> list[str]:
        """`promoted` (DAG order) without the changed models left out of the backfill, and with
        every model the backfill computes: a later `--backfill-model x` shows x once it holds data."""
        allowed = self.backfill
        if allowed is None:
            return promoted
        shown = set(promoted)
        return [n for n, s in snapshots.items() if not s.model.kind.is_symbolic
                and (n in allowed or (n in shown and n not in changed))]


class SnapshotReader(Protocol):
    """The state store's snapshots (its `snapshots` part)."""

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]: ...


def select_plan(project: Project, snapshot_store: SnapshotReader, base: Mapping[str, EnvironmentSnapshot],
                local: dict[str, Snapshot], *, select: Sequence[str] = (), backfill: Sequence[str] = (),
                is_prod: bool) -> PlanSelection:
    """Apply `--select-model` (`select`) and `--backfill-model` (`backfill`) selectors to a plan
    comparing `local` (`build_snapshots`) with `base` (the base environment's snapshots by name).

    Raises SelectorError for a selector that selects nothing, PlanError for a backfill limit in
    prod or a selection the environment cannot hold.
    """
    if backfill and is_prod:
        raise PlanError(f"{BACKFILL_FLAG} can only be used with development environments, not prod: "
                        f"a prod plan computes everything it changes")
    snapshots = local
    selected: set[str] = set()
    if select:
        found = snapshot_store.get_snapshots([es.snapshot_id for es in base.values()])
        stored = {sid.name: s for sid, s in found.items()}
        index = ModelIndex.of_models(project.models, project.dag).over(ModelIndex.of_snapshots(stored))
        selected = select_models(select, index, flag=SELECT_FLAG)
        lost = sorted(n for n in base if n not in stored and n not in selected)
        if lost:
            them, snapshots_ = ("them", "their snapshots") if len(lost) > 1 else ("it", "its snapshot")
            raise PlanError(f"{SELECT_FLAG}: {', '.join(lost)} cannot stay as the environment has {them}: the state "
                            f"store lost {snapshots_}; select {them} too")
        snapshots = take_selected_changes(local, stored, selected)
    limit: set[str] | None = None
    if not is_prod and (backfill or select):
        index = ModelIndex.of_snapshots(snapshots)
        # Without --backfill-model: the selection, as far as the plan still has it (not a removal).
        chosen = select_models(backfill, index, flag=BACKFILL_FLAG) if backfill else selected & index.names
        limit = index.with_upstream(chosen)
    return PlanSelection(snapshots, limit)


def take_selected_changes(local: dict[str, Snapshot], base: dict[str, Snapshot],
                          selected: set[str]) -> dict[str, Snapshot]:
    """The snapshots a plan limited to `selected` compares, parents first: the local snapshot of a
    selected model, the base's (`base`, as stored) of any other; children re-chained onto parents
    that changed."""
    chosen: dict[str, Snapshot] = {}
    for name, snap in local.items():
        if name in selected:
            chosen[name] = snap
        elif name in base:
            chosen[name] = base[name]
    frozen = {name for name in base if name not in local and name not in selected}
    chosen.update({name: base[name] for name in sorted(frozen)})
    parents = {name: [p.name for p in snap.parents] for name, snap in chosen.items()}
    _check_parents(parents, local, base, selected)

    out: dict[str, Snapshot] = {}
    for name in DAG(parents).sorted():
        snap = chosen[name]
        if name not in frozen:
            snap = _rechained(snap, [out[p] for p in parents[name]])
        out[name] = snap
    return out


def _rechained(snap: Snapshot, parents: list[Snapshot]) -> Snapshot:
    """`snap` on top of `parents`: itself when they are the parents it was made with, else a new,
    uncategorised snapshot of the same definition (its version is decided by categorization)."""
    fingerprint = with_parents(snap.fingerprint, parents)
    if fingerprint == snap.fingerprint:
        return snap
    return snap.model_copy(update={
        "fingerprint": fingerprint,
        "parents": [p.snapshot_id for p in parents],
        "version": None,
        "change_category": None,
        "previous_versions": [],
        "created_ts": 0,
    })


def _check_parents(parents: dict[str, list[str]], local: dict[str, Snapshot], base: dict[str, Snapshot],
                   selected: set[str]) -> None:
    """Every model the plan keeps must find the parents it reads in the plan."""
    for name, names in parents.items():
        for parent in names:
            if parent in parents:
                continue
            if parent in local:  # new in the project, not selected
                raise PlanError(f"{SELECT_FLAG}: {name} reads {parent}, which is new and not selected: "
                                f"select it too (e.g. {SELECT_FLAG} '+{name}')")
            if parent in base:  # removed from the project, and the selection removes it
                raise PlanError(f"{SELECT_FLAG}: {parent} is removed by the selection, but {name}, not selected, "
                                f"still reads it as the environment has it: select {name} too")
            raise PlanError(f"{SELECT_FLAG}: {name} reads {parent}, which neither the project nor the "
                            f"environment has")
