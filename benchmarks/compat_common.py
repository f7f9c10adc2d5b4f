"""What both workers of the compatibility suite share (benchmarks/compat_sqlmesh.py): the edits
whose change categories are compared, and how a table's values are written to JSON so that rows
read from DuckDB (SQLMesh's venv) and from Spark (ours) compare as plain values.

Standard library only: SQLMesh's venv python imports this file too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXECUTION_TIME = "2024-01-08 00:00:00"


@dataclass(frozen=True)
class Edit:
    """Text replacements in project files (each `old` occurs once), applied, planned in dev, undone."""

    name: str
    what: str
    changes: tuple[tuple[str, str, str], ...]  # (file, old, new)


EDITS: tuple[Edit, ...] = (
    Edit("breaking_parent_non_breaking_child",
         "daily_revenue gains a filter (breaking), its child daily_revenue_rollup a column (non-breaking)",
         (("models/daily_revenue.sql", "order_date BETWEEN @start_date AND @end_date",
           "order_date BETWEEN @start_date AND @end_date AND amount > 5"),
          ("models/daily_revenue_rollup.sql", "  revenue,\n", "  revenue,\n  revenue * 2 AS double_revenue,\n"))),
    Edit("metadata_only", "order_lines' description changes",
         (("models/order_lines.sql", "'One row per order, priced'", "'One row per order line, priced'"),)),
    Edit("audit_edit", "daily_revenue's inline audit changes its condition",
         (("models/daily_revenue.sql", "  revenue < 0", "  revenue < -1"),)),
    Edit("seed_edit", "a value of the customers seed changes",
         (("seeds/customers.csv", "2,Bob,80.25,", "2,Bob,81.25,"),)),
    Edit("python_model_edit", "customer_scores' Python code changes its formula",
         (("models/customer_scores.py", "float(total) / 10", "float(total) / 8"),)),
    Edit("python_macro_edit", "the share Python macro (used by item_sales) rounds to one more place",
         (("macros/money.py", "rounded(ratio, SHARE_DIGITS)", "rounded(ratio, SHARE_DIGITS + 1)"),)),
    Edit("macro_helper_edit", "a constant the share macro imports from macros/utils.py changes",
         (("macros/utils.py", "SHARE_DIGITS = 1", "SHARE_DIGITS = 3"),)),
    Edit("jinja_macro_edit", "the money Jinja macro rounds to 1 place",
         (("macros/jinja_money.sql", "{{ expr }}, 2)", "{{ expr }}, 1)"),)),
)


# The edits of the multi-repo project (benchmarks/compat_multi): changes in one repository seen by the other.
MULTI_EDITS: tuple[Edit, ...] = (
    Edit("upstream_breaking", "repo_1's daily_orders gains a filter (breaking); repo_2's order_summary reads it",
         (("repo_1/models/daily_orders.sql", "order_date BETWEEN @start_date AND @end_date",
           "order_date BETWEEN @start_date AND @end_date AND amount > 5"),)),
    Edit("downstream_macro_edit", "repo_2's @dup changes (repo_1's @dup of the same name does not)",
         (("repo_2/macros/__init__.py", "return \"'repo_2'\"", "return \"'repo_two'\""),)),
    Edit("upstream_variable_edit", "repo_1's variable level changes (repo_2's level does not)",
         (("repo_1/config.yaml", "level: 1", "level: 3"),)),
    Edit("python_helper_edit", "the data file beside repo_2's helper module changes",
         (("repo_2/helpers/rates.json", "1.5", "2.5"),)),
)


def repo_paths(project: Path) -> list[Path]:
    """The repositories of a project folder: itself, or (a multi-repo project: no config file of its
    own) its sub-folders holding one, in name order, the first first."""
    if any((project / name).is_file() for name in ("config.py", "config.yaml", "config.yml")):
        return [project]
    return sorted(p for p in project.iterdir() if p.is_dir() and any(p.glob("config.*")))


def edits_for(project: Path) -> tuple[Edit, ...]:
    return MULTI_EDITS if len(repo_paths(project)) > 1 else EDITS


def missing_files(project: Path, edit: Edit) -> list[str]:
    """Files of the edit the project lacks (a `--without` switch removed them)."""
    return sorted({file for file, _, _ in edit.changes if not (project / file).exists()})


def apply_edit(project: Path, edit: Edit) -> dict[Path, str]:
    """Make the edit; returns the files' previous texts (for `undo_edit`)."""
    before: dict[Path, str] = {}
    for file, old, new in edit.changes:
        path = project / file
        text = path.read_text()
        before.setdefault(path, text)
        if text.count(old) != 1:
            raise ValueError(f"edit {edit.name}: {file} holds {old!r} {text.count(old)} times, not once")
        path.write_text(text.replace(old, new))
    return before


def undo_edit(before: dict[Path, str]) -> None:
    for path, text in before.items():
        path.write_text(text)


def plain(value: Any) -> Any:
    """A JSON value for one cell: numbers stay numbers, dates and timestamps become ISO text, NULL
    (None, NaN, NaT) becomes None."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)) and type(value).__module__ == "numpy":
        value = value.item()  # numpy scalar → Python
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if type(value).__name__ in ("NaTType", "NAType"):
        return None
    if hasattr(value, "isoformat"):  # pandas Timestamp
        return value.isoformat(sep=" ")
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "tolist"):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def table_dump(columns: list[str], rows: list[Any]) -> dict[str, Any]:
    """A table's rows, as the engine's driver returns them (no pandas in between: it would turn
    DuckDB's dates into timestamps), as {columns, rows} of plain values."""
    return {"columns": [str(c) for c in columns], "rows": [[plain(v) for v in row] for row in rows]}


MESSAGE_LIMIT = 400


def one_line(error: BaseException | str) -> str:
    """An error's message on one line (cut at MESSAGE_LIMIT characters), with the error's type."""
    text = " ".join(str(error).split())
    text = text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."
    return f"{type(error).__name__}: {text}" if isinstance(error, BaseException) else text
