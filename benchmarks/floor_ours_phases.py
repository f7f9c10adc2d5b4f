"""Where our `definitions()` spends its CPU time, for bench_dagster_floor.py's report of what lies
above Dagster's floor.

    python benchmarks/floor_ours_phases.py PROJECT

Prints one JSON line of CPU seconds: `load` (loading and planning the project and building its
graph: `_load_graphs`), `specs` (the translator's asset specs), `assets` (the asset definitions,
Dagster's `multi_asset`, specs excluded), `rest` (the rest of `definitions()`: jobs, schedules,
sensors, the resource, the `Definitions`), then `validate` (`get_repository_def()`,
`resolve_asset_graph()` and the serialized `RepositorySnap`, as measured elsewhere). The functions
are wrapped to be timed, which costs a little: the headline numbers come from the unwrapped
measurement (bench_definitions.py's), this only splits them.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value

from mesh_dagster.dagster.mapping.translator import MeshTranslator

SPENT: Counter[str] = Counter()
module = importlib.import_module("mesh_dagster.dagster.code_location")


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] += time.process_time() - start

    return wrapper


def main() -> None:
    module._load_graphs = timed("load", module._load_graphs)
    module.model_asset = timed("assets", module.model_asset)
    MeshTranslator.get_asset_spec = timed("specs", MeshTranslator.get_asset_spec)  # type: ignore[method-assign]
    start = time.process_time()
    defs = module.definitions(sys.argv[1])
    total = time.process_time() - start
    start = time.process_time()
    repo = defs.get_repository_def()
    defs.resolve_asset_graph()
    serialize_value(RepositorySnap.from_def(repo))
    validate = time.process_time() - start
    print(json.dumps({"load": SPENT["load"], "specs": SPENT["specs"], "assets": SPENT["assets"] - SPENT["specs"],
                      "rest": total - SPENT["load"] - SPENT["assets"], "validate": validate}))


if __name__ == "__main__":
    main()
