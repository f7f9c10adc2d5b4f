"""What each environment's code location counts as pending, for `mesh ui` to notice when it is stale.

A location computes, as it loads, each changed model's work: the intervals of its current version
not computed yet ("7 partition(s) to recompute"). Intervals computed afterwards — by
a run of this location, by another environment sharing the version, by `mesh` — change those
counts, and Dagster has no hot reload. So a location notes the table versions it counted
(`note_pending`), and `mesh ui`'s watch (ui/watch.py) reloads it when their intervals change.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def ui_home(project_dir: str | Path) -> Path:
    """The project's Dagster instance and workspace folder."""
    return Path(project_dir).resolve() / ".mesh" / "dagster"


def pending_file(project_dir: str | Path, environment: str) -> Path:
    return ui_home(project_dir) / "pending" / f"{environment}.json"


def note_pending(project_dir: str | Path, environment: str, keys: Iterable[tuple[str, str]]) -> None:
    """Note the `(model, version)` keys whose intervals the environment's location counted; written
    whole or not at all (a watch never reads half a file). A folder that cannot be written (a
    read-only deployment) notes nothing: only `mesh ui` reads it."""
    path = pending_file(project_dir, environment)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump(sorted(set(keys)), out)
        os.replace(out.name, path)
    except OSError:
        return


def noted_pending(project_dir: str | Path, environment: str) -> list[tuple[str, str]]:
    """The keys `note_pending` noted last for the environment (none: nothing noted, or unreadable)."""
    try:
        return [(str(name), str(version)) for name, version in json.loads(pending_file(project_dir, environment)
                                                                         .read_text())]
    except (OSError, ValueError, TypeError):
        return []
