"""Fingerprints of a loaded project's models.

The data hash covers what can change a model's rows (query text as written, statements, the
user macros and variables it uses, kind, declared columns, partitioning, seed content, a Python
model's stored code: its function and what the function uses); the metadata hash covers the rest.
Parent hashes chain both up the DAG so that any upstream change gives every descendant a new
identifier without rendering a single query.

A global computed at import from outside the code is hashed by its value when it is plain data
(core/models/import_time.py); one that is not cannot be, and `uncaptured_warnings` says so.
"""

from __future__ import annotations

from collections.abc import Iterable

from mesh_dagster.core.models.import_time import UncapturedValue
from mesh_dagster.core.models.model import Audit, Model
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.snapshots.capture import Capture, Capturer
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotFingerprint, SnapshotId, hash_values


def data_hash(model: Model, capture: Capture) -> str:
    if model.kind.is_standalone_audit:  # it holds no data: every edit of it is metadata, as in SQLMesh
        return hash_values(model.kind.data_hash_values())
    values = [
        model.query,
        *model.pre_statements,
        *model.post_statements,
        *model.macro_definitions,
        model.dialect,
        *model.kind.data_hash_values(),
        *(f"{c} {t}" for c, t in (model.columns or {}).items()),
        *model.partitioned_by,
        model.storage_format,
        model.stamp,
        *(f"{key}={value!r}" for key, value in capture.variable_values().items()),
    ]
    # A blueprint's values (only when it has some: fingerprints of other models stay as they were).
    values += [f"blueprint {key}={text}" for key, text in sorted(model.blueprint_variables.items())]
    if model.declared_unit is not None:  # only when written: fingerprints of other models stay as they were
        values.append(f"interval_unit={model.declared_unit.value}")
    values += capture.macro_values()
    values += capture.jinja_values()  # none without Jinja: other projects keep their fingerprints
    if model.python is not None:
        values += model.python.data_hash_values()
    if capture.materialization is not None:  # a CUSTOM model's class: its code writes the rows
        values += capture.materialization.hash_values()
    if capture.seed is not None:
        values.append(capture.seed.digest)  # hashed once, when the loader checked it
    return hash_values(values)


def _audit_values(model: Model, capture: Capture) -> list[str]:
    values = []
    for ref in model.audits:
        audit: Audit | None = capture.audits.get(ref.name)
        values += [ref.name, str(sorted(ref.args.items())), str(ref.blocking)]
        if audit is not None:
            values += [audit.query, str(audit.blocking), audit.dialect]
    return values


def metadata_hash(model: Model, capture: Capture) -> str:
    values = [
        model.cron,
        model.start,
        model.end,
        model.owner,
        model.description,
        *sorted(model.tags),
        *model.grain,
        *_reference_values(model),
        *model.kind.metadata_hash_values(),
        *(f"{c}={d}" for c, d in sorted(model.column_descriptions.items())),
        *_audit_values(model, capture),
        # Whitespace/comment-only edits are new snapshots, categorised as metadata later.
        model.query,
        *(model.python.metadata_hash_values() if model.python is not None else []),
    ]
    values += _scheduling_values(model)
    # How Spark runs its queries, as SQLMesh hashes them: metadata (listed only when set).
    values += [f"session {key}={value}" for key, value in sorted(model.session_properties.items())]
    values += _standalone_audit_values(model, capture)
    values += [f"on_virtual_update {text}" for text in model.on_virtual_update]  # none: as before
    values += capture.signal_values()  # when its intervals are ready, as the code decides it
    if model.query and "*" in model.query:
        # A `SELECT *` child's output follows its parents' columns (see categorizer).
        for parent, cols in sorted(capture.parent_schemas.items()):
            values.append(f"{parent}:{','.join(cols)}")
    return hash_values(values)


def _standalone_audit_values(model: Model, capture: Capture) -> list[str]:
    """What a standalone audit's data hash would hold for a model (its verdicts follow them)."""
    if not model.kind.is_standalone_audit:
        return []
    values = [model.dialect, model.stamp or "", *model.depends_on, *capture.macro_values()]
    values += [f"{key}={value!r}" for key, value in capture.variable_values().items()]
    values += [f"default {k}={v}" for audit in capture.audits.values() for k, v in sorted(audit.defaults.items())]
    return values


def _reference_values(model: Model) -> list[str]:
    """Listed only when set, so projects that set none keep their fingerprints."""
    aliases = [f"alias={c}:{a}" for c, a in sorted(model.key_aliases.items())]
    return [f"references={c}" for c in model.references] + aliases


def _scheduling_values(model: Model) -> list[str]:
    """When a model runs, not what it computes: metadata. Listed only when set, so projects that
    set none keep their fingerprints."""
    values = [f"cron_tz={model.cron_tz}"] if model.cron_tz else []
    if model.allow_partials:
        values.append("allow_partials")
    values += [f"signal={ref.describe()}" for ref in model.signals]
    return values


def build_snapshots(project: Project) -> dict[str, Snapshot]:
    """One uncategorised snapshot per model, parents before children."""
    snapshots: dict[str, Snapshot] = {}
    capturer = Capturer(project)
    for name in project.dag.sorted():
        model = project.models[name]
        parents = [snapshots[p] for p in project.parents(name)]
        capture = capturer.capture(model)
        own = SnapshotFingerprint(data_hash=data_hash(model, capture), metadata_hash=metadata_hash(model, capture))
        snapshots[name] = Snapshot(
            name=name,
            fingerprint=with_parents(own, parents),
            model=model,
            parents=[SnapshotId(p.name, p.identifier) for p in parents],
            capture=capture,
        )
    return snapshots


def with_parents(fingerprint: SnapshotFingerprint, parents: list[Snapshot]) -> SnapshotFingerprint:
    """`fingerprint`'s own hashes chained with `parents`' (a plan limited by --select-model
    re-chains a model the environment has onto parents the plan changes). Made anew, not copied: a
    copy would keep the identifier `fingerprint` computed (see SnapshotFingerprint)."""
    return SnapshotFingerprint(
        data_hash=fingerprint.data_hash,
        metadata_hash=fingerprint.metadata_hash,
        parent_data_hash=hash_values(sorted(p.fingerprint.to_version() for p in parents)) if parents else "0",
        parent_metadata_hash=hash_values(
            sorted(p.fingerprint.metadata_hash + p.fingerprint.parent_metadata_hash for p in parents)
        ) if parents else "0",
    )


def uncaptured_warnings(snapshots: Iterable[Snapshot]) -> list[str]:
    """One line per global computed at import from outside the code that the snapshots run again at
    every evaluation (not plain data, so not stored as its value), naming the models using it."""
    users: dict[UncapturedValue, set[str]] = {}
    for snapshot in snapshots:
        for value in _uncaptured(snapshot):
            users.setdefault(value, set()).add(snapshot.name)
    return [value.message(users[value]) for value in sorted(users, key=lambda v: (v.path, v.line, v.name))]


def _uncaptured(snapshot: Snapshot) -> list[UncapturedValue]:
    """What the model's Python code, macros and signals run again (core/models/import_time.py)."""
    found = list(snapshot.model.python.uncaptured) if snapshot.model.python is not None else []
    capture = snapshot.capture
    if capture is not None:
        found += [value for f in [*capture.macros.values(), *capture.signals.values()] for value in f.uncaptured]
    return found
