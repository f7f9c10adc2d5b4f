"""SQLMesh's `metrics/` folder: METRIC definitions, which mesh_dagster does not run.

SQLMesh reads every `.sql` file of `metrics/` (and its sub-folders) as METRIC (...) blocks that
its own metric queries expand. Nothing here reads them, so a project holding some is refused at
load, naming the first one, rather than loaded as if the folder were not there: a user who relies
on a metric learns it before anything is planned.
"""

from __future__ import annotations

import re
from pathlib import Path

from mesh_dagster.core.config.files import read_text
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.definition import relative_path

METRICS_DIR = "metrics"
_METRIC = re.compile(r"^[ \t]*METRIC\s*\(", re.IGNORECASE | re.MULTILINE)


def refuse_metrics(root: Path) -> None:
    """A ModelError at the first METRIC definition of `metrics/` (line 1 of its first file when
    none is found: SQLMesh would fail to read that file)."""
    folder = root / METRICS_DIR
    files = sorted((p for p in folder.rglob("*.sql") if p.is_file()), key=str) if folder.is_dir() else []
    if not files:
        return
    first = files[0]
    rel = relative_path(first, root)
    text = read_text(first, rel)
    found = _METRIC.search(text)
    line = text.count("\n", 0, found.start()) + 1 if found else 1
    more = f" (and {len(files) - 1} more file(s) in {METRICS_DIR}/)" if len(files) > 1 else ""
    raise ModelError(f"SQLMesh metrics are not supported by mesh_dagster: {rel} defines one{more}. Move the "
                     f"{METRICS_DIR}/ folder out of the project (the models do not need it) and query the models "
                     "instead", rel, line)
