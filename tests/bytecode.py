"""Bytecode for the run's many Python processes, compiled once before the workers start.

An editable install writes no bytecode for mesh_dagster, and where `PYTHONDONTWRITEBYTECODE` is
set (it is on the CI machine) no process writes any either: every `mesh` process, Dagster run and
actor process of the suite (hundreds of them) then compiles some 190 modules from source, about
0.4 s of CPU each. `compileall` writes `__pycache__` whatever that variable says, skips what is up
to date, and later processes read it (the variable only stops writing). `__pycache__` is in
.gitignore.
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def install() -> None:
    for package in ("mesh_dagster", "tests"):
        compileall.compile_dir(ROOT / package, quiet=1)
