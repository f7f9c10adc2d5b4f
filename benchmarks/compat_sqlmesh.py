"""Compatibility suite (issue 22): one SQLMesh project run by SQLMesh 0.236 and by us, compared.

The project (benchmarks/compat_project/, unmodified SQLMesh syntax) is applied by SQLMesh on DuckDB
and by mesh_dagster on local Spark, at one execution time; the suite compares every model's rows
(multisets, numbers to 1e-6), the unit tests' outcomes and the change categories each tool gives a
set of edits planned in dev.

    python benchmarks/compat_sqlmesh.py [--code CHECKOUT] [--without FEATURE ...] [--keep DIR]
                                        [--fresh] [--venv DIR] [--project DIR]

`--project benchmarks/compat_multi` compares the multi-repo project instead: its sub-folders are its
repositories, loaded as one by both tools (`sqlmesh -p repo_1 -p repo_2`, `mesh -p repo_1 -p
repo_2`), with its own edits (compat_common.MULTI_EDITS).

Ours is the mesh_dagster of `--code` (default: the checkout holding this script), run as
`mesh -p PROJECT --gateway spark plan --auto-apply --skip-tests --execution-time ...`, then read
through its Context API (benchmarks/compat_worker_mesh.py). SQLMesh runs in a throwaway venv
(`--venv`, default /tmp/sqlmesh_compat_venv, created with `pip install 'sqlmesh==0.236.*' duckdb
pandas` if missing; pyspark is linked into it from ours, as config.py's Spark gateway makes SQLMesh
import it) through benchmarks/compat_worker_sqlmesh.py; its results are cached per project content
in the venv (`--fresh` recomputes them). Tests run apart from the apply on both sides, so a failing
test shows as one failing test instead of blocking every plan.

`--without FEATURE` compares a copy of the project without that feature's files, for a feature
ours refuses at load (which refuses the whole project): see FEATURES. Without `config_py`, each
tool gets a config.yaml with the same settings, its own gateway only and no linter.

Prints three Markdown tables (models, unit tests, edits) and writes them to WORK/report.md.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compat_common import EXECUTION_TIME, edits_for, repo_paths  # noqa: E402
from compat_report import edit_table, model_table, test_table  # noqa: E402

PROJECT = HERE / "compat_project"
VENV = Path("/tmp/sqlmesh_compat_venv")
GATEWAY = "spark"  # ours runs the project's Spark gateway; SQLMesh its default (DuckDB)
IGNORED = shutil.ignore_patterns(".mesh", ".cache", "logs", "__pycache__", "compat.duckdb*", "*.pyc")
FEATURES: dict[str, tuple[tuple[str, ...], str]] = {
    "config_py": (("config.py",), "config.py and its linter (a config.yaml per tool instead)"),
    "standalone_audits": (("audits/standalone_revenue.sql",), "a standalone audit"),
    "jinja": (("models/top_items.sql", "macros/jinja_money.sql"), "a Jinja model and macros/*.sql"),
    "blueprints": (("models/region_orders.sql",), "a blueprint model"),
    "external_audits": (("external_models/stock.yaml", "models/stock_value.sql"),
                        "an external model with audits and start, and its child"),
    "builtin_audits": (("models/order_stats.sql",), "built-in audits accepted_range, not_constant, ..."),
    "signals": (("signals", "models/settled_revenue.sql", "models/settled_units.py"), "a signal and its models"),
    "python_signals": (("models/settled_units.py",), "a Python model with signals=[(name, {argument: value})]"),
    "python_models": (("models/customer_scores.py", "models/daily_item_units.py", "models/vip_customers.py",
                       "models/revenue_by_sql.py", "models/item_units_by_kind_class.py",
                       "models/settled_units.py", "tests/test_customer_scores.yaml"),
                      "Python models (pandas, is_sql) and their test"),
    "tests": (("tests",), "the YAML unit tests"),
}


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float = 1800) -> tuple[int, str]:
    """Run a command, its output into `log`; (exit code, output)."""
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    log.write_text(out)
    print(f"  {Path(cmd[0]).name} ... {' '.join(cmd[-3:])}: exit {proc.returncode} "
          f"in {time.perf_counter() - began:.0f} s (log: {log})", flush=True)
    return proc.returncode, out


def ensure_venv(venv: Path) -> Path:
    """SQLMesh's python, the venv created if missing; pyspark (ours) linked into it."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} (SQLMesh 0.236, DuckDB, pandas)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "sqlmesh==0.236.*", "duckdb", "pandas"],
                       check=True)
    links = venv / "system_pyspark"
    if not (links / "pyspark").exists():
        links.mkdir(exist_ok=True)
        for package in ("pyspark", "py4j"):
            spec = importlib.util.find_spec(package)
            if spec is None or spec.origin is None:
                raise SystemExit(f"{package} is not importable here: it is needed by config.py's Spark gateway")
            (links / package).symlink_to(Path(spec.origin).parent)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "system_pyspark.pth").write_text(f"{links}\n")
    return python


