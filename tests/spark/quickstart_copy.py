"""The example project copied under a schema of its own, its history starting in 2020 (tests share
one metastore), and an in-place edit that fails loudly when the text to replace is not there."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"


def quickstart(root: Path, schema: str) -> Path:
    root.mkdir(parents=True)
    for part in ("config.yaml", "models", "seeds", "audits", "macros"):
        source = EXAMPLE / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, root / part)
    for path in [root / "config.yaml", *(root / "models").glob("*.sql")]:
        text = path.read_text().replace("sqlmesh_example", schema)
        path.write_text(text.replace("start: 2025-06-12", "start: 2020-01-01"))
    return root


def edit(path: Path, old: str, new: str) -> None:
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
