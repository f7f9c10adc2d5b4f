"""Finding a Java runtime good enough for Spark.

PySpark starts the JVM through `spark-submit`; when Java is missing or too old the user gets a
page of shell and Py4J noise ("Java gateway process exited before sending its port number").
Checking first lets us say in one sentence what is wrong and how to fix it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mesh_dagster.core.errors import EngineError

MINIMUM_JAVA = 17

_INSTALL_HINT = (
    "Install OpenJDK {minimum} (e.g. `apt-get install openjdk-{minimum}-jre-headless` or "
    "`brew install openjdk@{minimum}`) and put it on PATH or set JAVA_HOME, "
    "or point the gateway's `connection.remote` at a Spark Connect server."
)
_VERSION = re.compile(r'version\s+"([^"]+)"')


def find_java(env: Mapping[str, str] | None = None) -> Path | None:
    """The `java` Spark would launch: JAVA_HOME/bin/java first (spark-submit's rule), else PATH."""
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("java", path=env.get("PATH", ""))
    return Path(found) if found else None


def parse_java_major(version_output: str) -> int | None:
    """Major version from `java -version` output: `"1.8.0_292"` is 8, `"11.0.2"` is 11, `"21"` is 21."""
    match = _VERSION.search(version_output)
    if not match:
        return None
    parts = re.split(r"[._+\-]", match.group(1))
    if parts[0] == "1" and len(parts) > 1:
        parts = parts[1:]
    return int(parts[0]) if parts[0].isdigit() else None


def check_java(
    java: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    minimum: int = MINIMUM_JAVA,
) -> int:
    """Return the major version of the Java Spark will use, or raise EngineError saying why it cannot.

    `java` names an explicit executable (tests use fake scripts); otherwise it is looked up in
    `env` (default: this process's environment) the way spark-submit does.
    """
    hint = _INSTALL_HINT.format(minimum=minimum)
    path = Path(java) if java is not None else find_java(env)
    if path is None or not path.is_file():
        where = f"at {path}" if path is not None else "on PATH or in JAVA_HOME"
        raise EngineError(f"Java {minimum} or newer is required to run Spark, but no `java` was found {where}. {hint}")
    try:
        output = _run_version(path, env)
    except (OSError, subprocess.SubprocessError) as e:
        raise EngineError(
            f"Java {minimum} or newer is required to run Spark, but `{path}` could not be run ({e}). {hint}"
        ) from None
    major = parse_java_major(output)
    if major is None:
        first = next((line for line in output.splitlines() if line.strip()), "no output")
        raise EngineError(
            f"Java {minimum} or newer is required to run Spark, but `{path} -version` did not report a "
            f"version ({first.strip()}). {hint}"
        )
    if major < minimum:
        raise EngineError(
            f"Java {minimum} or newer is required to run Spark, but found Java {major} at {path}. {hint}"
        )
    return major


def _run_version(path: Path, env: Mapping[str, str] | None) -> str:
    # `java -version` prints to stderr; some wrappers print to stdout, so read both.
    done = subprocess.run(
        [str(path), "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env) if env is not None else None,
    )
    return f"{done.stderr}\n{done.stdout}"
