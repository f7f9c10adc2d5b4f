"""The class-data-sharing archive local driver JVMs map (engine/class_archive.py).

The whole suite's JVMs start with the archive this module makes (tests/jvm_startup.py builds it
with `class_archive.build`); here: when the product adds it, when it leaves the JVM alone, the
build lock, and a product-started JVM that maps it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine import class_archive
from mesh_dagster.engine.session import local_session_config
from tests.jvm_startup import suite_archive


def _env(cache: Path, **extra: str) -> dict[str, str]:
    plain = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", class_archive.OFF_ENV)}
    return {**plain, class_archive.CACHE_ENV: str(cache), **extra}


def _with_archive(tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = _env(tmp_path)
    archive = class_archive.archive_path(env)
    assert archive is not None, "no JDK or no Spark jars found"
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"")
    class_archive.write_seal(archive, class_archive.Seal.of(archive))  # as the builder publishes it
    return env, archive


def test_an_archive_in_the_cache_is_mapped_by_local_drivers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    env, archive = _with_archive(tmp_path)
    assert class_archive.java_options("", env) == f'"-XX:SharedArchiveFile={archive}" -Xlog:cds*=off'
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    options = local_session_config(SparkConnectionConfig(master="local[1]"), tmp_path / "mesh")
    assert f"-XX:SharedArchiveFile={archive}" in options["spark.driver.extraJavaOptions"]
    cluster = local_session_config(SparkConnectionConfig(master="spark://127.0.0.1:7077"), tmp_path / "mesh")
    assert "SharedArchiveFile" not in cluster["spark.driver.extraJavaOptions"]


@pytest.mark.parametrize("where", ["project", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "off"])
def test_users_who_manage_class_sharing_are_left_alone(tmp_path: Path, where: str):
    env, _ = _with_archive(tmp_path)
    own = "-XX:SharedArchiveFile=/opt/mine.jsa"
    if where == "project":
        assert class_archive.java_options(own, env) == ""
        return
    if where == "off":
        env[class_archive.OFF_ENV] = "off"
    else:
        env[where] = own
    assert class_archive.java_options("", env) == ""
    assert not (tmp_path / "building.lock").exists()  # and no build started


def test_a_jvm_asking_for_a_missing_archive_starts_no_build_beside_it(tmp_path: Path):
    # Building it beside the command that asked made that command twice as slow (issue 36): the
    # archive is built where nobody waits (build_if_needed: the idle server's watcher, a command's exit).
    env = _env(tmp_path)
    assert class_archive.java_options("", env) == ""
    assert not (tmp_path / "building.lock").exists()
    builder = class_archive.build_if_needed("", env)
    try:
        assert builder is not None and (tmp_path / "building.lock").read_text() == str(builder.pid)
    finally:
        if builder is not None:
            os.killpg(builder.pid, signal.SIGKILL)
            builder.wait()


def test_a_missing_archive_starts_one_builder_and_a_dead_builders_lock_is_taken_over(tmp_path: Path):
    env = _env(tmp_path)
    lock = tmp_path / "building.lock"
    lock.write_text("999999999")  # a builder that died (kill -9) left its lock
    archive = class_archive.archive_path(env)
    assert archive is not None
    builder = class_archive.start_build(archive)
    try:
        assert builder is not None and lock.read_text() == str(builder.pid)
        assert class_archive.start_build(archive) is None  # one builder at a time
        assert class_archive.java_options("", env) == ""  # meanwhile JVMs start without an archive
    finally:
        if builder is not None:
            os.killpg(builder.pid, signal.SIGKILL)
            builder.wait()


def test_a_product_started_jvm_runs_with_the_archive(tmp_path: Path):
    """The archive the suite made (the product's build): a driver started through build_session
    with no options of ours in the environment gets it, and starts."""
    archive = suite_archive()
    probe = (
        "import sys\nfrom pathlib import Path\n"
        "from mesh_dagster.core.config.connections import SparkConnectionConfig\n"
        "from mesh_dagster.engine.session import build_session\n"
        "spark = build_session(SparkConnectionConfig(master='local[1]'), Path(sys.argv[1]))\n"
        "jvm = spark.sparkContext._jvm\n"
        "print(list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))\n"
        "print(spark.sql('SELECT 1').collect())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "mesh")], cwd=tmp_path,
                          env=_env(archive.parent), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"-XX:SharedArchiveFile={archive}" in done.stdout
    assert "[Row(1=1)]" in done.stdout
