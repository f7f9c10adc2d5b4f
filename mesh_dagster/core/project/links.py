"""Symbolic links in the folders a project is loaded from, refused when they lead outside it.

The loader reads every file of these folders (SQL and Python models, audits, macros, signals,
materializations, seeds, unit tests, external models), so a link among them to a file of the host
would be read, and a pushed branch could show the Dagster host's files in its errors. Every link
is checked, by its target's path alone, before a single file is read; links staying inside the
project are fine. The folders are walked as the loader walks them: into folders, not through
links to folders (a link is checked, never followed). A path a file names (a seed's `path`, a unit
test's fixture file) is checked where it is read (`files.outside_project`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from mesh_dagster.core.config.files import outside_project
from mesh_dagster.core.errors import ModelError

SOURCE_FOLDERS = ("models", "audits", "macros", "signals", "materializations", "seeds", "tests", "external_models")


def refuse_outside_links(root: Path, names: Iterable[str]) -> None:
    """Refuse the first link among the project's files and folders `names` (and everything in those
    folders) that leads outside the project folder `root`."""
    for name in names:
        for link in _links(root / name):
            refusal = outside_project(link, root, str(link.relative_to(root)))
            if refusal is not None:
                raise ModelError(refusal)


def _links(top: Path) -> Iterator[Path]:
    """`top` if it is a link, and every link in the folder it is (or leads to, inside the project)."""
    if top.is_symlink():
        yield top
    if not top.is_dir():
        return
    folders = [top]
    while folders:
        with os.scandir(folders.pop()) as found:
            entries = sorted(found, key=lambda entry: entry.name)  # the same link is named first every time
            for entry in entries:
                if entry.is_symlink():
                    yield Path(entry.path)
                elif entry.is_dir():
                    folders.append(Path(entry.path))
