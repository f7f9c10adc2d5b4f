"""The rows a failed audit returned, a few of them: what someone looking at a failed check reads
first. Kept with the audit's verdict (state schema 8), so a check shows them wherever it is shown
(a Dagster run's check, or a verdict of a `mesh` apply carried into Dagster), without running the
audit again. Bounded (`SAMPLE_ROWS` rows, each value cut at `VALUE_CHARS` characters): an audit may
return millions of rows, and a value may be a document.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mesh_dagster.core.config.display import markdown_code

SAMPLE_ROWS = 10
VALUE_CHARS = 200


@dataclass(frozen=True)
class AuditSample:
    """Up to `SAMPLE_ROWS` failing rows: the columns, and each row's values as text (None: NULL)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]

    @classmethod
    def of(cls, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> AuditSample:
        return cls(tuple(str(c) for c in columns),
                   tuple(tuple(_text(v) for v in row) for row in list(rows)[:SAMPLE_ROWS]))

    def to_json(self) -> str:
        return json.dumps({"columns": list(self.columns), "rows": [list(r) for r in self.rows]})

    @classmethod
    def from_json(cls, text: str | None) -> AuditSample | None:
        """The sample stored as `to_json` wrote it; None for none (or what no version wrote)."""
        try:
            data = json.loads(text) if text else None
            return cls(tuple(data["columns"]), tuple(tuple(r) for r in data["rows"])) if data else None
        except (ValueError, KeyError, TypeError):
            return None

    def markdown(self, total: int) -> str:
        """A Markdown table of the rows, saying how many of the `total` failing rows it shows."""
        header = "| " + " | ".join(_cell(c) for c in self.columns) + " |"
        rule = "|" + "---|" * len(self.columns)
        body = ["| " + " | ".join("NULL" if v is None else _cell(v) for v in row) + " |" for row in self.rows]
        shown = f"{len(self.rows)} of {total} failing row(s)" if total > len(self.rows) else f"{total} failing row(s)"
        return "\n".join([shown + ":", "", header, rule, *body])


def _text(value: Any) -> str | None:
    if value is None or value != value:  # NULL, NaN/NaT (pandas' NULLs)
        return None
    text = str(value)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


def _cell(text: str) -> str:
    """A value in a Markdown cell: a code span (no Markdown or HTML in it is rendered), hidden
    characters and line breaks shown as escapes, pipes escaped (they would end the cell)."""
    return markdown_code(text).replace("|", "\\|")
