"""Make a file or folder read-only for the duration of a test, even for root.

Tests often run as root (containers, CI), where `chmod a-w` changes nothing: there the path is
made immutable with `chattr +i` (which binds root too). If neither works the test fails loudly.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    mode = path.stat().st_mode
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield
    finally:
        path.chmod(mode)
