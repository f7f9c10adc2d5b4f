"""STANDALONE_AUDIT: the kind of the node a standalone audit (`AUDIT (..., standalone true)`) is.

SQLMesh schedules a standalone audit as a node of its own, beside the models: it has a snapshot,
shows in plans, has intervals (its `cron`, from its `start`) and runs after the models it reads,
in every plan and run. It writes nothing, so it has no physical object and no view; its
"evaluation" is its audit query, and a failure is a warning (standalone audits are never blocking).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import Entry
from mesh_dagster.core.models.kinds_base import BaseKind, KindName


class StandaloneAuditKind(BaseKind):
    """An audit query run for its own intervals; no table, no view."""

    name: Literal[KindName.STANDALONE_AUDIT] = KindName.STANDALONE_AUDIT

    is_symbolic: ClassVar[bool] = True
    is_standalone_audit: ClassVar[bool] = True
    has_query: ClassVar[bool] = False

    def is_scheduled(self, has_audits: bool) -> bool:
        return True

    @classmethod
    def read(cls, items: list[Entry], path: str, line: int) -> BaseKind:
        raise ModelError("Standalone audits are written in audits/ as `AUDIT (name ..., standalone true); SELECT ...`, "
                         "not as a model kind", path, line)
