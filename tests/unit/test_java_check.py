"""The Java check gives one actionable sentence instead of a Py4J gateway failure."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from mesh_dagster.core.errors import EngineError, MeshError
from mesh_dagster.engine.java import check_java, find_java, parse_java_major


def fake_java(directory: Path, version_line: str, to_stdout: bool = False) -> Path:
    """A `java` executable that prints `version_line` the way `java -version` does."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "java"
    redirect = "" if to_stdout else " >&2"
    script.write_text(f"#!/bin/sh\necho '{version_line}'{redirect}\necho 'OpenJDK Runtime Environment'{redirect}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return script


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ('java version "1.8.0_292"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "22-ea" 2024-03-19', 22),
        ("no version here", None),
    ],
)
def test_parse_java_major(output: str, major: int | None) -> None:
    assert parse_java_major(output) == major


def test_too_old_java_is_named_with_its_version_and_path(tmp_path: Path) -> None:
    java = fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')
    with pytest.raises(EngineError) as info:
        check_java(java)
    message = str(info.value)
    assert message.startswith("Java 17 or newer is required to run Spark, but found Java 11 at ")
    assert str(java) in message
    assert "Install OpenJDK 17" in message
    assert "\n" not in message
    assert isinstance(info.value, MeshError)


def test_missing_explicit_java_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "java"
    with pytest.raises(EngineError, match=r"but no `java` was found at .*nowhere/java\. Install OpenJDK 17"):
        check_java(missing)


def test_no_java_on_path_or_java_home(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty-bin")}
    with pytest.raises(EngineError) as info:
        check_java(env=env)
    assert str(info.value).startswith(
        "Java 17 or newer is required to run Spark, but no `java` was found on PATH or in JAVA_HOME. "
        "Install OpenJDK 17"
    )


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    home = tmp_path / "jdk17"
    fake_java(home, 'openjdk version "17.0.1" 2021-10-19')
    old_on_path = fake_java(tmp_path / "old", 'openjdk version "11.0.2" 2019-01-15')
    env = {"JAVA_HOME": str(home), "PATH": str(old_on_path.parent)}
    assert find_java(env) == home / "bin" / "java"
    assert check_java(env=env) == 17


def test_path_is_used_without_java_home(tmp_path: Path) -> None:
    java = fake_java(tmp_path / "j21", 'openjdk version "21.0.2" 2024-01-16')
    env = {"PATH": str(java.parent), "JAVA_HOME": str(tmp_path / "does-not-exist")}
    assert check_java(env=env) == 21


def test_version_printed_on_stdout_is_accepted(tmp_path: Path) -> None:
    java = fake_java(tmp_path, 'openjdk version "17.0.2" 2022-01-18', to_stdout=True)
    assert check_java(java) == 17


def test_unparseable_version_output(tmp_path: Path) -> None:
    java = fake_java(tmp_path, "Error: could not open libjvm.so")
    with pytest.raises(EngineError, match=r"did not report a version \(Error: could not open libjvm.so\)"):
        check_java(java)


def test_java_that_cannot_be_executed(tmp_path: Path) -> None:
    java = tmp_path / "java"
    java.write_text("not a program")  # not executable
    with pytest.raises(EngineError, match=r"could not be run \(.*Permission denied"):
        check_java(java)


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no Java installed")
def test_installed_java_is_recent_enough() -> None:
    assert check_java() >= 17