def project_copy(source: Path, dest: Path, without: list[str], tool: str) -> Path:
    """The project minus the files of the features in `without` (config.py → that tool's YAML)."""
    shutil.copytree(source, dest, ignore=IGNORED)
    for feature in without:
        for rel in FEATURES[feature][0]:
            path = dest / rel
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    if "config_py" in without:
        (dest / "config.yaml").write_text(yaml_config(dest, tool))
    return dest


def yaml_config(project: Path, tool: str) -> str:
    """config.py's settings as config.yaml (JSON is YAML) for one tool: its gateway only, no linter."""
    spec = importlib.util.spec_from_file_location("compat_data", project / "compat_data.py")
    assert spec is not None and spec.loader is not None
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    if tool == "sqlmesh":
        gateways = {"local": {"connection": {"type": "duckdb", "database": str(project / "compat.duckdb")}}}
    else:
        gateways = {GATEWAY: {"connection": {"type": "spark"}}}
    config = {"gateways": gateways, "default_gateway": next(iter(gateways)),
              "model_defaults": {"dialect": "duckdb", "cron": "@daily"},
              "variables": data.VARIABLES, "before_all": data.BEFORE_ALL}
    return json.dumps(config, indent=2) + "\n"


def content_hash(project: Path, without: list[str]) -> str:
    """What SQLMesh's result depends on: the project's files (its generated config.yaml names the
    work directory: `without` stands for it), the switches and SQLMesh's worker."""
    digest = hashlib.sha256(" ".join(sorted(without)).encode())
    files = [p for p in project.rglob("*") if p.is_file() and p.name != "config.yaml"]
    files += [HERE / "compat_worker_sqlmesh.py", HERE / "compat_common.py"]
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def sqlmesh_side(source: Path, work: Path, without: list[str], venv: Path, fresh: bool) -> dict[str, Any]:
    project = project_copy(source, work / "sqlmesh" / "project", without, "sqlmesh")
    cache = venv / "compat_results" / f"{content_hash(project, without)}.json"
    if cache.exists() and not fresh:
        print(f"SQLMesh: cached result {cache}", flush=True)
        return json.loads(cache.read_text())
    python = ensure_venv(venv)
    out = work / "sqlmesh" / "result.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    print("SQLMesh (DuckDB): apply, tests, dump, edits", flush=True)
    code, text = run([str(python), str(HERE / "compat_worker_sqlmesh.py"), str(project), str(out)],
                     work / "sqlmesh", env, work / "sqlmesh" / "worker.log")
    if code != 0 or not out.exists():
        raise SystemExit(f"SQLMesh's worker failed (exit {code}):\n{text[-3000:]}")
    cache.parent.mkdir(exist_ok=True)
    shutil.copyfile(out, cache)
    return json.loads(out.read_text())


