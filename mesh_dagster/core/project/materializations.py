"""Loading the project's custom materializations (`materializations/*.py`) for CUSTOM models.

The folder is imported as the package `mesh_user_materializations` (core/config/user_modules.py);
every subclass of `mesh_dagster.Materialization` with a `NAME` is a materialization models may
name. Each is stored as code (core/models/python_env.py: the class and what it uses), which the
snapshots of its models capture: the code is part of their data hash, and an evaluation runs the
code it was planned with, never the file as it is now.

SQLMesh's own `CustomMaterialization` (`from sqlmesh import CustomMaterialization`) works on its
engine adapters, which mesh_dagster has not: its import is refused at its line
(core/models/sqlmesh_names.py), pointing here.
"""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mesh_dagster.core.config.user_modules import UserPackage
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.materialization import Materialization
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.models.python_env import EnvBuilder, Executable, run_env

USER_MATERIALIZATIONS_PACKAGE = "mesh_user_materializations"


class StoredMaterialization(BaseModel):
    """A materialization class as stored code: the class and everything it uses."""

    model_config = ConfigDict(frozen=True)

    name: str  # its NAME, as models write it
    class_name: str
    env: dict[str, Executable]
    path: str | None = None
    line: int | None = None

    def hash_values(self) -> list[str]:
        return [f"materialization {self.name}:{self.class_name}", *(f"{n}:{p.kind}:{p.text}"
                                                                    for n, p in self.env.items())]

    def instance(self, root: Path | None = None) -> Materialization:
        """A fresh instance of the class, defined from the stored code."""
        cls: Any = run_env(self.env, root)[self.class_name]
        return cls()

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else (self.path or "materializations/")


def load_materializations(root: Path) -> dict[str, StoredMaterialization]:
    """The project's materializations by NAME (lower case)."""
    package = UserPackage(USER_MATERIALIZATIONS_PACKAGE, root / "materializations", "materializations")
    found: dict[str, StoredMaterialization] = {}
    try:
        for module in package.import_all():
            for value in list(vars(module).values()):
                _refuse_sqlmesh_class(value, module, package)
                if not (inspect.isclass(value) and issubclass(value, Materialization) and value is not Materialization
                        and value.__module__ == module.__name__ and value.NAME):
                    continue
                stored = _stored(value, module, root, package)
                if stored.name in found:
                    raise ModelError(f"Materialization '{value.NAME}' is defined twice (also at "
                                     f"{found[stored.name].where})", stored.path, stored.line)
                found[stored.name] = stored
    finally:
        package.forget()
    return found


def _refuse_sqlmesh_class(value: Any, module: Any, package: UserPackage) -> None:
    """A subclass of an installed SQLMesh's `CustomMaterialization` would be ignored: refused at its line."""
    if not inspect.isclass(value) or value.__module__ != module.__name__:
        return
    if any(base.__name__ == "CustomMaterialization" for base in value.__mro__[1:]):
        try:
            line: int | None = inspect.getsourcelines(value)[1]
        except (OSError, TypeError):
            line = None
        raise ModelError(f"{value.__name__} subclasses SQLMesh's CustomMaterialization, which works on SQLMesh's "
                         "engine adapters: mesh_dagster cannot run it. Subclass mesh_dagster.Materialization "
                         "instead (NAME = '...', insert(self, table, query, context))",
                         package.shown(module.__file__ or ""), line)


def _stored(cls: type[Materialization], module: Any, root: Path, package: UserPackage) -> StoredMaterialization:
    builder = EnvBuilder(root, ())
    line = builder.add_class(cls, module)
    path = package.shown(module.__file__ or "")
    if not isinstance(cls.NAME, str) or not cls.NAME.strip():
        raise ModelError(f"{cls.__name__}.NAME must be the name models write in `materialization '...'`", path, line)
    if inspect.isabstract(cls) or cls.insert is Materialization.insert:
        raise ModelError(f"Materialization {cls.__name__} must implement insert(self, table, query, context)",
                         path, line)
    return StoredMaterialization(name=cls.NAME.strip().lower(), class_name=cls.__name__, env=builder.env, path=path,
                                 line=line)


def check_materializations(models: dict[str, Model], found: dict[str, StoredMaterialization]) -> None:
    """Every CUSTOM model names a materialization the project defines (at the kind's line)."""
    for model in models.values():
        kind = model.kind.custom
        if kind is None or kind.materialization.lower() in found:
            continue
        close = difflib.get_close_matches(kind.materialization.lower(), list(found), n=1)
        hint = (f" Did you mean '{close[0]}'?" if close else
                f" (defined: {', '.join(sorted(found))})" if found else
                " (the project's materializations/ folder defines none: subclass mesh_dagster.Materialization there)")
        raise ModelError(f"Model {model.name} uses materialization '{kind.materialization}', which no class in "
                         f"materializations/*.py names.{hint}", model.path, model.line_of("kind"))
