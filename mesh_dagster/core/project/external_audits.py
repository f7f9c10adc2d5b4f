"""The `audits` of an external model (external_models.yaml, external_models/*.yaml).

SQLMesh's format: a list of mappings, each the audit's `name` and its arguments as SQL text
(`columns: "[customer_id]"`, `min_v: "'00000'"`); a plain name is an audit without arguments.
`blocking` is the use-site override it is for models (`blocking := false`).

An external model with audits is scheduled like a model (its `cron`, `@daily`, from its `start`):
for each range a plan or `mesh run` computes, its audits run on the table, before the models
reading it (they wait for it as for a parent). A failing blocking audit stops the apply or run
before any of them is computed, as SQLMesh checks upstream data "before your internal models evaluate".
"""

from __future__ import annotations

from typing import Any

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.model import AuditRef

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def external_audit_refs(value: Any, model: str, path: str, line: int) -> list[AuditRef]:
    """The audits an external model entry attaches (`line`: its `audits` key, for errors)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(f"External model {model}: audits is a list of `- name: audit_name` entries (with the "
                         "audit's arguments as SQL text)", path, line)
    return [_ref(item, model, path, line) for item in value]


def _ref(item: Any, model: str, path: str, line: int) -> AuditRef:
    if isinstance(item, str):
        return AuditRef(name=item.strip().lower())
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ModelError(f"External model {model}: each audit is `- name: audit_name` with its arguments, got "
                         f"{item!r}", path, line)
    args = {str(k).lower(): _sql_text(v) for k, v in item.items() if k != "name"}
    blocking = args.pop("blocking", None)
    return AuditRef(name=item["name"].strip().lower(), args=args, blocking=_flag(blocking, model, path, line))


def _sql_text(value: Any) -> str:
    """An argument as the SQL it stands for: YAML reads `true` and `5` as Python values."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def _flag(text: str | None, model: str, path: str, line: int) -> bool | None:
    if text is None:
        return None
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ModelError(f"External model {model}: blocking is true or false, got '{text}'", path, line)
