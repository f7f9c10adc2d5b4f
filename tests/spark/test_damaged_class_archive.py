"""A damaged class-data-sharing archive (engine/class_archive.py) is never mapped: HotSpot maps it
without reading it through, so a truncated one crashed every local JVM as it started (SIGBUS, an
`hs_err_pid*.log` in the project, "Java gateway process exited"). The builder seals what it
publishes; a start maps the archive only while it matches its seal, else says so in one line,
starts without it and has it rebuilt.

Every test keeps its archives in its own `MESH_JVM_CACHE`: the suite's archive is only read (copied).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from project_builder import write_project

from mesh_dagster.engine import class_archive
from mesh_dagster.engine.server_record import SERVER_ENV
from tests.jvm_startup import suite_archive


def _env(cache: Path) -> dict[str, str]:
    """This environment without the suite's own JVM options (so the product adds its archive), caching in `cache`."""
    plain = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", class_archive.OFF_ENV)}
    # The command's own JVM (the opt-out lane), whichever lane the suite runs in: what is tested is that JVM's start.
    return {**plain, class_archive.CACHE_ENV: str(cache), SERVER_ENV: "0"}


def _stop_builder(cache: Path) -> None:
    lock = cache / "building.lock"
    try:
        os.killpg(int(lock.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def _sealed_fake(cache: Path) -> tuple[dict[str, str], Path]:
    env = _env(cache)
    archive = class_archive.archive_path(env)
    assert archive is not None, "no JDK or no Spark jars found"
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(os.urandom(1 << 20))
    class_archive.write_seal(archive, class_archive.Seal.of(archive))
    return env, archive


def test_an_archive_is_mapped_only_while_it_matches_its_seal(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    env, archive = _sealed_fake(tmp_path)
    mapped = f'"-XX:SharedArchiveFile={archive}" -Xlog:cds*=off'
    assert class_archive.java_options("", env) == mapped
    os.utime(archive, ns=(time.time_ns(), time.time_ns() + 10**9))  # touched, not changed: sealed again
    assert class_archive.java_options("", env) == mapped
    assert class_archive.Seal.model_validate_json(class_archive.seal_path(archive).read_text()).mtime_ns == \
        archive.stat().st_mtime_ns
    with open(archive, "r+b") as f:
        f.truncate(1 << 19)
    caplog.set_level(logging.WARNING, logger=class_archive.__name__)
    try:
        assert class_archive.java_options("", env) == ""  # not mapped, and no build beside the JVM asking
        assert not (tmp_path / "building.lock").exists()
        assert class_archive.build_if_needed("", env) is not None  # when nobody waits: rebuilt
        assert class_archive.build_if_needed("", env) is None  # asked again while it is being rebuilt: no news
        assert (tmp_path / "building.lock").is_file()
    finally:
        _stop_builder(tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        f"The JVM class archive {archive} is damaged (524,288 bytes, 1,048,576 were written): rebuilding it (Spark "
        f"starts without it meanwhile)"]


@pytest.mark.parametrize("damage, problem", [
    ("content", "is damaged (its content changed after it was written)"),
    ("seal", "has no seal (made by an older mesh_dagster, or damaged)"),
])
def test_changed_bytes_or_a_missing_seal_are_not_mapped(tmp_path: Path, damage: str, problem: str) -> None:
    env, archive = _sealed_fake(tmp_path)
    if damage == "content":
        with open(archive, "r+b") as f:  # same size
            f.seek(1000)
            f.write(b"\0" * 64)
    else:
        class_archive.seal_path(archive).unlink()
    assert class_archive.damage(archive) == problem
    try:
        assert class_archive.java_options("", env) == ""
    finally:
        _stop_builder(tmp_path)


def test_a_truncated_archive_neither_crashes_a_command_nor_leaves_a_crash_report(tmp_path: Path) -> None:
    """The issue's case, with a real archive cut short: `mesh fetchdf` works, says what happened in one
    line, leaves no `hs_err_pid*.log`, and has the archive rebuilt by the background builder (whose
    build is the one that made the suite's own archive, `tests/jvm_startup.py`, mapped by every JVM here)."""
    cache = tmp_path / "cache"
    archive = _suite_archive_copy(cache)
    size = archive.stat().st_size
    with open(archive, "r+b") as f:
        f.truncate(size // 2)
    project = write_project(tmp_path / "project", {})
    try:
        done = subprocess.run([sys.executable, "-m", "mesh_dagster.cli.main", "fetchdf", "SELECT 1 AS one"],
                              cwd=project, env=_env(cache), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split() == ["one", "0", "1"]
        assert done.stderr.strip() == (
            f"The JVM class archive {archive} is damaged ({size // 2:,} bytes, {size:,} were written): rebuilding it "
            "(Spark starts without it meanwhile)")
        assert not list(tmp_path.rglob("hs_err_pid*.log"))
        builder = psutil.Process(int((cache / "building.lock").read_text()))
        assert builder.cmdline()[-3:] == ["-m", "mesh_dagster.engine.class_archive", str(archive)]
    finally:
        _stop_builder(cache)


def test_the_builder_leaves_a_sound_archive_alone_and_frees_its_lock(tmp_path: Path) -> None:
    """The background builder's own frame around the build: an archive that became sound meanwhile
    (another builder's) is kept as it is, and the lock goes with the builder."""
    archive = _suite_archive_copy(tmp_path)
    before = class_archive.Seal.of(archive)
    lock = tmp_path / "building.lock"
    lock.write_text(str(os.getpid()))
    done = subprocess.run([sys.executable, "-m", "mesh_dagster.engine.class_archive", str(archive)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not lock.exists()
    assert class_archive.Seal.of(archive) == before and class_archive.damage(archive) is None


def _suite_archive_copy(cache: Path) -> Path:
    """A sealed copy of the suite's archive in `cache`, where the product looks for its archive."""
    cache.mkdir(exist_ok=True)
    archive = cache / suite_archive().name
    subprocess.run(["cp", str(suite_archive()), str(archive)], check=True)
    archive.chmod(0o644)
    class_archive.write_seal(archive, class_archive.Seal.of(archive))
    return archive
