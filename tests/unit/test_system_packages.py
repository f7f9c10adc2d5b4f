"""The test run installs what it needs from Debian itself (tests/system_packages.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import system_packages
from tests.system_packages import SystemPackage


def test_the_jdbc_driver_is_one_of_the_packages() -> None:
    names = {p.package: p.provides for p in system_packages.PACKAGES}
    assert names["libpostgresql-jdbc-java"] == Path("/usr/share/java/postgresql.jar")


def test_missing_is_decided_by_the_file(tmp_path: Path) -> None:
    there = tmp_path / "there.jar"
    there.write_bytes(b"PK")
    packages = (SystemPackage("a", there, "x"), SystemPackage("b", tmp_path / "absent.jar", "y"))
    assert [p.package for p in system_packages.missing(packages)] == ["b"]


def test_without_apt_get_the_reason_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system_packages.shutil, "which", lambda name: None)
    assert system_packages._install(["libpostgresql-jdbc-java"]) == "apt-get is not on this machine"
