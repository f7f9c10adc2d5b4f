"""The Connect client loads without IPython's half second (engine/session.py `_without_ipython`),
and IPython stays importable afterwards; a process that already uses IPython keeps it. A stand-in
`IPython` package (first on the path) makes this the same whether or not IPython is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from mesh_dagster.engine.session import _without_ipython
with _without_ipython():
    import pyspark.sql.connect.session  # the client, as a remote session loads it
    try:
        import IPython  # noqa: F401
        blocked = False
    except ImportError:
        blocked = True
print(blocked, "IPython" in sys.modules)
import IPython
print(IPython.STAND_IN)
"""


def _run(tmp_path: Path, script: str) -> list[str]:
    package = tmp_path / "IPython"
    (package / "utils").mkdir(parents=True)
    (package / "__init__.py").write_text("STAND_IN = 'stand-in'\n")
    (package / "utils" / "__init__.py").write_text("")
    (package / "utils" / "terminal.py").write_text("def get_terminal_size(x=None, y=None):\n    return (80, 25)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_connect_client_loads_without_ipython_which_stays_importable(tmp_path: Path) -> None:
    assert _run(tmp_path, SCRIPT) == ["True", "False", "stand-in"]


def test_a_process_already_using_ipython_keeps_it(tmp_path: Path) -> None:
    assert _run(tmp_path, "import IPython\n" + SCRIPT) == ["False", "True", "stand-in"]
