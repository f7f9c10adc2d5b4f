"""Loading a project directory: config, macros, signals, audits, models, seeds, external models.

Loading validates everything that can be validated without Spark, and reports each problem with
its file and line: unreadable files, names Spark cannot hold, cycles, duplicate names, seeds
(header, row shape, every value against its type), audits, and each model's output columns
against what the model says about them (time column, grain, partitioning, column descriptions,
duplicates). A project that loads is one whose apply cannot fail on any of these after tables
were built. Where a model's columns cannot be known without Spark (`SELECT *` over an external
table with no declared columns), the column checks are left to Spark, which fails the model's
table creation before any of its rows are written and before any view moves.

A table a model reads that is neither a model nor declared in external_models.yaml is not an
error (SQLMesh's behaviour): it becomes an implicit EXTERNAL model with unknown columns, and the
project carries a warning naming the reader's file and line (and a model of a close name, in case
of a typo). `mesh create_external_models` declares such tables with their columns.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot

from mesh_dagster import __version__
from mesh_dagster.core.config.cache import ProjectCache, content_key
from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.files import outside_project, read_text
from mesh_dagster.core.config.names import check_model_name
from mesh_dagster.core.errors import ConfigError, MeshError, ModelError
from mesh_dagster.core.macros.syntax import discovering_dependencies
from mesh_dagster.core.macros.user import MacroRegistry
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.models.kinds import ExternalKind
from mesh_dagster.core.models.model import MODEL_FORMAT, Audit, Model
from mesh_dagster.core.models.seeds import SeedFile, check_seed
from mesh_dagster.core.project.audits import check_audit_refs, is_known_audit
from mesh_dagster.core.project.blueprints import blueprint_macros, read_model_files
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.dag import DAG, CycleError
from mesh_dagster.core.project.external_model_files import EXTERNAL_MODELS_FILES, load_external_models
from mesh_dagster.core.project.import_path import project_modules, use_project_root
from mesh_dagster.core.project.links import SOURCE_FOLDERS, refuse_outside_links
from mesh_dagster.core.project.materializations import (
    StoredMaterialization,
    check_materializations,
    load_materializations,
)
from mesh_dagster.core.project.metrics import refuse_metrics
from mesh_dagster.core.project.model_reader import default_audit_refs, read_audit_file, read_model_file
from mesh_dagster.core.project.python_model_reader import read_python_model_files
from mesh_dagster.core.project.repos import Repo, load_repo_macros, other_repos, repo_variables, unused_settings
from mesh_dagster.core.project.signals import SignalRegistry, check_signals, load_signals
from mesh_dagster.core.project.standalone_audits import standalone_audit_models
from mesh_dagster.core.project.view_names import check_view_names
from mesh_dagster.core.sql.model_outputs import OutputColumns, check_output_columns, grain_warning, query_output
from mesh_dagster.core.sql.query_columns import COLUMN_RULES
from mesh_dagster.core.sql.renderer import check_jinja_statements, query_references
from mesh_dagster.core.time.starts import inferred_starts


@dataclass
class Project:
    path: Path
    config: ProjectConfig
    models: dict[str, Model]
    audits: dict[str, Audit]
    dag: DAG
    test_files: list[Path] = field(default_factory=list)
    gateway: str | None = None
    cache: ProjectCache | None = None
    seeds: dict[str, SeedFile] = field(default_factory=dict)  # seed model → header and content hash
    # What the user should know but that does not stop loading (tables read that nobody declared).
    warnings: list[str] = field(default_factory=list)
    # The `@signal` functions of signals/ (core/project/signals.py): readiness checks models name.
    signals: SignalRegistry = field(default_factory=SignalRegistry)
    # The classes of materializations/*.py by NAME (core/project/materializations.py): CUSTOM models name them.
    materializations: dict[str, StoredMaterialization] = field(default_factory=dict)
    _outputs: dict[str, OutputColumns] = field(default_factory=dict)
    # Column lineage computed so far (core/project/lineage.py): by model name, on demand.
    lineage_memo: dict[str, Any] = field(default_factory=dict)
    _starts: dict[str, int | None] | None = None  # start_ms, computed once
    # Its repositories (core/project/repos.py), the first first: one, unless several were loaded as one
    # project; `owners`: the index in `repos` of each model of a later one.
    repos: list[Repo] = field(default_factory=list)
    owners: dict[str, int] = field(default_factory=dict)

    def repo_of(self, name: str) -> Repo:
        """The repository model `name` is defined in: what its SQL renders with (macros, variables)."""
        return self.repos[self.owners.get(name, 0)]

    @property
    def macros(self) -> MacroRegistry:
        """The first repository's macros: what SQL of no model renders with (`before_all`, ad hoc SQL)."""
        return self.repos[0].macros

    @property
    def variables(self) -> dict[str, Any]:
        """The first repository's variables (see `macros`)."""
        return self.repos[0].variables

    @property
    def mesh_dir(self) -> Path:
        return self.path / ".mesh"

    def model_name(self, name: str) -> str:
        """The model `name` names, given as `schema.model` or as a view of any environment
        (`schema__dev.model`): what the front doors accept wherever a model is named."""
        key = name.strip().strip("`").lower()
        if key in self.models:
            return key
        schema, _, table = key.rpartition(".")
        base = f"{schema.split('__')[0]}.{table}"
        if base in self.models:
            return base
        raise MeshError(f"Unknown model '{name}'. Models: {', '.join(sorted(self.models)[:20])}")

    @property
    def concurrent_tasks(self) -> int:
        """How many models (or batches) an apply or a run evaluates at once on the gateway's Spark."""
        return self.config.gateway(self.gateway).connection.concurrent_tasks

    def start_ms(self, name: str) -> int | None:
        """Where model `name` starts (core/time/starts.py): its own start, else the earliest
        inferred for its parents. None: no start anywhere upstream (it has its latest interval only,
        which depends on the execution time)."""
        if self._starts is None:
            nodes = {n: self.models[n].start_node(self.parents(n)) for n in self.dag.sorted()}
            self._starts = inferred_starts(nodes)
        return self._starts.get(name)

    def parents(self, name: str) -> list[str]:
        return self.dag.parents.get(name, [])

    def columns(self, name: str) -> dict[str, str | None] | None:
        """Columns of a model's table (name → type or None), or None when they cannot be known: its
        output, and the columns its kind adds (an SCD type 2 model's `valid_from`/`valid_to`)."""
        found = self.output(name).columns
        added = self.models[name].kind.added_columns()
        if found is None or not added:
            return found
        return {**found, **added}

    def parent_schemas(self, name: str) -> dict[str, dict[str, str | None]]:
        return {p: cols for p in self.parents(name) if (cols := self.columns(p)) is not None}

    def output(self, name: str) -> OutputColumns:
        """What a model outputs: declared columns, a seed's header, or its query's columns (the
        query is rendered even when columns are declared, to check it against them)."""
        if name not in self._outputs:
            model = self.models[name]
            found = OutputColumns(None)
            if model.query is not None:
                repo = self.repo_of(name)
                found = query_output(model, repo.macros, repo.variables, self.parent_schemas(name), self.cache)
            if model.columns is not None:
                found = OutputColumns(dict(model.columns), found.projections, found.lineage)
            elif (kind := model.kind.seed) is not None:
                seed = self.seeds.get(name) or check_seed(model, self._shown(kind.path))
                found = OutputColumns({c: seed.types.get(c) for c in seed.header})
            self._outputs[name] = found
        return self._outputs[name]

    def _shown(self, path: str) -> str:
        return relative_path(Path(path), self.path)


