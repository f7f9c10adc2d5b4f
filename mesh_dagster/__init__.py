"""mesh_dagster: SQLMesh-style plans and virtual environments on Spark, orchestrated by Dagster."""

from mesh_dagster.lazy import lazy_names

__version__ = "0.1.0"

# `from mesh_dagster import macro, SQL` in a project's macros/*.py (SQLMesh's `from sqlmesh import
# macro, SQL`), `from mesh_dagster import model, ExecutionContext` in its models/*.py, `from
# mesh_dagster import signal` in its signals/*.py, `from mesh_dagster import Materialization` in its
# materializations/*.py. Resolved lazily so that `import mesh_dagster`
# stays cheap (no sqlglot until a macro, model or signal file asks for it). `MeshProjectComponent`
# is the Dagster component `dg` lists (the entry point in pyproject.toml names this module).
_LAZY = {"macro": "mesh_dagster.core.macros.user", "SQL": "mesh_dagster.core.macros.coercion",
         "model": "mesh_dagster.core.models.python_model", "ExecutionContext": "mesh_dagster.core.models.python_model",
         "signal": "mesh_dagster.core.project.signals",
         "Materialization": "mesh_dagster.core.models.materialization",
         "MeshProjectComponent": "mesh_dagster.dagster.component"}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
