"""Standalone audits: `AUDIT (name x, standalone true, ...); SELECT ...` in audits/*.sql.

As in SQLMesh, a standalone audit is a node of its own beside the models, not attached to any:

- it reads models (the tables its query names, plus `depends_on`) and runs after them, in every
  plan apply and `mesh run`, against the versions the environment is given;
- it has a snapshot (a `Model` of kind STANDALONE_AUDIT, core/models/kinds_audit.py), so adding,
  editing or removing one shows in the plan. It holds no data: every edit of it is a metadata
  change (its data hash is constant, see core/snapshots/fingerprint.py), which keeps its
  intervals; it runs again when a parent's data changes (its version follows its parents');
- it has intervals: its `cron` (`@daily` by default, not `model_defaults`'), from its `start`
  (else the project's), rendered with `@start_ds`/`@end_ds` of the range it audits;
- it is never blocking (SQLMesh refuses `blocking true`: no model could tell which data a failure
  should hold back): a failure is a warning, recorded as its verdict, and the apply goes on.

Standalone-only properties are read like a model's (the same readers, file and line) and refused
on an audit attached to models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp

from mesh_dagster.core.config.config import ModelDefaults
from mesh_dagster.core.config.types import get_dialect
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.definition import Entry
from mesh_dagster.core.models.kinds import StandaloneAuditKind
from mesh_dagster.core.models.model import Audit, AuditRef, Model
from mesh_dagster.core.sql.query_columns import table_key
from mesh_dagster.core.sql.renderer import RenderContext, render_audit
from mesh_dagster.core.time.cron import interval_unit

# SQLMesh's node properties a standalone audit may set (beside name, dialect, defaults, description).
NODE_PROPERTIES = ("depends_on", "cron", "cron_tz", "interval_unit", "start", "end", "owner", "tags", "stamp")
# The `Model` fields they become.
_NODE_FIELDS = ("depends_on", "cron", "cron_tz", "declared_unit", "start", "end", "owner", "tags", "stamp")

ReadProperties = Callable[[list[Entry], str, int, ModelDefaults], tuple[dict[str, Any], dict[str, int], Any]]


def with_node(audit: Audit, node_entries: list[Entry], entries: list[Entry], read_properties: ReadProperties) -> Audit:
    """`audit` as read from its AUDIT block (`entries`), with its node properties (`node_entries`,
    read by `read_properties`, the model reader's) when it is standalone; refused otherwise."""
    path = audit.path or ""
    if not audit.standalone:
        if node_entries:
            entry = node_entries[0]
            raise ModelError(f"Audit property '{entry.key}' is only for standalone audits (`standalone true`): "
                             f"audit '{audit.name}' runs with the models it is attached to", path, entry.line)
        return audit
    blocking = next((e for e in entries if (e.key or "").lower() == "blocking"), None)
    if blocking is not None and audit.blocking:
        raise ModelError(f"Standalone audits cannot be blocking: '{audit.name}' (as in SQLMesh: it belongs to no "
                         "model whose data a failure could hold back; its failures are warnings)", path,
                         blocking.line)
    props, lines, _ = read_properties(node_entries, path, audit.line or 1, ModelDefaults())
    try:
        interval_unit(props["cron"], props.get("declared_unit"))  # a unit longer than the cron's period is refused
    except ValueError as e:
        raise ModelError(str(e), path, lines.get("interval_unit", lines.get("cron", audit.line))) from None
    node: dict[str, Any] = {key: props[key] for key in _NODE_FIELDS if props.get(key) is not None}
    node["property_lines"] = lines
    return audit.model_copy(update={"blocking": False, "node": node})


def standalone_audit_models(audits: dict[str, Audit], macros: MacroRegistry, variables: dict[str, Any]) -> list[Model]:
    """One node per standalone audit, reading the tables its query names and its `depends_on`."""
    return [audit_node(audit, macros, variables) for audit in audits.values() if audit.standalone]


def audit_node(audit: Audit, macros: MacroRegistry, variables: dict[str, Any]) -> Model:
    node = dict(audit.node)
    lines = node.pop("property_lines", {})
    depends_on = sorted(set(node.pop("depends_on", [])) | _reads(audit, macros, variables))
    return Model(name=audit.name, kind=StandaloneAuditKind(), dialect=audit.dialect,
                 audits=[AuditRef(name=audit.name)], depends_on=depends_on, description=audit.description,
                 path=audit.path, line=audit.line or 1, query_line=audit.line or 1, property_lines=lines, **node)


def _reads(audit: Audit, macros: MacroRegistry, variables: dict[str, Any]) -> set[str]:
    """The tables the audit's query reads (CTEs aside), its macros expanded with its defaults."""
    probe = Model(name=audit.name, kind=StandaloneAuditKind(), dialect=audit.dialect, path=audit.path,
                  line=audit.line or 1)
    sql = render_audit(audit.query, audit.dialect, dict(audit.defaults), probe, RenderContext(variables=variables),
                       macros, path=audit.path, line=audit.line or 1)
    tree = sqlglot.parse_one(sql, read=get_dialect("spark"))
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    tables = {table_key(t) for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)}
    return tables - ctes - {audit.name}