def _cache_salt(repos: list[Repo]) -> str:
    # The roots are part of the key: models hold absolute seed paths.
    parts = [__version__, f"model format {MODEL_FORMAT}, column rules {COLUMN_RULES}", sqlglot.__version__]
    for repo in repos:
        parts += [str(repo.root), repo.config.model_defaults.model_dump_json(), repr(sorted(repo.variables.items()))]
        parts += [f"{name}:{repo.macros.source(name)}" for name in sorted(repo.macros.names())]
        parts += repo.macros.jinja.hash_values()
        parts += project_modules(repo.root)  # the helpers macros import (`from macros.utils import DIGITS`)
    return content_key("\n".join(parts).encode())


def load_project(path: str | Path, gateway: str | None = None, use_cache: bool = True,
                 repos: Sequence[str | Path] = ()) -> Project:
    """The project at `path`; with `repos`, the other repositories of a multi-repo project
    (core/project/repos.py), loaded with it as one."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise ModelError(f"Project directory not found: {root}")
    _refuse_unread(root)
    config = load_config(root)
    config.gateway(gateway)  # validates the gateway name
    everyone = [Repo(root, config), *other_repos(root, config, repos)]
    warnings = [w for repo in everyone[1:] if (w := unused_settings(config, repo)) is not None]
    for repo in everyone[1:]:  # (the first's, before its config was read)
        _refuse_unread(repo.root)
    for repo in everyone:
        repo.variables = repo_variables(repo.config, gateway)
    use_project_root(*(repo.root for repo in everyone))  # before any of their Python files is imported
    load_repo_macros(everyone)
    signals = load_signals(root / "signals")
    cache = ProjectCache(root / ".mesh" / "cache", _cache_salt(everyone)) if use_cache else None
    audits = _load_audits(everyone)  # before the models: an audit file's error is the first one met
    models, known_refs, owners = _load_repos(everyone, cache, config.selected_gateway(gateway))
    for model in models.values():
        for inline in model.inline_audits:
            audits.setdefault(inline.name, inline)
    for node in standalone_audit_models(audits, everyone[0].macros, everyone[0].variables):
        _add_model(models, node)
    check_view_names(models.values())  # the tables read that nobody declared are no names of ours
    project = Project(root, config, models, audits, DAG({}), gateway=gateway, cache=cache, warnings=warnings,
                      signals=signals, repos=everyone, owners=owners)
    parents, implicit = _infer_dependencies(project, known_refs)
    project.warnings += implicit
    project.dag = DAG(parents)
    order = _sorted(project)
    for repo in everyone:
        _check_default_audits(repo.config, audits, repo.shown)
    _check_audits(project)
    check_signals(models, signals)
    project.materializations = load_materializations(root)
    check_materializations(models, project.materializations)
    project.test_files = [file for repo in everyone for file in _test_files(repo.root)]
    project.seeds = _check_seeds(project, _seed_values_checked(config, gateway))
    for name in order:  # parents first: a child's columns need its parents'
        check_output_columns(models[name], project.output(name))
        if (warning := grain_warning(models[name], project.output(name))) is not None:
            project.warnings.append(warning)
    if cache is not None:
        _store_parsed(cache, models, parents, known_refs)
        cache.save()
    _declare_self_reference_columns(project)
    return project


def _refuse_unread(root: Path) -> None:
    """What a repository holds that is never read, or would be read from outside it, refused first."""
    refuse_outside_links(root, (*SOURCE_FOLDERS, *EXTERNAL_MODELS_FILES))  # before any of their files is read
    refuse_metrics(root)


def _sorted(project: Project) -> list[str]:
    try:
        return project.dag.sorted()
    except CycleError as e:
        first = project.models[e.cycle[0]]
        raise ModelError(
            f"Models depend on each other in a cycle: {' -> '.join(e.cycle)}", first.path, first.line
        ) from None


def _test_files(root: Path) -> list[Path]:
    tests_dir = root / "tests"
    return sorted([*tests_dir.glob("test*.yaml"), *tests_dir.glob("test*.yml")]) if tests_dir.is_dir() else []


def _declare_self_reference_columns(project: Project) -> None:
    """A self-referencing model's table must exist, with its types, before its query can be run or
    even analysed (it reads that table): the types inferred at load become its declared `columns`
    (`check_output_columns` made sure every one is known). Done after the models were cached: the
    types follow the parents' columns, which the cache of this model's file does not depend on."""
    for name, model in project.models.items():
        if model.self_referencing and model.columns is None:
            inferred = project.output(name).columns or {}
            project.models[name] = model.model_copy(
                update={"columns": {column: kind for column, kind in inferred.items() if kind is not None}})


def _store_parsed(cache: ProjectCache, models: dict[str, Model], parents: dict[str, set[str]],
                  known_refs: dict[str, Any]) -> None:
    keys: dict[str, str] = known_refs.get("__keys__", {})
    for model in models.values():
        path = model.path or ""
        key = keys.get(path)
        if key and not model.blueprint_variables and cache.model(path, key) is None:  # (external: no key)
            inferred = parents[model.name] - set(model.depends_on)
            if model.self_referencing:
                inferred.add(model.name)
            cache.put_model(path, key, (model, sorted(inferred)))


def _add_model(models: dict[str, Model], model: Model) -> None:
    if model.name in models:
        other = models[model.name]
        raise ModelError(
            f"Duplicate model name '{model.name}': also defined in {other.where()}", model.path, model.line
        )
    models[model.name] = model


def _model_files(models_dir: Path) -> tuple[list[Path], list[Path]]:
    """The SQL model files and the Python model files (`__init__.py` aside)."""
    sql, python = [], []
    for folder, _, names in os.walk(models_dir):
        for name in names:
            suffix = os.path.splitext(name)[1].lower()
            if suffix == ".py" and name != "__init__.py":
                python.append(Path(folder, name))
            elif suffix == ".sql":
                sql.append(Path(folder, name))
    return sorted(sql, key=str), sorted(python, key=str)  # Path comparisons are slow: 1000 models took 50 ms


def _load_repos(repos: list[Repo], cache: ProjectCache | None,
                gateway: str | None) -> tuple[dict[str, Model], dict, dict[str, int]]:
    """Every repository's models and external models by name, what the cache knew of them (see
    `_load_models`), and the repository (its index) of each model of a later one."""
    models: dict[str, Model] = {}
    known: dict[str, Any] = {"__keys__": {}}
    owners: dict[str, int] = {}
    roots = [repo.root for repo in repos]
    for index, repo in enumerate(repos):
        found = _load_models(repo, roots, cache, known)
        found += load_external_models(repo.root, gateway, roots[0])
        for model in found:
            if repo.config.project:
                model = model.model_copy(update={"project": repo.config.project})
            _add_model(models, model)
            if index:
                owners[model.name] = index
    return models, known, owners


def _load_models(repo: Repo, roots: list[Path], cache: ProjectCache | None, known: dict[str, Any]) -> list[Model]:
    """A repository's enabled models, with what the cache already knew put in `known`: `{model
    name: inferred refs}` plus the content keys of every SQL file under `__keys__` (for storing new
    entries). Python model files are imported every time (what they define depends on more than
    their own text). Files are shown relative to the first repository (`roots[0]`)."""
    models_dir = repo.root / "models"
    if not models_dir.is_dir():
        return []
    models: list[Model] = []
    defaults = repo.config.model_defaults
    expand = blueprint_macros(repo.macros, repo.variables, defaults.dialect)
    sql_files, python_files = _model_files(models_dir)
    for file in sql_files:
        rel = relative_path(file, roots[0])
        data = file.read_bytes()
        key = content_key(data)
        known["__keys__"][rel] = key
        hit = cache.model(rel, key) if cache is not None else None
        if hit is not None:
            model, refs = hit
            known[model.name] = set(refs)
            models.append(model)
        else:  # one model, or one per blueprint
            models += read_model_files(read_text(file, rel), rel, file, defaults, read_model_file, expand)
    models += read_python_model_files(python_files, repo.root, defaults, repo.variables, roots, repo.macros)
    return [model for model in models if model.enabled]


def _load_audits(repos: list[Repo]) -> dict[str, Audit]:
    """Every repository's audits by name: one namespace, as SQLMesh has it."""
    audits: dict[str, Audit] = {}
    for repo in repos:
        audits_dir = repo.root / "audits"
        if not audits_dir.is_dir():
            continue
        for file in sorted(audits_dir.rglob("*.sql")):
            rel = relative_path(file, repos[0].root)
            for audit in read_audit_file(read_text(file, rel), rel):
                if audit.name in audits:
                    raise ModelError(f"Duplicate audit name '{audit.name}': also defined in "
                                     f"{audits[audit.name].path}", audit.path, audit.line)
                audits[audit.name] = audit
    return audits


def _infer_dependencies(project: Project, known_refs: dict[str, Any]) -> tuple[dict[str, set[str]], list[str]]:
    """Each model's parents, from its query's references and `depends_on`, and the warnings about
    tables read that no file declares: those become implicit external models (added to the
    project's models), as in SQLMesh. A query reading its own name is no cycle: it reads the
    model's previous state, and the model is marked self-referencing."""
    models = project.models
    parents: dict[str, set[str]] = {}
    unknown: dict[str, list[tuple[Model, int]]] = {}  # table -> (reader, line), first reader first
    with discovering_dependencies():  # parents' columns are not known yet: @STAR waits for them
        for name, model in list(models.items()):
            refs = set(model.depends_on)
            repo = project.repo_of(name)
            if model.name in known_refs:
                refs |= known_refs[model.name]
            elif model.query is not None:
                refs |= query_references(model, repo.macros, repo.variables)
                check_jinja_statements(model, repo.macros, repo.variables)
            elif model.python is not None and not model.depends_on:  # depends_on replaces what is inferred
                refs |= {read.name for read in model.python.reads}
            if model.name in refs - set(model.depends_on) and not model.self_referencing:
                model = models[name] = model.model_copy(update={"self_referencing": True})
            refs.discard(model.name)
            if model.python is not None:
                _check_python_reads(model, models)
            for ref in sorted(r for r in refs if r not in models):
                unknown.setdefault(ref, []).append((model, _reference_line(model, ref)))
            parents[model.name] = refs
    warnings = [_implicit_external_warning(ref, readers, models) for ref, readers in unknown.items()]
    for ref, readers in unknown.items():
        models[ref] = _implicit_external(ref, *readers[0])
        parents[ref] = set()
    return parents, warnings


def _implicit_external(name: str, reader: Model, line: int) -> Model:
    try:
        check_model_name(name)
    except ValueError as e:
        raise ModelError(f"Model {reader.name} reads {name}, which cannot be an external table: {e}",
                         reader.path, line) from None
    return Model(name=name, kind=ExternalKind())


def _implicit_external_warning(name: str, readers: list[tuple[Model, int]], models: dict[str, Model]) -> str:
    reader, line = readers[0]
    where = f"{reader.path}:{line}: " if reader.path else ""
    others = sorted({m.name for m, _ in readers[1:]} - {reader.name})
    also = f" (also read by {', '.join(others)})" if others else ""
    close = _close_model_name(name, models)
    hint = f" Did you mean {close}?" if close else ""
    return (f"{where}{reader.name} reads {name}{also}, which is neither a model nor declared in external_models.yaml: "
            f"it is treated as an external table whose columns are unknown "
            f"(`mesh create_external_models` declares it).{hint}")


def _close_model_name(name: str, models: dict[str, Model]) -> str | None:
    """A model (or declared external table) of the same schema whose name is one small typo away
    (`orders` for `oders`)."""
    schema, _, table = name.rpartition(".")
    same_schema = {m.table_name: m.name for m in models.values() if m.schema_name == (schema or "default")}
    close = difflib.get_close_matches(table, list(same_schema), n=1, cutoff=0.8)
    return same_schema[close[0]] if close else None


def _reference_line(model: Model, name: str) -> int:
    """The line of the first mention of `name` in the model's query (macros may hide it: then
    the query's first line), or of `depends_on` when only that names it."""
    if model.python is not None:  # the line of its `resolve_table` call
        line = next((read.line for read in model.python.reads if read.name == name), None)
        if line is not None:
            return line
    parts = [re.escape(p) for p in name.split(".")]
    quoted = [rf"[`\"]?{p}[`\"]?" for p in parts]
    pattern = re.compile(r"(?<![\w.`\"])" + r"\s*\.\s*".join(quoted) + r"(?![\w`\"])", re.IGNORECASE)
    if model.query is not None:
        found = pattern.search(model.query)
        if found is not None:
            return model.query_line + model.query.count("\n", 0, found.start())
        if name not in model.depends_on:
            return model.query_line
    return model.line_of("depends_on") if name in model.depends_on else model.line
