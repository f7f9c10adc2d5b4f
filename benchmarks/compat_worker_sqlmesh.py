"""SQLMesh's side of the compatibility suite (benchmarks/compat_sqlmesh.py), run by the python of
SQLMesh's throwaway venv, never by ours: apply the project to prod at the fixed execution time,
run its unit tests, dump every model's rows, then plan each edit in dev and keep the categories.

    /tmp/sqlmesh_compat_venv/bin/python benchmarks/compat_worker_sqlmesh.py PROJECT OUT.json

One process for all of it: with a Spark gateway in config.py, every SQLMesh Context connects to
every gateway (a Spark session start), so one process starts Spark once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compat_common import (  # noqa: E402
    EXECUTION_TIME,
    apply_edit,
    edits_for,
    missing_files,
    one_line,
    repo_paths,
    table_dump,
    undo_edit,
)
from sqlmesh import Context  # noqa: E402  (the venv's SQLMesh)


def paths(project: Path) -> list[str]:
    """The project's repositories (benchmarks/compat_multi: several, as `sqlmesh -p a -p b`)."""
    return [str(path) for path in repo_paths(project)]


def short_name(name: str) -> str:
    return ".".join(part.strip('"') for part in name.split(".")[-2:])


def apply(project: Path) -> dict[str, Any]:
    try:
        context = Context(paths=paths(project))
        context.plan("prod", execution_time=EXECUTION_TIME, auto_apply=True, no_prompts=True, skip_tests=True)
    except Exception as error:  # noqa: BLE001 - any refusal or failure is the result to report
        return {"ok": False, "message": one_line(error)}
    return {"ok": True, "message": ""}


def tests(context: Any) -> dict[str, Any]:
    result = context.test()
    out: dict[str, Any] = {str(t.test_name): {"ok": True, "message": ""} for t in result.successes}
    for test, trace in [*result.failures, *result.errors]:
        lines = [ln.strip() for ln in str(trace).splitlines() if ln.strip()]
        out[str(getattr(test, "test_name", test))] = {"ok": False, "message": lines[-1] if lines else ""}
    return out


def dump(context: Any) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for model in context.models.values():
        name, kind = short_name(model.fqn), model.kind.name.value
        entry: dict[str, Any] = {"kind": kind, "error": None}
        if kind == "EMBEDDED":
            entry["error"] = "no table (EMBEDDED)"
        else:
            try:
                cursor = context.engine_adapter.cursor
                cursor.execute(f"SELECT * FROM {model.name}")
                entry.update(table_dump([d[0] for d in cursor.description], cursor.fetchall()))
            except Exception as error:  # noqa: BLE001 - a missing table is one model's result
                entry["error"] = one_line(error)
        models[name] = entry
    return models


def forget_project_modules(project: Path) -> None:
    """Drop the project's modules imported by an earlier Context of this process (`macros.utils`):
    else an edit of a helper module is not seen (SQLMesh plans it as a fresh process does only once
    the module is imported again), and a later edit's plan shows it instead."""
    root = project.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            del sys.modules[name]


def categories(project: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for edit in edits_for(project):
        if missing_files(project, edit):
            out[edit.name] = {"error": f"skipped: no {', '.join(missing_files(project, edit))}", "categories": {}}
            continue
        before = apply_edit(project, edit)
        forget_project_modules(project)
        try:
            plan = Context(paths=paths(project)).plan(
                "dev", execution_time=EXECUTION_TIME, no_prompts=True, auto_apply=False, skip_tests=True)
            found = {short_name(name): new.change_category.name if new.change_category else "NONE"
                     for name, (new, _old) in plan.context_diff.modified_snapshots.items()}
            out[edit.name] = {"error": None, "categories": found}
        except Exception as error:  # noqa: BLE001 - reported per edit
            no_change = type(error).__name__ == "NoChangesPlanError"  # SQLMesh sees no change: no category
            out[edit.name] = {"error": None if no_change else one_line(error), "categories": {}}
        finally:
            undo_edit(before)
    return out


def main() -> None:
    project, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    result: dict[str, Any] = {"tool": "sqlmesh", "apply": apply(project), "models": {}, "tests": {}, "edits": {}}
    try:
        context = Context(paths=paths(project))
        result["models"] = dump(context)
    except Exception as error:  # noqa: BLE001 - the project itself is refused
        result["error"] = one_line(error)
    else:
        try:
            result["tests"] = tests(context)
        except Exception as error:  # noqa: BLE001 - the tests as a whole cannot run
            result["tests"] = {"(all tests)": {"ok": False, "message": one_line(error)}}
    result["edits"] = categories(project)
    out_path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
