"""Errors users see.

Every error that comes from the user's project carries the file and line it points at, so the
CLI and Dagster can show `models/x.sql:12: message` instead of a stack trace of our internals.
"""

from __future__ import annotations

from pathlib import Path


class MeshError(Exception):
    """Base class of all errors shown to users as a one-line message."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.path and self.line:
            return f"{self.path}:{self.line}: {self.message}"
        if self.path:
            return f"{self.path}: {self.message}"
        return self.message


class ConfigError(MeshError):
    """config.yaml is missing, malformed or inconsistent."""


class ModelError(MeshError):
    """A model, audit, seed or test definition cannot be loaded."""


class MacroError(ModelError):
    """A macro cannot be evaluated."""


class PlanError(MeshError):
    """A plan cannot be built or applied as requested."""


class SelectorError(PlanError):
    """A model selector (`--select-model`, `--backfill-model`, `table_diff -m`, ...) that cannot be
    read, or that names no model."""


class ConflictingPlanError(PlanError):
    """Another plan changed the target environment while this one was in progress."""


class AuditError(MeshError):
    """A blocking audit returned rows."""

    def __init__(self, message: str, audit: str, model: str, count: int, **kw):
        self.audit = audit
        self.model = model
        self.count = count
        super().__init__(message, **kw)


class StateError(MeshError):
    """The state store is unreachable, or its schema does not match this version."""


class EngineError(MeshError):
    """Spark failed or cannot be started (e.g. Java missing)."""


class UnitTestError(MeshError):
    """A YAML unit test is malformed."""