def _check_python_reads(model: Model, models: dict[str, Model]) -> None:
    """Each `resolve_table` names a table to read (an unknown one becomes an implicit external
    model, as a SQL model's reference does), at the line of the call."""
    assert model.python is not None
    for read in model.python.reads:
        parent = models.get(read.name)
        if parent is not None and parent.kind.is_inlined:
            raise ModelError(f"{read.name} is an {parent.kind.name.value} model: it has no table a Python model can "
                             "read (make it a VIEW)", read.path, read.line)
    for name in model.depends_on:
        if name in models and models[name].kind.is_inlined:
            raise ModelError(f"{name} is an {models[name].kind.name.value} model: it has no table a Python model can "
                             "read (make it a VIEW)", model.path, model.line_of("depends_on"))


def _seed_values_checked(config: ProjectConfig, gateway: str | None) -> bool:
    """Seed values are checked against Spark's ANSI casts unless the user turned ANSI mode off
    (then Spark turns a bad value into NULL, which is what they asked for)."""
    ansi = config.gateway(gateway).connection.config.get("spark.sql.ansi.enabled", True)
    return str(ansi).strip().lower() != "false"


def _check_seeds(project: Project, check_values: bool) -> dict[str, SeedFile]:
    """Each seed's file, read once it is known to be its repository's own (`path` may say `../..`)."""
    found: dict[str, SeedFile] = {}
    for name, model in project.models.items():
        if (kind := model.kind.seed) is not None:
            refusal = outside_project(Path(kind.path), project.repo_of(name).root, f"The seed file of {name}")
            if refusal is not None:
                raise ModelError(refusal, model.path, model.line_of("kind"))
            found[name] = check_seed(model, project._shown(kind.path), project.cache, check_values=check_values)
    return found