def mesh_side(source: Path, work: Path, without: list[str], code: Path) -> dict[str, Any]:
    project = project_copy(source, work / "mesh" / "project", without, "mesh")
    folders = [arg for repo in repo_paths(project) for arg in ("-p", str(repo))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])}
    print(f"ours (Spark, {code}): apply", flush=True)
    status, text = run([sys.executable, "-m", "mesh_dagster.cli.main", *folders, "--gateway", GATEWAY,
                        "plan", "--auto-apply", "--skip-tests", "--execution-time", EXECUTION_TIME],
                       work / "mesh", env, work / "mesh" / "apply.log")
    errors = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("Error", "error:"))]
    apply = {"ok": status == 0, "message": errors[-1] if errors else (text.strip().splitlines() or [""])[-1]}
    print("ours: tests, dump, edits", flush=True)
    out = work / "mesh" / "result.json"
    status, text = run([sys.executable, str(HERE / "compat_worker_mesh.py"), str(project), GATEWAY, str(out)],
                       work / "mesh", env, work / "mesh" / "worker.log")
    if status != 0 or not out.exists():
        raise SystemExit(f"our worker failed (exit {status}):\n{text[-3000:]}")
    result = {**json.loads(out.read_text()), "apply": apply}
    out.write_text(json.dumps(result, indent=1))
    return result


def report(ref: dict[str, Any], ours: dict[str, Any], without: list[str], project: Path = PROJECT) -> str:
    lines = [f"# Compatibility: SQLMesh 0.236 (DuckDB) vs mesh_dagster (Spark), execution time {EXECUTION_TIME}",
             f"without: {', '.join(without) or 'nothing'}", ""]
    for side, result in (("SQLMesh", ref), ("ours", ours)):
        apply = result.get("apply") or {}
        lines.append(f"- {side} apply: {'ok' if apply.get('ok') else 'FAILED: ' + str(apply.get('message'))}"
                     + (f"; project refused: {result['error']}" if result.get("error") else ""))
    models, model_counts = model_table(ref, ours)
    chosen = edits_for(project)
    edits, edit_counts = edit_table(ref, ours, [e.name for e in chosen])
    lines += ["", f"## Models ({_counts(model_counts)})", "", *models,
              "", "## Unit tests", "", *test_table(ref, ours),
              "", f"## Change categories of edits planned in dev ({_counts(edit_counts)})", "",
              *(f"- {e.name}: {e.what}" for e in chosen), "", *edits, ""]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=HERE.parent, help="the mesh_dagster checkout to compare")
    parser.add_argument("--without", action="append", default=[], choices=sorted(FEATURES),
                        help="compare the project without this feature's files (repeatable)")
    parser.add_argument("--keep", type=Path, help="work in this directory (emptied first) and keep it")
    parser.add_argument("--venv", type=Path, default=VENV, help="SQLMesh's throwaway venv")
    parser.add_argument("--fresh", action="store_true", help="rerun SQLMesh even if its result is cached")
    parser.add_argument("--project", type=Path, default=PROJECT,
                        help="the project to compare (a multi-repo one: its repositories are its sub-folders)")
    parser.add_argument("--report-only", type=Path, metavar="WORK",
                        help="only compare the results a run with --keep WORK left (no tool runs)")
    args = parser.parse_args()
    if args.report_only is not None:
        ref, ours = (json.loads((args.report_only / side / "result.json").read_text()) for side in ("sqlmesh", "mesh"))
        print(report(ref, ours, args.without, args.project))
        return
    if args.without and args.project.resolve() != PROJECT:
        raise SystemExit("--without names files of benchmarks/compat_project only")
    with tempfile.TemporaryDirectory(prefix="compat_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        if args.keep is not None:
            shutil.rmtree(work, ignore_errors=True)
        (work / "sqlmesh").mkdir(parents=True)
        (work / "mesh").mkdir(parents=True)
        source = args.project.resolve()
        ref = sqlmesh_side(source, work, args.without, args.venv, args.fresh)
        ours = mesh_side(source, work, args.without, args.code.resolve())
        text = report(ref, ours, args.without, source)
        (work / "report.md").write_text(text)
        print(text)


if __name__ == "__main__":
    main()
