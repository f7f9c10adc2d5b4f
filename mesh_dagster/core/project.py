"""Loading a project directory: config, macros, audits, models, seeds, external models.

Loading validates everything that can be validated without Spark — unknown references, cycles,
duplicate names, seed headers, audits — and reports each problem with its file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mesh_dagster import __version__
from mesh_dagster.core.cache import ProjectCache, content_key
from mesh_dagster.core.config import ProjectConfig, load_config
from mesh_dagster.core.dag import DAG, CycleError
from mesh_dagster.core.definition import relative_path
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros import MacroRegistry, load_macros
from mesh_dagster.core.model import Audit, KindName, Model, ModelKind
from mesh_dagster.core.model_reader import read_audit_file, read_model_file, seed_header
from mesh_dagster.core.types import to_spark_type

EXTERNAL_MODELS_FILES = ("external_models.yaml", "external_models.yml", "schema.yaml")


@dataclass
class Project:
    path: Path
    config: ProjectConfig
    models: dict[str, Model]
    audits: dict[str, Audit]
    macros: MacroRegistry
    dag: DAG
    variables: dict[str, Any] = field(default_factory=dict)
    test_files: list[Path] = field(default_factory=list)
    gateway: str | None = None
    cache: ProjectCache | None = None
    _columns: dict[str, dict[str, str | None] | None] = field(default_factory=dict)

    @property
    def mesh_dir(self) -> Path:
        return self.path / ".mesh"

    def parents(self, name: str) -> list[str]:
        return self.dag.parents.get(name, [])

    def columns(self, name: str) -> dict[str, str | None] | None:
        """Output columns of a model (name → type or None), or None when they cannot be known."""
        if name not in self._columns:
            model = self.models[name]
            if model.columns is not None:
                self._columns[name] = dict(model.columns)
            elif model.kind.name == KindName.SEED:
                self._columns[name] = {c: None for c in seed_header(model)}
            elif model.query is None:
                self._columns[name] = None
            else:
                from mesh_dagster.core.renderer import output_columns

                schemas = {p: cols for p in self.parents(name) if (cols := self.columns(p)) is not None}
                self._columns[name] = output_columns(model, self.macros, self.variables, schemas)
        return self._columns[name]

    def parent_schemas(self, name: str) -> dict[str, dict[str, str | None]]:
        return {p: cols for p in self.parents(name) if (cols := self.columns(p)) is not None}


def _cache_salt(root: Path, config: ProjectConfig, variables: dict[str, Any], macros: MacroRegistry) -> str:
    import sqlglot

    # The root is part of the key: models hold absolute seed paths.
    parts = [str(root), __version__, sqlglot.__version__, config.model_defaults.model_dump_json(), repr(sorted(variables.items()))]
    parts += [f"{name}:{macros.source(name)}" for name in sorted(macros.names())]
    return content_key("\n".join(parts).encode())


def load_project(path: str | Path, gateway: str | None = None, use_cache: bool = True) -> Project:
    root = Path(path).resolve()
    if not root.is_dir():
        raise ModelError(f"Project directory not found: {root}")
    config = load_config(root)
    config.gateway(gateway)  # validates the gateway name
    variables = config.variables_for(gateway)
    macros = load_macros(root / "macros")
    cache = ProjectCache(root / ".mesh" / "cache", _cache_salt(root, config, variables, macros)) if use_cache else None
    audits = _load_audits(root)
    models, known_refs = _load_models(root, config, cache)
    for ext in _load_external_models(root):
        _add_model(models, ext)
    for model in models.values():
        for inline in model.inline_audits:
            audits.setdefault(inline.name, inline)
    parents = _infer_dependencies(models, macros, variables, known_refs)
    dag = DAG(parents)
    try:
        dag.sorted()
    except CycleError as e:
        first = models[e.cycle[0]]
        raise ModelError(f"Models depend on each other in a cycle: {' -> '.join(e.cycle)}", first.path, first.line) from None
    _check_audits(models, audits)
    tests_dir = root / "tests"
    tests = sorted([*tests_dir.glob("test*.yaml"), *tests_dir.glob("test*.yml")]) if tests_dir.is_dir() else []
    project = Project(root, config, models, audits, macros, dag, variables, tests, gateway, cache)
    for model in models.values():
        if model.kind.name == KindName.SEED:
            seed_header(model)  # validates the CSV header now, not at apply time
    if cache is not None:
        _store_parsed(cache, models, parents, known_refs)
        cache.save()
    return project


def _store_parsed(cache: ProjectCache, models: dict[str, Model], parents: dict[str, set[str]],
                  known_refs: dict[str, Any]) -> None:
    keys: dict[str, str] = known_refs.get("__keys__", {})
    for model in models.values():
        key = keys.get(model.path or "")
        if key and model.kind.name != KindName.EXTERNAL and cache.model(model.path, key) is None:
            inferred = parents[model.name] - set(model.depends_on)
            cache.put_model(model.path, key, (model, sorted(inferred)))


def _add_model(models: dict[str, Model], model: Model) -> None:
    if model.name in models:
        other = models[model.name]
        raise ModelError(f"Duplicate model name '{model.name}': also defined in {other.where()}", model.path, model.line)
    models[model.name] = model


def _load_models(root: Path, config: ProjectConfig, cache: ProjectCache | None) -> tuple[dict[str, Model], dict]:
    """Models by name, and what the cache already knew: `{model name: inferred refs}` plus the
    content keys of every file under `__keys__` (for storing new entries)."""
    models: dict[str, Model] = {}
    known: dict[str, Any] = {"__keys__": {}}
    models_dir = root / "models"
    if not models_dir.is_dir():
        return models, known
    for file in sorted(models_dir.rglob("*.sql")):
        rel = relative_path(file, root)
        data = file.read_bytes()
        key = content_key(data)
        known["__keys__"][rel] = key
        hit = cache.model(rel, key) if cache is not None else None
        if hit is not None:
            model, refs = hit
            known[model.name] = set(refs)
        else:
            model = read_model_file(data.decode("utf-8"), rel, file, config.model_defaults)
        if model.enabled:
            _add_model(models, model)
    return models, known


def _load_audits(root: Path) -> dict[str, Audit]:
    audits: dict[str, Audit] = {}
    audits_dir = root / "audits"
    if not audits_dir.is_dir():
        return audits
    for file in sorted(audits_dir.rglob("*.sql")):
        for audit in read_audit_file(file.read_text(encoding="utf-8"), relative_path(file, root)):
            if audit.name in audits:
                raise ModelError(f"Duplicate audit name '{audit.name}': also defined in {audits[audit.name].path}",
                                 audit.path, audit.line)
            audits[audit.name] = audit
    return audits


def _load_external_models(root: Path) -> list[Model]:
    for name in EXTERNAL_MODELS_FILES:
        file = root / name
        if file.is_file():
            break
    else:
        return []
    rel = relative_path(file, root)
    try:
        entries = yaml.safe_load(file.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ModelError(f"Invalid YAML: {getattr(e, 'problem', e)}", rel, mark.line + 1 if mark else None) from None
    if not isinstance(entries, list):
        raise ModelError("external_models.yaml must be a list of `- name: schema.table` entries", rel, 1)
    lines = file.read_text(encoding="utf-8").splitlines()
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            raise ModelError(f"Each external model needs a name, got {entry!r}", rel, 1)
        name = str(entry["name"]).replace("`", "").replace('"', "").lower()
        line = next((i for i, text in enumerate(lines, 1) if name in text.lower()), 1)
        columns = entry.get("columns")
        try:
            typed = {str(c).lower(): to_spark_type(str(t), entry.get("dialect", "spark")) for c, t in (columns or {}).items()}
        except ValueError as e:
            raise ModelError(f"External model {name}: {e}", rel, line) from None
        out.append(Model(name=name, kind=ModelKind(name=KindName.EXTERNAL), columns=typed if columns else None,
                         description=entry.get("description"), path=rel, line=line))
    return out


def _infer_dependencies(models: dict[str, Model], macros: MacroRegistry, variables: dict[str, Any],
                        known_refs: dict[str, Any]) -> dict[str, set[str]]:
    parents: dict[str, set[str]] = {}
    for model in models.values():
        refs = set(model.depends_on)
        if model.name in known_refs:
            refs |= known_refs[model.name]
        elif model.query is not None:
            from mesh_dagster.core.renderer import referenced_tables

            refs |= referenced_tables(model, macros, variables)
        refs.discard(model.name)
        unknown = sorted(r for r in refs if r not in models)
        if unknown:
            raise ModelError(
                f"Model {model.name} references unknown model{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}. "
                "Declare tables that mesh does not build in external_models.yaml.",
                model.path, model.query_line if model.query else model.line,
            )
        parents[model.name] = refs
    return parents


BUILTIN_AUDITS = {"not_null", "unique_values", "accepted_values", "number_of_rows", "forall", "at_least_one",
                  "not_null_non_blocking", "unique_values_non_blocking", "accepted_values_non_blocking",
                  "number_of_rows_non_blocking", "forall_non_blocking", "at_least_one_non_blocking"}


def _check_audits(models: dict[str, Model], audits: dict[str, Audit]) -> None:
    for model in models.values():
        for ref in model.audits:
            if ref.name not in audits and ref.name not in BUILTIN_AUDITS:
                raise ModelError(f"Model {model.name} uses unknown audit '{ref.name}'", model.path, model.line)
        if model.audits and model.kind.name == KindName.EMBEDDED:
            raise ModelError("EMBEDDED models cannot have audits", model.path, model.line)