def _check_default_audits(config: ProjectConfig, audits: dict[str, Audit], shown: str) -> None:
    """`model_defaults.audits` naming an unknown audit is reported at its line in the config file
    of its repository (`shown`: its folder, `.` for the first)."""
    refs = default_audit_refs(tuple(config.model_defaults.audits))
    for index, ref in enumerate(refs):
        if not is_known_audit(ref.name, audits):
            where, line = config.where(("model_defaults", "audits", index))
            raise ConfigError(f"model_defaults.audits: unknown audit '{ref.name}'",
                              where if shown == "." or where is None else f"{shown}/{where}", line)


def _check_audits(project: Project) -> None:
    """Every attachment names a known audit with arguments it takes (core.audits decides)."""
    audits = project.audits
    for model in project.models.values():
        if model.audits and model.kind.is_inlined:  # nothing to audit
            raise ModelError(f"{model.kind.name.value} models cannot have audits", model.path, model.line_of("audits"))
        for ref in model.audits:
            if not is_known_audit(ref.name, audits):
                raise ModelError(
                    f"Model {model.name} uses unknown audit '{ref.name}'", model.path, model.line_of("audits")
                )
            attached = audits.get(ref.name)
            if attached is not None and attached.standalone and not model.kind.is_standalone_audit:
                raise ModelError(f"Model {model.name} attaches '{ref.name}', a standalone audit: it runs on its own, "
                                 "after the models it reads (remove it from `audits`, or drop `standalone true`)",
                                 model.path, model.line_of("audits"))
        if model.audits:
            repo = project.repo_of(model.name)
            check_audit_refs(model, audits, repo.macros, repo.variables)
