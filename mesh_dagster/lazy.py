"""Names a package exports without importing their modules until first asked for (PEP 562): the
top package's (`from mesh_dagster import macro`, no sqlglot before a macro file asks) and the
Dagster front door's (`mesh ui`'s supervisor imports a module of it and must start `dagster dev`
before anything imports Dagster)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, names: Mapping[str, str],
               namespace: Mapping[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose `names` (name -> module defining it) are
    resolved when first asked for; `namespace`: the package's own globals, listed by `__dir__`."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted([*namespace, *names])

    return __getattr__, __dir__
