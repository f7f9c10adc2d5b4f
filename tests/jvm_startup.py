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
are untouched. The archive is made once per machine, JDK and Spark (in the temp dir), by a
process that starts Spark the way the product does and runs a few statements; until it is there,
and if a JDK or jar changed under it, a JVM silently runs without it (`-Xlog:cds*=off`: no
warning on stdout, which tests read).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ENV = "SPARK_SUBMIT_OPTS"
OFF = "MESH_TEST_PLAIN_JVM"  # set to 1 to run the suite with the JVM's defaults
_STATE = pytest.StashKey[dict]()
_C1_ONLY = "-XX:TieredStopAtLevel=1"

# Starts Spark as the product does (Hive catalog, Derby metastore, warehouse under a .mesh dir)
# and touches what tests touch: DDL, a partitioned Parquet write, reads, a view, a pandas frame.
_TRAIN = """
import sys
from pathlib import Path
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.engine.session import build_session
spark = build_session(SparkConnectionConfig(master="local[2]", config={"spark.sql.shuffle.partitions": 2}),
                      Path(sys.argv[1]))
engine = SparkEngine(spark)
engine.create_schema("cds")
engine.execute("CREATE TABLE cds.t (id INT, v STRING, ds DATE) USING parquet PARTITIONED BY (ds)")
engine.execute("INSERT OVERWRITE TABLE cds.t VALUES (1, 'a', DATE'2020-01-01'), (2, 'b', DATE'2020-01-02')")
engine.create_view("cds.v", "SELECT ds, COUNT(*) AS n FROM cds.t GROUP BY ds")
engine.fetchall("SELECT * FROM cds.v ORDER BY ds")
engine.fetchdf("SELECT id, v, ds FROM cds.t")
engine.columns("cds.t")
jvm = spark.sparkContext._gateway.proc  # the java process itself (spark-submit execs it)
spark.stop()
jvm.stdin.close()  # the gateway exits on EOF, and writes the archive on its way out
sys.exit(jvm.wait(timeout=300))
"""


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    if java is None or not java.is_file():
        found = shutil.which("java")
        java = Path(found) if found else None
    return java.resolve() if java else None


def _archive_path() -> Path | None:
    """The archive for this JDK and this Spark; None when either is missing."""
    try:
        import pyspark
    except ImportError:
        return None
    java = _java()
    jars = Path(pyspark.__file__).parent / "jars"
    if java is None or not jars.is_dir():
        return None
    key = hashlib.sha256()
    release = java.parents[1] / "release"
    key.update(str(java).encode() + (release.read_bytes() if release.is_file() else b""))
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        key.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return Path(tempfile.gettempdir()) / "mesh_dagster-test-jvm" / f"spark-{key.hexdigest()[:16]}.jsa"


def _build(archive: Path, state: dict) -> None:
    """Make the archive in a process of its own; published by a rename, so never seen half-written."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="train-", dir=archive.parent))
    partial = work / "spark.jsa"
    env = {**os.environ, ENV: f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"}
    try:
        with open(work / "train.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-c", _TRAIN, str(work / ".mesh")], cwd=work, env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            state["proc"] = proc
            proc.wait(timeout=600)
        if proc.returncode == 0 and partial.is_file():
            os.replace(partial, archive)
    except (OSError, subprocess.SubprocessError):
        pass  # no archive: JVMs start as usual
    finally:
        shutil.rmtree(work, ignore_errors=True)


def install(config: pytest.Config) -> None:
    """Set the options for every JVM of this run, and start making the archive if there is none."""
    state: dict = {}
    config.stash[_STATE] = state
    if os.environ.get(OFF) == "1":
        return
    options = [_C1_ONLY]
    archive = _archive_path()
    if archive is not None:
        options = [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off", *options]
        if not archive.is_file():
            state["thread"] = threading.Thread(target=_build, args=(archive, state), daemon=True)
            state["thread"].start()
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
