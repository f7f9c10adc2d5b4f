"""The columns of the project's external tables, as the engine's catalog has them."""

from __future__ import annotations

from collections.abc import Iterable

from mesh_dagster.execution.ports import Engine


def catalog_columns(engine: Engine, tables: Iterable[str]) -> dict[str, dict[str, str] | None]:
    """Table -> its columns (name -> Spark type, in table order), or None when the catalog has no
    such table or view."""
    return {name: engine.catalog.columns(name) if engine.catalog.table_exists(name) else None for name in tables}
