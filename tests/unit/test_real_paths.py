"""`real_paths()` (core/project/import_path.py) resolves module files a folder at a time, for speed:
whatever the links on the way, it must answer exactly what `os.path.realpath` answers, since the
project's cache key and the modules a new load forgets are decided on that path."""

from __future__ import annotations

import os
from pathlib import Path

from mesh_dagster.core.project.import_path import real_paths


def _tree(tmp_path: Path) -> list[str]:
    """Files reached through linked folders, linked files, links to links, `..`, missing names."""
    real = tmp_path / "real" / "pkg"
    real.mkdir(parents=True)
    (real / "mod.py").write_text("")
    (real / "other.py").write_text("")
    (tmp_path / "outside.py").write_text("")
    (tmp_path / "dirlink").symlink_to(tmp_path / "real")
    (real / "filelink.py").symlink_to(tmp_path / "outside.py")
    (real / "chain.py").symlink_to(real / "filelink.py")
    (real / "dangling.py").symlink_to(tmp_path / "missing.py")
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    bases = [tmp_path / "real" / "pkg", tmp_path / "dirlink" / "pkg", tmp_path / "dirlink" / "pkg" / ".." / "pkg"]
    names = ["mod.py", "other.py", "filelink.py", "chain.py", "dangling.py", "absent.py", ".", "..", ""]
    paths = [os.path.join(str(base), name) for base in bases for name in names]
    return [*paths, str(tmp_path / "loop_a" / "x.py"), str(tmp_path / "dirlink" / "pkg") + os.sep]


def test_each_path_resolves_as_realpath_does(tmp_path: Path) -> None:
    real = real_paths()
    for path in _tree(tmp_path) * 2:  # the second time from the folders already resolved
        assert real(path) == os.path.realpath(path), path


def test_relative_paths_resolve_from_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = real_paths()
    for path in ["dirlink/pkg/mod.py", "real/pkg/filelink.py", "mod.py", "dirlink/../outside.py"]:
        assert real(path) == os.path.realpath(path), path
