"""Our side of the compatibility suite (benchmarks/compat_sqlmesh.py), after `mesh plan
--auto-apply` applied the project: run its unit tests, dump every model's rows from prod (from the
model's physical table when its view is missing, e.g. after a failed apply), then plan each edit in
dev through the Context API and keep the categories.

    PYTHONPATH=CHECKOUT python benchmarks/compat_worker_mesh.py PROJECT GATEWAY OUT.json

PROJECT is a project's folder, or a multi-repo project's (its repositories are its sub-folders).
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

from mesh_dagster.context import Context  # noqa: E402


def context_of(project: Path, gateway: str | None) -> Context:
    """The project's Context: all its repositories (benchmarks/compat_multi), the first first."""
    first, *others = repo_paths(project)
    return Context(first, gateway, repos=others)


def kind_of(model: Any) -> str:
    name = model.kind.name
    return str(getattr(name, "value", name))


def tests(context: Context) -> dict[str, Any]:
    report = context.test()
    return {str(r.name): {"ok": bool(r.passed), "message": one_line(str(r.message))} for r in report.results}


def select_all(context: Context, table: str) -> dict[str, Any]:
    frame = context.engine.session.spark.sql(f"SELECT * FROM {table}")
    return table_dump(frame.columns, [tuple(row) for row in frame.collect()])


def read_model(context: Context, name: str) -> dict[str, Any]:
    """The prod view's rows, else the physical table's (said so in `note`)."""
    try:
        return select_all(context, name)
    except Exception as view_error:  # noqa: BLE001 - try the physical table next
        try:
            table = context.inspection.physical_table(name)
            return {**select_all(context, table), "note": "physical table (no prod view)"}
        except Exception:  # noqa: BLE001 - the view's error is the one to report
            raise view_error from None


def dump(context: Context) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for name, model in context.project.models.items():
        entry: dict[str, Any] = {"kind": kind_of(model), "error": None}
        if entry["kind"] == "EMBEDDED":
            entry["error"] = "no table (EMBEDDED)"
        else:
            try:
                entry.update(read_model(context, name))
            except Exception as error:  # noqa: BLE001 - one model's result
                entry["error"] = one_line(error)
        models[name] = entry
    return models


def categories(project: Path, gateway: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for edit in edits_for(project):
        if missing_files(project, edit):
            out[edit.name] = {"error": f"skipped: no {', '.join(missing_files(project, edit))}", "categories": {}}
            continue
        before = apply_edit(project, edit)
        try:
            plan = context_of(project, gateway).plans.plan("dev", execution_time=EXECUTION_TIME)
            found = {}
            for name in plan.changed:
                category = plan.category(name)
                found[name] = category.name if category is not None else "NONE"
            out[edit.name] = {"error": None, "categories": found}
        except Exception as error:  # noqa: BLE001 - reported per edit
            out[edit.name] = {"error": one_line(error), "categories": {}}
        finally:
            undo_edit(before)
    return out


def main() -> None:
    project, gateway, out_path = Path(sys.argv[1]), sys.argv[2] or None, Path(sys.argv[3])
    result: dict[str, Any] = {"tool": "mesh", "models": {}, "tests": {}, "edits": {}}
    try:
        context = context_of(project, gateway)
        result["models"] = dump(context)
    except Exception as error:  # noqa: BLE001 - the project itself is refused
        result["error"] = one_line(error)
    else:
        try:
            result["tests"] = tests(context)
        except Exception as error:  # noqa: BLE001 - the tests as a whole cannot run
            result["tests"] = {"(all tests)": {"ok": False, "message": one_line(error)}}
    result["edits"] = categories(project, gateway)
    out_path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
