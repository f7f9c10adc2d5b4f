"""A class-data-sharing archive of Spark's classes: every later local JVM starts in less time.

Every `mesh` command on the embedded default starts a JVM that loads some 15,000 classes of Spark,
Hive and Derby, reading and verifying them from jars, before it runs one query. HotSpot can map
those classes from an archive made once instead (JDK 13+ dynamic class-data sharing): measured on
`mesh fetchdf` of the example project, 11.5 s -> 6.9 s a command.

The archive belongs to one JDK and one set of Spark jars (its name is a hash of both) and lives in
the user's cache (`$XDG_CACHE_HOME/mesh_dagster/jvm`, or `MESH_JVM_CACHE`). It is made when nobody
waits for the machine (`build_if_needed`): once the project's warm Spark server idles (its idle
watcher asks), or as a command that ran Spark in its own process exits. Building it beside a
command, as the first version did, made that command twice as slow on a 2-core machine. The build
is a background process (a Spark session of its own in a temporary directory, about half a minute
at low priority), published by a rename so no JVM ever maps a half-written file; JVMs started
before that run without it. A JVM whose JDK, jars or class path no longer match the archive
ignores it silently (`-Xlog:cds*=off`), so a stale archive costs nothing but its disk space.

A damaged archive is another matter: HotSpot maps it without reading it through, so a truncated
one crashes the JVM as it starts (SIGBUS, and an `hs_err_pid*.log` in the working directory) and
one with changed bytes crashes it later, leaving only PySpark's "Java gateway process exited".
So the builder seals what it publishes (size, modification time and SHA-256, in `<archive>.seal`)
and a JVM maps the archive only while it matches its seal: a `stat` and a small read per start,
the digest only when the file was touched. An archive that does not match (or has no seal: an
older mesh_dagster made it) is not mapped; one line says so and a build replaces it.

Users who manage class-data sharing themselves (`SharedArchiveFile`, `ArchiveClassesAtExit`,
`-Xshare` in SPARK_SUBMIT_OPTS, JDK_JAVA_OPTIONS, JAVA_TOOL_OPTIONS or the project's
`spark.driver.extraJavaOptions`) are left alone; `MESH_JVM_ARCHIVE=off` turns the archive off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError

from mesh_dagster.engine.java import find_java

OFF_ENV = "MESH_JVM_ARCHIVE"  # `off` turns the archive off
CACHE_ENV = "MESH_JVM_CACHE"  # the directory archives are kept in
_OWN_CDS = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")
_JAVA_ENV = ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")
_BUILD_LOCK = "building.lock"
_MISSING = "is missing"
logger = logging.getLogger(__name__)

# Starts Spark as a local session does (Hive catalog, Derby metastore, warehouse under a .mesh dir)
# and touches what commands touch: DDL, a partitioned Parquet write, reads, a view, a pandas frame.
_TRAINING = """
import sys
from pathlib import Path
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.engine.session import build_session
spark = build_session(SparkConnectionConfig(master="local[2]", config={"spark.sql.shuffle.partitions": 2}),
                      Path(sys.argv[1]))
engine = SparkEngine(spark)
engine.catalog.create_schema("cds")
engine.session.execute("CREATE TABLE cds.t (id INT, v STRING, ds DATE) USING parquet PARTITIONED BY (ds)")
engine.session.execute("INSERT OVERWRITE TABLE cds.t VALUES (1, 'a', DATE'2020-01-01'), (2, 'b', DATE'2020-01-02')")
engine.catalog.create_view("cds.v", "SELECT ds, COUNT(*) AS n FROM cds.t GROUP BY ds")
engine.session.fetchall("SELECT * FROM cds.v ORDER BY ds")
engine.session.fetchdf("SELECT id, v, ds FROM cds.t")
engine.catalog.columns("cds.t")
jvm = spark.sparkContext._gateway.proc  # the java process itself (spark-submit execs it)
spark.stop()
jvm.stdin.close()  # the gateway exits on EOF, and writes the archive on its way out
sys.exit(jvm.wait(timeout=300))
"""


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mesh_dagster" / "jvm"


def archive_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The archive for the JDK Spark would launch and the installed Spark jars; None when either is
    missing (Spark then fails with its own message, or runs from a Spark home we do not hash)."""
    java = find_java(env)
    jars = _spark_jars()
    if java is None or jars is None:
        return None
    java = java.resolve()
    key = hashlib.sha256()
    release = java.parents[1] / "release"
    key.update(str(java).encode() + (release.read_bytes() if release.is_file() else b""))
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        key.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return cache_dir(env) / f"spark-{key.hexdigest()[:16]}.jsa"


def java_options(user_options: str = "", env: Mapping[str, str] | None = None) -> str:
    """The options that map the archive into a local driver JVM, or '' when there is none to map.
    `user_options`: the project's extraJavaOptions. Never builds one: that would slow the very
    command that asked (`build_if_needed`, called when nobody waits)."""
    archive, problem = _archive_state(user_options, env)
    return f'"-XX:SharedArchiveFile={archive}" -Xlog:cds*=off' if archive is not None and problem is None else ""


