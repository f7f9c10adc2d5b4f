"""Layer rules that keep planning fast: no Spark and no Dagster behind a plan.

The module-level rules are import-linter contracts in pyproject.toml (`lint-imports`, also run by
.ci/run); what they cannot say — which *names* a front door may take from a module that holds
both vocabulary and logic — is checked here on the syntax tree.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from project_builder import write_project

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "mesh_dagster"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# What cli/ and dagster/ may import from the modules the "front-doors-through-context" contract
# lets them use that also hold logic: types and pure helpers of results, never the operations
# (build_plan, load_project, load_config, materialize, ...), which they reach through Context.
FRONT_DOOR_NAMES = {
    "mesh_dagster.core.plan.plan": {"Plan", "model_start_ms"},
    "mesh_dagster.core.plan.backfills": {"ALL_TIME"},
    "mesh_dagster.core.plan.review": {"PlanRecord", "markdown_block"},
    "mesh_dagster.core.plan.flags": {"PLAN_FLAGS", "JOB_FLAGS", "FlagValue", "PlanFlag", "flag_spelling", "plan_options",
                                     "refuse_in_restatement"},
    "mesh_dagster.core.project.project": {"Project"},
    "mesh_dagster.core.project.audits": {"is_blocking"},
    "mesh_dagster.core.models.model": {"Audit", "Model"},
    "mesh_dagster.core.models.kinds": {"KindName"},
    "mesh_dagster.core.config.config": {"CONFIG_FILES", "DagsterStorageConfig"},
    "mesh_dagster.engine.session": {"spark_error_message"},
}
# The packages whose modules the contract names one by one hold logic too: only the modules above.
DEFINITION_PACKAGES = ("mesh_dagster.core.plan.", "mesh_dagster.core.project.", "mesh_dagster.core.models.")


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
            assert not imports & {"pyspark", "py4j"}, f"{path} imports Spark"
        if rel[0] != "dagster":
            assert not {i for i in imports if i == "dagster" or i.startswith("dagster_")}, f"{path} imports dagster"


def _front_door_imports() -> list[tuple[Path, ast.Import | ast.ImportFrom]]:
    found = []
    for door in ("cli", "dagster"):
        for path in (PACKAGE / door).rglob("*.py"):
            found += [(path, node) for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, (ast.Import, ast.ImportFrom))]
    return found


def test_front_doors_take_only_types_from_modules_that_also_hold_logic():
    checked = set()
    for path, node in _front_door_imports():
        if isinstance(node, ast.Import):
            whole = {a.name for a in node.names} & set(FRONT_DOOR_NAMES)
            assert not whole, f"{path}:{node.lineno} imports all of {whole}: import the allowed names"
        elif node.module and node.module.startswith(DEFINITION_PACKAGES) and node.module not in FRONT_DOOR_NAMES:
            raise AssertionError(f"{path}:{node.lineno} imports {node.module}: go through Context")
        elif node.module in FRONT_DOOR_NAMES:
            names = {a.name for a in node.names}
            extra = names - FRONT_DOOR_NAMES[node.module]
            assert not extra, f"{path}:{node.lineno} takes {extra} from {node.module}: go through Context"
            checked |= {(node.module, n) for n in names}
    unused = {(m, n) for m, names in FRONT_DOOR_NAMES.items() for n in names} - checked
    assert not unused, f"allowed but no longer used, drop them: {unused}"


def test_import_contracts_hold():
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cli/ and dagster/ go through Context KEPT" in proc.stdout


def test_import_contracts_catch_a_front_door_reaching_past_context(tmp_path):
    """The contracts are live: a copy of the package whose CLI opens the state store directly
    and whose core imports pyspark breaks exactly those contracts."""
    shutil.copytree(PACKAGE, tmp_path / "mesh_dagster", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    with open(tmp_path / "mesh_dagster" / "cli" / "main.py", "a") as f:
        f.write("\nfrom mesh_dagster.state.store import StateStore  # noqa\n")
    with open(tmp_path / "mesh_dagster" / "core" / "time" / "dates.py", "a") as f:
        f.write("\nimport pyspark  # noqa\n")
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cli/ and dagster/ go through Context BROKEN" in proc.stdout
    assert "mesh_dagster.cli.main -> mesh_dagster.state.store" in proc.stdout
    assert "core/ is pure: no Spark, no Dagster, nothing of the layers above it BROKEN" in proc.stdout
    assert "Only engine/ imports pyspark BROKEN" in proc.stdout
    assert "Only dagster/ imports dagster KEPT" in proc.stdout


def test_planning_never_loads_spark(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n",
        "models/b.sql": "MODEL (name s.b, kind VIEW);\nSELECT x FROM s.a\n",
    })
    code = f"""
import sys
from mesh_dagster.context import Context
ctx = Context({str(root)!r})
plan = ctx.plans.plan()
assert sorted(plan.added) == ['s.a', 's.b'], plan.added
from mesh_dagster.cli import console
console.show_plan(plan); console.show_explain(plan, ctx.plans.explain(plan))
loaded = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'dagster')]
assert not loaded, loaded
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Explained plan" in proc.stdout
