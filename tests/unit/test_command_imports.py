"""`mesh plan --explain` loads only what planning needs, and `mesh --help` nothing of a project's
(issue 36: imports were ~75% of a warm explain, and `--help` cost a second of CPU).

Each test runs the real command line in a fresh process and lists the modules that process
imported: a module-level import that pulls the apply and run machinery, Spark, Dagster or the warm
server's process back into planning (or Context into `--help`) fails here, however indirect it is.

The state store's SQLAlchemy is expected: the plan reads `state.db` through it (and a first plan
creates the file).
"""

import importlib
import json
import subprocess
import sys

from project_builder import write_project

# Prefixes of modules a plan never needs: execution's rooms that evaluate, write, move views and run
# intervals (planning and the listener seam are allowed), Spark, Dagster, and psutil (asked only of
# a running warm server).
NOT_FOR_PLANNING = (
    "mesh_dagster.execution.apply",
    "mesh_dagster.execution.evaluate",
    "mesh_dagster.execution.intervals",
    "mesh_dagster.execution.inspection",
    "mesh_dagster.execution.plans.reviews",
    "mesh_dagster.engine.server_process",
    "mesh_dagster.engine.adapter",
    "mesh_dagster.engine.session",
    "mesh_dagster.testing",
    "pyspark",
    "py4j",
    "dagster",
    "psutil",
)

# Runs `mesh ARGS...` as the console script does, then writes the names of the loaded modules to PATH.
RUNNER = """
import atexit, json, runpy, sys
path, args = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(path, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["mesh", *args]
runpy.run_module("mesh_dagster.cli.main", run_name="__main__")
"""


def _loaded(tmp_path, *args: str) -> tuple[list[str], str]:
    listing = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(listing), *args], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(listing.read_text()), proc.stdout


def _unwanted(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in NOT_FOR_PLANNING)]


def test_plan_explain_imports_no_apply_spark_dagster_or_server_process(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n",
        "models/b.sql": "MODEL (name s.b, kind INCREMENTAL_BY_TIME_RANGE (time_column d));\n"
                        "SELECT x, CAST('2020-01-01' AS DATE) AS d FROM s.a WHERE d BETWEEN @start_ds AND @end_ds\n",
    })
    for run in ("cold", "warm"):  # cold: no state file yet (the plan creates it); warm: cache and state in place
        modules, out = _loaded(tmp_path, "-p", str(root), "plan", "--explain")
        assert "Explained plan" in out and "s.b" in out, run
        assert not _unwanted(modules), f"{run} `plan --explain` imported {_unwanted(modules)}"
        assert "mesh_dagster.execution.plans.planning" in modules  # the check looks at a real plan


def test_help_imports_nothing_of_a_project(tmp_path):
    modules, out = _loaded(tmp_path, "--help")
    assert "plan" in out and "Commands" in out
    heavy = [m for m in modules if m.split(".")[0] in ("pydantic", "sqlglot", "sqlalchemy", "yaml", "pyspark", "dagster")
             or m.startswith(("mesh_dagster.context", "mesh_dagster.core.models", "mesh_dagster.execution"))]
    assert not heavy, f"`mesh --help` imported {heavy}"


def test_names_context_hands_out_on_first_use_resolve():
    """The names Context imports only when a front door takes them (`_LAZY`) are there to take."""
    from mesh_dagster import context

    for name, module in context._LAZY.items():
        assert getattr(context, name) is getattr(importlib.import_module(module), name)
