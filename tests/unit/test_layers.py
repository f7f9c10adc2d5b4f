"""Layer rules that keep planning fast: no Spark and no Dagster behind a plan."""

import ast
import subprocess
import sys
from pathlib import Path

from project_builder import write_project

PACKAGE = Path(__file__).resolve().parents[2] / "mesh_dagster"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_engine_imports_pyspark_and_only_dagster_imports_dagster():
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).parts
        imports = _imports(path)
        if rel[0] != "engine":
            assert "pyspark" not in imports, f"{path} imports pyspark"
        if rel[0] != "dagster":
            assert "dagster" not in imports, f"{path} imports dagster"


def test_planning_never_loads_spark(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n",
        "models/b.sql": "MODEL (name s.b, kind VIEW);\nSELECT x FROM s.a\n",
    })
    code = f"""
import sys
from mesh_dagster.context import Context
ctx = Context({str(root)!r})
plan = ctx.plan()
assert sorted(plan.added) == ['s.a', 's.b'], plan.added
from mesh_dagster.cli import console
console.show_plan(plan); console.show_explain(plan)
loaded = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'dagster')]
assert not loaded, loaded
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Explained plan" in proc.stdout
