"""Cheaper JVM starts for the test run: a class-data-sharing archive of Spark's classes, and C1 only.

Most of the suite's time is JVMs starting: every `mesh` process, Connect server, Dagster run and
actor process starts Spark, which loads some 15,000 classes and JIT-compiles its start-up path
before it runs a single small query. Two HotSpot options cut that by about half (measured on a
`mesh fetchdf`: 26 s -> 12 s), without changing what runs:

- `-XX:SharedArchiveFile`: the classes Spark, Hive and Derby load, parsed and verified once into
  an archive that later JVMs map instead of reading and verifying jars again (JDK 13+ dynamic CDS).
- `-XX:TieredStopAtLevel=1`: the quick C1 compiler only. Tests run many short JVMs on tiny data,
  where C2's compile work at start-up costs more than its faster code ever wins back.

They reach every JVM of the run through `SPARK_SUBMIT_OPTS`, which Spark's launcher adds to the
java command of the driver (PySpark's gateway, `spark-submit` of the Connect server) and which
processes inherit. Spark's own configuration and the project's `spark.driver.extraJavaOptions`
are untouched. The archive is the product's own (`mesh_dagster/engine/class_archive.py`, which
then adds nothing: the options are already there), made once per machine, JDK and Spark in the
temp dir rather than the user's cache; until it is there, and if a JDK or jar changed under it, a
JVM silently runs without it (`-Xlog:cds*=off`: no warning on stdout, which tests read).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mesh_dagster.engine import class_archive

ENV = "SPARK_SUBMIT_OPTS"
OFF = "MESH_TEST_PLAIN_JVM"  # set to 1 to run the suite with the JVM's defaults
_STATE = pytest.StashKey[dict]()
_C1_ONLY = "-XX:TieredStopAtLevel=1"



def _build(archive: Path, state: dict, env: dict[str, str]) -> None:
    """Make the archive as the product does, in a process `uninstall` can kill. `env`: the
    environment from before `install` named the archive in SPARK_SUBMIT_OPTS: a trainer told to map
    the (missing) archive it is making runs without class sharing and archives nothing."""
    class_archive.build(archive, started=lambda proc: state.update(proc=proc), env=env)


def install(config: pytest.Config) -> None:
    """Set the options for every JVM of this run, and start making the archive if there is none."""
    state: dict = {}
    config.stash[_STATE] = state
    # The product's archive, in the test run's own cache: made once per machine, never in ~/.cache.
    os.environ[class_archive.CACHE_ENV] = str(Path(tempfile.gettempdir()) / "mesh_dagster-test-jvm")
    if os.environ.get(OFF) == "1":
        os.environ[class_archive.OFF_ENV] = "off"
        return
    options = [_C1_ONLY]
    archive = class_archive.archive_path()
    if archive is not None:
        options = [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off", *options]
        if not archive.is_file():
            state["thread"] = threading.Thread(target=_build, args=(archive, state, dict(os.environ)), daemon=True)
            state["thread"].start()
        elif not class_archive.seal_path(archive).exists():  # made before archives were sealed: the suite maps it
            class_archive.write_seal(archive, class_archive.Seal.of(archive))
    state["previous"] = os.environ.get(ENV)
    os.environ[ENV] = " ".join(options + ([state["previous"]] if state["previous"] else []))


@contextmanager
def long_lived() -> Iterator[None]:
    """Start a JVM that serves a whole module (a shared Connect server) with tiered compilation
    back: over minutes of queries C2's code wins back its compile work (measured on the kill-points
    server, 16 model writes a run: C1 only, 58 then 66 and 67 CPU-s a run; tiered, 66 then 54 and
    47). Class data sharing stays."""
    previous = os.environ.get(ENV)
    if previous is not None:
        os.environ[ENV] = " ".join(o for o in previous.split() if o != _C1_ONLY)
    try:
        yield
    finally:
        if previous is not None:
            os.environ[ENV] = previous


def uninstall(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, {})
    proc = state.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
    if state.get("thread") is not None:
        state["thread"].join(timeout=30)
    if "previous" in state:
        if state["previous"] is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = state["previous"]


def suite_archive() -> Path:
    """The archive this run made (the product's build, `class_archive`), once it is there: tests
    that start a JVM with it, or copy it, wait for the build the session started."""
    archive = class_archive.archive_path()
    assert archive is not None
    deadline = time.monotonic() + 600
    while not archive.is_file() and time.monotonic() < deadline:
        time.sleep(5)  # still being made
    assert archive.is_file(), f"the suite's archive {archive} was not made"
    return archive