def build_if_needed(user_options: str = "", env: Mapping[str, str] | None = None) -> subprocess.Popen | None:
    """Start making the archive in the background when it applies and is missing or damaged.

    Called where no command waits for the machine: by the warm server's idle watcher once the server
    idles, and by a command that ran Spark in its own process as it exits."""
    archive, problem = _archive_state(user_options, env)
    if archive is None or problem is None:
        return None
    builder = start_build(archive)
    if builder is not None and problem != _MISSING:  # said once, by the process that rebuilds it
        logger.warning(f"The JVM class archive {archive} {problem}: rebuilding it (Spark starts without it meanwhile)")
    return builder


def _archive_state(user_options: str, env: Mapping[str, str] | None) -> tuple[Path | None, str | None]:
    """(archive, what is wrong with it): no archive when class sharing is off, the user's own, or
    impossible here; nothing wrong when it can be mapped."""
    env = os.environ if env is None else env
    if env.get(OFF_ENV, "").lower() in ("off", "0", "false", "no"):
        return None, None
    if any(flag in text for text in (user_options, *(env.get(k, "") for k in _JAVA_ENV)) for flag in _OWN_CDS):
        return None, None
    archive = archive_path(env)
    if archive is None:
        return None, None
    if not archive.is_file():
        return archive, _MISSING
    try:
        return archive, damage(archive)
    except OSError:
        return None, None  # an unreadable cache: every JVM starts as it would without us


class Seal(BaseModel, frozen=True):
    """What the builder published: a file of this size, modification time and content."""

    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> Seal:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        stat = path.stat()
        return cls(size=stat.st_size, mtime_ns=stat.st_mtime_ns, sha256=digest)


def seal_path(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.seal")


def write_seal(archive: Path, sealed: Seal) -> None:
    """Record `sealed` as what was published at `archive` (`<archive>.seal`, replaced atomically)."""
    path = seal_path(archive)
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(sealed.model_dump_json())
    os.replace(partial, path)


def damage(archive: Path) -> str | None:
    """What is wrong with `archive` against its seal, as the end of a sentence; None when it matches.

    A file touched without a change (same size, other time, same digest) is sealed again, so the
    digest is not read on every start after it."""
    try:
        sealed = Seal.model_validate_json(seal_path(archive).read_bytes())
    except (OSError, ValidationError):
        return "has no seal (made by an older mesh_dagster, or damaged)"
    stat = archive.stat()
    if stat.st_size != sealed.size:
        return f"is damaged ({stat.st_size:,} bytes, {sealed.size:,} were written)"
    if stat.st_mtime_ns == sealed.mtime_ns:
        return None
    current = Seal.of(archive)
    if current.sha256 != sealed.sha256:
        return "is damaged (its content changed after it was written)"
    write_seal(archive, current)
    return None


def start_build(archive: Path) -> subprocess.Popen | None:
    """Make `archive` in a detached, low-priority process, unless another process is making it."""
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        lock = archive.parent / _BUILD_LOCK
        if not _claim(lock):
            return None
        builder = subprocess.Popen(
            [sys.executable, "-m", "mesh_dagster.engine.class_archive", str(archive)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        lock.write_text(str(builder.pid))  # the builder holds the lock from here on
        return builder
    except OSError:
        return None  # an unwritable cache: every JVM starts as it would without us


def build(archive: Path, started: Callable[[subprocess.Popen], object] | None = None,
          env: Mapping[str, str] | None = None) -> bool:
    """Train a JVM and publish what it archived at exit under `archive`; False if it failed.
    `started` is given the training process (the test run kills it if it ends first); `env` the
    environment it starts in (default: this process's, as it is when the trainer starts)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="train-", dir=archive.parent))
    try:
        trainer = _train(work, os.environ if env is None else env)
        if started is not None:
            started(trainer)
        trainer.wait(timeout=900)
        return _publish(trainer, work, archive)
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _train(work: Path, base: Mapping[str, str]) -> subprocess.Popen:
    """Start the training process in `work`: its JVM writes `work/spark.jsa` as it exits."""
    submit = f"{base.get('SPARK_SUBMIT_OPTS', '')} -XX:ArchiveClassesAtExit={work / 'spark.jsa'} -Xlog:cds*=off"
    env = {**base, "SPARK_SUBMIT_OPTS": submit.strip()}
    with open(work / "train.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-c", _TRAINING, str(work / ".mesh")], cwd=work, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def _publish(trainer: subprocess.Popen, work: Path, archive: Path) -> bool:
    """Seal the finished trainer's archive and rename it into place: a JVM never maps a half-written
    one, nor one changed since (the rename keeps size and time, the seal names both)."""
    partial = work / "spark.jsa"
    if trainer.returncode != 0 or not partial.is_file():
        return False
    write_seal(archive, Seal.of(partial))
    os.replace(partial, archive)
    return True


def _claim(lock: Path) -> bool:
    """Take the build lock: a file holding the builder's pid; one left by a dead process is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _alive(lock):
                return False
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _alive(lock: Path) -> bool:
    try:
        pid = int(lock.read_text().strip() or "0")
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def _spark_jars() -> Path | None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return jars if jars.is_dir() else None


def _main(argv: list[str]) -> int:
    """The background builder: the lock holds its pid while it works; it frees the lock at the end."""
    archive = Path(argv[0])
    lock = archive.parent / _BUILD_LOCK
    try:
        os.nice(10)
        return 0 if (archive.is_file() and damage(archive) is None) or build(archive) else 1
    finally:
        lock.unlink(missing_ok=True)


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
