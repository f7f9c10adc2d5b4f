"""What the suite needs from the machine beyond Python, Java and the local Postgres, installed once.

The README's test command (`python -m pytest -n 2`) must pass on a fresh machine of the kind the
project runs on (Debian, Python 3.11, Java 17, Postgres on 127.0.0.1:5432). A few tests use
programs or files that come from Debian's packages; rather than leave that set-up to `.ci/run`,
the test run itself installs what is missing, once, in the controlling process before any worker
starts, and says on one line what it installs and why. A machine where apt cannot install (no
root, no package registry) gets one warning line naming the package; the tests that need it then
fail with the product's own message, loudly, never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# A run may turn the installs off (e.g. a machine whose packages are managed by someone else).
OFF = "MESH_TEST_NO_APT"


@dataclass(frozen=True)
class SystemPackage:
    package: str  # Debian's package name
    provides: Path  # the file whose presence means "installed"
    why: str  # which tests need it, in a few words


PACKAGES = (
    SystemPackage("libpostgresql-jdbc-java", Path("/usr/share/java/postgresql.jar"),
                  "the Hive metastore on Postgres (tests/team, tests/bad_input/test_team_services.py)"),
    SystemPackage("chromium", Path("/usr/bin/chromium"),
                  "a look at the Dagster UI in a headless browser (tests/dagster/test_dagster_truth.py)"),
)


def missing(packages: tuple[SystemPackage, ...] = PACKAGES) -> list[SystemPackage]:
    return [p for p in packages if not p.provides.exists()]


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, env=env, timeout=900, check=False)


def _install(names: list[str]) -> str | None:
    """Install the packages; None when done, otherwise apt's last line of complaint."""
    if shutil.which("apt-get") is None:
        return "apt-get is not on this machine"
    done = _apt("install", "-y", "-qq", "--no-install-recommends", *names)
    if done.returncode != 0:  # stale or absent package lists: refresh once and retry
        _apt("update", "-qq")
        done = _apt("install", "-y", "-qq", "--no-install-recommends", *names)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"apt-get exited with {done.returncode}"


def install(config: pytest.Config) -> None:
    """Install what is missing, once per run (called from the controlling process only)."""
    needed = missing()
    if not needed or os.environ.get(OFF):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else (lambda line: print(line, file=sys.stderr))
    for package in needed:
        say(f"mesh_dagster tests: installing Debian's {package.package} ({package.provides}) with apt-get, "
            f"needed by {package.why}")
    problem = _install([p.package for p in needed])
    if problem is not None or missing(tuple(needed)):
        names = " ".join(p.package for p in needed)
        say(f"mesh_dagster tests: could not install {names} ({problem or 'installed, but its files are not there'}); "
            f"the tests that need it will fail. Install it with `apt-get install {names}`.")
