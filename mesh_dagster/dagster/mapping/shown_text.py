"""User text as the Dagster UI shows it: escaped as the CLI escapes the text a reviewer reads.

A model's description, its columns' descriptions, its query, owner, file name and the audits'
descriptions come from the project's files, and the browser obeys what a terminal would: a
right-to-left override (U+202E) in a description shows the asset page's text reversed, other
controls hide or reorder what is read. Each such character is shown as its escape instead
(`core/config/display.py`, the same function as the CLI's: `\\u202e`).

The translators pass every spec they make through `shown_spec` (a subclass's own text, and a
component's `translation:`, included); the checks' descriptions are escaped where the graph makes
them (graph.py). A spec without such characters, nearly every one, is returned as it is: loading
thousands of assets copies nothing.

What runs show is escaped where it is said: an error a step or a code location ends with quotes the
project (a failing query's message, a signal's arguments, a linter rule's finding) and is a
`ShownError`; the metadata of events (`shown_metadata`) and the lines of the run's log and of a
tick's skip reason go through `printable` as they are written (listener.py, dagster/jobs/reviews.py, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetSpec,
    MarkdownMetadataValue,
    MetadataValue,
    TableColumn,
    TableMetadataValue,
    TableRecord,
    TableSchema,
    TableSchemaMetadataValue,
    TextMetadataValue,
)

from mesh_dagster.core.config.display import has_hidden, printable, printable_line


class ShownError(Exception):
    """An error whose message Dagster shows as it is (a failed step's, a code location's that does
    not load): the message quotes the project, so it is escaped when the error is made. Escaping is
    idempotent: a message that was escaped already stays as it is."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


def shown_spec(spec: AssetSpec) -> AssetSpec:
    """`spec` with its description, text metadata and owners escaped (itself when nothing is hidden)."""
    metadata = shown_metadata(spec.metadata)
    hidden_owners = any(has_hidden(owner) for owner in spec.owners)
    hidden_description = spec.description is not None and has_hidden(spec.description)
    if not hidden_owners and not hidden_description and all(metadata[k] is v for k, v in spec.metadata.items()):
        return spec
    return spec.replace_attributes(description=_printable(spec.description), metadata=metadata,
                                   owners=[printable_line(owner) for owner in spec.owners])


def shown_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """An event's (or a spec's) metadata with the text of each value escaped (see `shown_value`)."""
    return {key: shown_value(value) for key, value in metadata.items()}


def shown_value(value: Any) -> Any:
    """A metadata value with its text escaped; the value itself when it holds no hidden character
    (or no text: numbers, asset keys, lineage)."""
    if isinstance(value, str):
        return printable(value) if has_hidden(value) else value
    if isinstance(value, MarkdownMetadataValue) and has_hidden(value.value):
        return MetadataValue.md(printable(value.value))
    if isinstance(value, TextMetadataValue) and has_hidden(value.value):
        return MetadataValue.text(printable(value.value))
    if isinstance(value, TableSchemaMetadataValue):
        schema = shown_value(value.schema)
        return value if schema is value.schema else MetadataValue.table_schema(schema)
    if isinstance(value, TableSchema) and any(has_hidden(f"{c.name}{c.type}{c.description or ''}")
                                              for c in value.columns):
        return TableSchema(columns=[_shown_column(c) for c in value.columns], constraints=value.constraints)
    if isinstance(value, TableMetadataValue) and any(isinstance(v, str) and has_hidden(v)
                                                     for r in value.records for v in r.data.values()):
        return MetadataValue.table([TableRecord(data=shown_metadata(r.data)) for r in value.records],
                                   schema=value.schema)
    return value


def _shown_column(column: TableColumn) -> TableColumn:
    return TableColumn(name=printable_line(column.name), type=printable_line(column.type),
                       description=_printable(column.description), constraints=column.constraints, tags=column.tags)


def _printable(text: str | None) -> str | None:
    return None if text is None else printable(text)
