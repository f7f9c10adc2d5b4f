"""What a snapshot captures besides its model definition: everything else that decides its data.

A model's rows depend on more than its own file: the Python macros its SQL calls (and the helpers,
constants and imports they use), the config variables it reads, the audits that gate it, the
signals that time it, its parents' columns (star expansion, `@STAR`) and, for a seed, the CSV's
bytes. Reading any of these from the working tree at evaluation would run code nobody planned:
a macro edited after the plan, a variable changed in config.yaml, a CSV edited while a plan waits
at its prompt. So the plan captures them into the snapshot, as source text and values, and every
evaluation (backfill, `mesh run`, restatement, reviewed apply, Dagster) works from the capture.

Functions are stored the way a Python model's code is (core/models/python_env.py): only what they
reach, as text compiled at its original file and line. A seed's content is too large for the
snapshot's JSON: the capture holds its digest; the bytes are those the loader read (one read of
the file), which the apply stores once in the state store by digest, and which an evaluation reads
back by digest (execution/evaluate/evaluator.py).

Snapshots stored before captures existed have none (`Snapshot.capture is None`): they are
evaluated from the project as before, and the next plan captures them.

A capture also keeps the model's column lineage (core/project/lineage.py), so that an environment
serving an older version shows that version's lineage, not the working tree's (dagster/code_location.py).
It decides no data and is in no fingerprint. Working it out may render the query, so a capture only
knows how to (from the project it was made from) and does it when it is stored: a plan only looked
at (Dagster's at load, `mesh plan` without applying) never pays for it.
"""

from __future__ import annotations

import re
import sys
import types
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_serializer

from mesh_dagster.core.errors import MeshError, ModelError
from mesh_dagster.core.macros.jinja import JinjaMacro, JinjaMacros
from mesh_dagster.core.macros.user import MacroRegistry, macro
from mesh_dagster.core.models.import_time import UncapturedValue
from mesh_dagster.core.models.model import Audit, Model
from mesh_dagster.core.models.python_env import EnvBuilder, Executable, run_env
from mesh_dagster.core.models.python_model import model as model_decorator
from mesh_dagster.core.project.lineage import model_lineage
from mesh_dagster.core.project.materializations import StoredMaterialization
from mesh_dagster.core.project.signals import SignalRegistry, describe_signal, signal

if TYPE_CHECKING:
    from mesh_dagster.core.project.project import Project
    from mesh_dagster.core.project.repos import Repo
    from mesh_dagster.core.snapshots.snapshot import Snapshot

_MACRO_USE = re.compile(r"@\{?([A-Za-z_]\w*)")

# A model's column lineage as stored: {column: [(model, column), ...]} (core/project/lineage.py).
StoredLineage = dict[str, list[tuple[str, str]]]


class CapturedFunction(BaseModel):
    """A user macro or signal as stored code: the function and everything it uses."""

    model_config = ConfigDict(frozen=True)

    name: str  # the name models call it by (lower case)
    entrypoint: str  # the Python function's own name
    env: dict[str, Executable]
    path: str | None = None  # where it is defined (for messages)
    line: int | None = None
    metadata_only: bool = False  # a macro whose output never changes data (`@macro(metadata_only=True)`)
    variables: list[str] = Field(default_factory=list)  # `evaluator.var("x")` calls with a literal name
    all_variables: bool = False  # `var()` of a computed name
    uncaptured: list[UncapturedValue] = Field(default_factory=list)  # globals it runs again (import_time.py)

    def hash_values(self) -> list[str]:
        """The code as written: any edit of what the function runs is a change."""
        return [f"{self.name}:{self.entrypoint}", *(f"{n}:{p.kind}:{p.text}" for n, p in self.env.items())]

    def load(self, root: Path | None = None) -> Callable:
        """The function, defined afresh from the stored code (nothing shared with the project's);
        each piece's `__file__` is where it was written in the project at `root`."""
        return run_env(self.env, root)[self.entrypoint]

    def uses(self, names: Iterable[str]) -> set[str]:
        """Which of `names` (other macros) the stored code calls as `@name` in the SQL it returns."""
        known = {n.lower() for n in names}
        return {m.lower() for p in self.env.values() for m in _MACRO_USE.findall(p.text) if m.lower() in known}


class SeedContent(BaseModel):
    """A seed CSV as planned: the digest of its bytes, and its header (the columns it loads). The
    bytes themselves are read once, by the loader (`Project.seeds`); an apply stores them by this
    digest (`captured_content`), and an evaluation reads them back by it, whatever the file holds by then."""

    model_config = ConfigDict(frozen=True)

    digest: str
    header: list[str]
    size: int


class Capture(BaseModel):
    """Everything a snapshot's evaluation reads besides its `Model` (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    macros: dict[str, CapturedFunction] = Field(default_factory=dict)
    jinja_macros: dict[str, JinjaMacro] = Field(default_factory=dict)  # the macros/*.sql macros its Jinja calls
    variables: dict[str, str] = Field(default_factory=dict)  # name -> the value as YAML text
    audits: dict[str, Audit] = Field(default_factory=dict)
    signals: dict[str, CapturedFunction] = Field(default_factory=dict)
    parent_schemas: dict[str, dict[str, str | None]] = Field(default_factory=dict)
    columns: dict[str, str | None] | None = None  # what the model outputs (its table's columns)
    seed: SeedContent | None = None
    materialization: StoredMaterialization | None = None  # a CUSTOM model's class (its code)
    # Its column lineage; None: not known (or stored before lineage was, or not worked out yet: see
    # `column_lineage`). Derived from the rest, so never compared, hashed or part of the identity.
    lineage: StoredLineage | None = None
    _lineage_source: Callable[[], StoredLineage | None] | None = PrivateAttr(default=None)
    _worked_out: StoredLineage | None = PrivateAttr(default=None)
    _values: dict[str, Any] | None = PrivateAttr(default=None)
    _macros: MacroRegistry | None = PrivateAttr(default=None)
    _signals: SignalRegistry | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        """Equal captures capture the same things; what was loaded or fetched from them does not count,
        nor does the lineage derived from them (comparing never works it out)."""
        return isinstance(other, Capture) and \
            self.model_dump(exclude={"lineage"}) == other.model_dump(exclude={"lineage"})

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Capture:
        """A capture is never changed once made: copies share it, with the functions it loaded."""
        return self

    def column_lineage(self) -> StoredLineage | None:
        """The model's column lineage: as stored, or worked out now (once) from the project this
        capture was made from; None when not known or that project is gone."""
        if self._lineage_source is not None:
            source, self._lineage_source = self._lineage_source, None
            self._worked_out = source()
        return self.lineage if self.lineage is not None else self._worked_out

    @field_serializer("lineage")
    def _stored_lineage(self, value: StoredLineage | None) -> StoredLineage | None:
        """What is stored: the lineage, worked out now if it was not yet (see the module docstring)."""
        return self.column_lineage()

    def variable_values(self) -> dict[str, Any]:
        """The captured variables as the project gave them (parsed once)."""
        if self._values is None:
            self._values = {name: yaml.safe_load(text) for name, text in self.variables.items()}
        return self._values

    def macro_registry(self, root: Path | None = None) -> MacroRegistry:
        """The captured macros as a registry: what rendering this snapshot may call (`root`: the
        project it is evaluated for)."""
        if self._macros is None:
            registry = MacroRegistry(JinjaMacros(self.jinja_macros))
            for name, captured in self.macros.items():
                registry.register(captured.load(root), name, captured.metadata_only)
            self._macros = registry
        return self._macros

    def signal_registry(self, root: Path | None = None) -> SignalRegistry:
        """The captured signals, as the readiness check binds and calls them."""
        if self._signals is None:
            self._signals = SignalRegistry({
                name: describe_signal(name, captured.load(root), captured.path or "signals", captured.line)
                for name, captured in self.signals.items()})
        return self._signals

    def macro_values(self) -> list[str]:
        return [v for name in sorted(self.macros) for v in self.macros[name].hash_values()]

    def jinja_values(self) -> list[str]:
        return JinjaMacros(self.jinja_macros).hash_values()

    def signal_values(self) -> list[str]:
        return [v for name in sorted(self.signals) for v in self.signals[name].hash_values()]


def dump_value(value: Any) -> str:
    """A variable's value as YAML text: dates and nested values come back as they were written."""
    try:
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=True, width=10**9).strip()
    except yaml.YAMLError as e:
        raise ModelError(f"A config variable cannot be stored with the plan: {e}") from None


# ---------------------------------------------------------------------------------------------
# Capturing a loaded project's models


def sql_text(model: Model, audits: dict[str, Audit]) -> str:
    """All SQL a model's evaluation renders, as written: where its macro and variable uses are."""
    texts = [model.query or "", *model.pre_statements, *model.post_statements, *model.on_virtual_update,
             *model.macro_definitions]
    texts += [audits[ref.name].query for ref in model.audits if ref.name in audits]
    texts += [value for ref in model.audits for value in ref.args.values()]  # `threshold := @my_threshold()`
    return " ".join(texts)


class Capturer:
    """Captures the models of one loaded project; each macro and signal is captured once."""

    def __init__(self, project: Project):
        self.project = project
        self._macros: dict[tuple[str, str], CapturedFunction] = {}  # by repository (its folder) and name
        self._signals: dict[str, CapturedFunction] = {}

    def capture(self, model: Model) -> Capture:
        project = self.project
        repo = project.repo_of(model.name)  # its repository's macros and variables
        audits = {ref.name: project.audits[ref.name] for ref in model.audits if ref.name in project.audits}
        inlined = self._inlined_queries(model.name)
        sql = " ".join([sql_text(model, audits), *inlined])
        jinja = repo.macros.jinja.used_by([model.query or "", *model.pre_statements, *model.post_statements,
                                           *model.on_virtual_update, *(audit.query for audit in audits.values()),
                                           *inlined])
        sql = " ".join([sql, *(m.source for m in jinja.values())])  # what they read and call counts too
        macros = self._macro_closure(repo, repo.macros.used_by(sql))
        capture = Capture(
            macros=macros,
            jinja_macros=jinja,
            variables=self._variables(repo, model, sql, macros.values()),
            audits=audits,
            signals={ref.name.lower(): self._signal(ref.name.lower()) for ref in model.signals},
            parent_schemas=project.parent_schemas(model.name) if model.query is not None else {},
            columns=project.columns(model.name),
            seed=self._seed(model),
            materialization=self._materialization(model),
        )
        capture._lineage_source = _lineage_source(project, model.name)
        return capture

    def _inlined_queries(self, name: str) -> list[str]:
        """The queries (and `@DEF`s) of the EMBEDDED models `name` reads, and of those they read: they
        are rendered inside its own query, with the macros captured for it."""
        project, found, queue = self.project, [], [name]
        seen: set[str] = set()
        while queue:
            for parent in project.parents(queue.pop()):
                model = project.models.get(parent)
                if model is not None and model.kind.is_inlined and parent not in seen:
                    seen.add(parent)
                    found += [model.query or "", *model.macro_definitions]
                    queue.append(parent)
        return found

    def capture_sql(self, sql: str) -> Capture:
        """What rendering SQL outside any model reads (the project's `before_all` / `after_all`,
        core/snapshots/statements.py): the macros it calls, transitively, and the variables it and
        they read."""
        repo = self.project.repos[0]
        macros = self._macro_closure(repo, repo.macros.used_by(sql))
        return Capture(macros=macros, variables=self._variables(repo, None, sql, macros.values()))

    def _materialization(self, model: Model) -> StoredMaterialization | None:
        kind = model.kind.custom  # a CUSTOM kind's class (checked at load)
        return self.project.materializations.get(kind.materialization.lower()) if kind is not None else None

    # -- macros and signals ----------------------------------------------------------------

    def _macro_closure(self, repo: Repo, names: list[str]) -> dict[str, CapturedFunction]:
        """The macros `names` of `repo` and, transitively, those their code calls as `@name`."""
        registered = repo.macros.names()
        found: dict[str, CapturedFunction] = {}
        pending = list(names)
        while pending:
            name = pending.pop()
            if name in found:
                continue
            found[name] = self._macro(repo, name)
            pending += sorted(found[name].uses(registered) - set(found))
        return dict(sorted(found.items()))

    def _macro(self, repo: Repo, name: str) -> CapturedFunction:
        key = (repo.shown, name)
        if key not in self._macros:
            fn = repo.macros.get(name)
            assert fn is not None  # `used_by` only names registered macros
            self._macros[key] = _capture_function(name, fn, self.project, macro,
                                                  metadata_only=repo.macros.is_metadata_only(name))
        return self._macros[key]

    def _signal(self, name: str) -> CapturedFunction:
        if name not in self._signals:
            function = self.project.signals.get(name)
            if function is None:  # refused when the project loaded; a plan never gets here
                raise ModelError(f"Unknown signal '{name}'")
            self._signals[name] = _capture_function(name, function.fn, self.project, signal)
        return self._signals[name]

    # -- values ----------------------------------------------------------------------------

    def _variables(self, repo: Repo, model: Model | None, sql: str,
                   macros: Iterable[CapturedFunction]) -> dict[str, str]:
        """The config variables (of `repo`) the model can read: named in its SQL (`@VAR('x')`, `@x`,
        `'x'`), read by its macros or its Python code; all of them when one reads a computed name."""
        variables = repo.variables
        if not variables:
            return {}
        functions = list(macros)
        code = model.python if model is not None else None
        if any(f.all_variables for f in functions) or (code is not None and code.all_variables):
            used = set(variables)
        else:
            named = {v for f in functions for v in f.variables} | set(code.variables if code is not None else ())
            text = sql.lower()
            used = {key for key in variables if key in named or _mentions(text, key)}
        return {key: dump_value(variables[key]) for key in sorted(used)}

    def _seed(self, model: Model) -> SeedContent | None:
        if model.kind.seed is None:
            return None
        seed = self.project.seeds[model.name]
        return SeedContent(digest=seed.content_hash, header=list(seed.header), size=len(seed.data))


def captured_content(project: Project, snapshots: Iterable[Snapshot]) -> dict[str, bytes]:
    """digest -> bytes of the seed content these snapshots captured from `project` (the file as its
    load read it): what an apply stores beside them. A snapshot captured from other content (the
    file changed since) is not this project's to vouch for, and is left out."""
    found: dict[str, bytes] = {}
    for snap in snapshots:
        seed = snap.capture.seed if snap.capture is not None else None
        loaded = project.seeds.get(snap.name)
        if seed is not None and loaded is not None and loaded.content_hash == seed.digest:
            found[seed.digest] = loaded.data
    return found


def _lineage_source(project: Project, name: str) -> Callable[[], StoredLineage | None]:
    """How a capture works out its model's column lineage when it is stored. The project is held
    weakly: a capture kept longer than its project (a plan's snapshots) does not keep it loaded."""
    held = weakref.ref(project)

    def work_out() -> StoredLineage | None:
        found = held()
        if found is None:
            return None
        try:
            lineage = model_lineage(found, name)
        except MeshError:  # the model fails when it runs, saying why; storing its snapshot does not
            return None
        return None if lineage is None else {c: [(r.table, r.column) for r in refs] for c, refs in lineage.items()}

    return work_out


def _mentions(sql_lower: str, key: str) -> bool:
    name = re.escape(key)
    return re.search(rf"@{name}\b|@\{{{name}\}}|['\"]{name}['\"]", sql_lower) is not None


def _capture_function(name: str, fn: Callable, project: Project, decorator: Callable, *,
                      metadata_only: bool = False) -> CapturedFunction:
    """`fn` as stored code (core/models/python_env.py), its own decorator left out (and `@model`: an
    is_sql model's function run at every render is captured as a macro, core/project/is_sql_models.py).
    A model file's module is forgotten once read: its function's globals stand for it."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "") or _module_of(fn)
    code = getattr(fn, "__code__", None)
    if module is None or code is None:
        raise ModelError(f"Macro or signal '{name}' has no source file mesh can store with the plan: define it in "
                         "the project's macros/ or signals/ folder")
    others = tuple(repo.root for repo in project.repos[1:])
    builder = EnvBuilder(project.path, (decorator, model_decorator), others=others)
    node = builder.add_function(fn, module)
    piece = builder.env.get(fn.__name__)
    return CapturedFunction(name=name, entrypoint=fn.__name__, env=builder.env, path=piece.path if piece else None,
                            line=node.lineno,
                            metadata_only=metadata_only, variables=sorted(builder.variables),
                            all_variables=builder.all_variables, uncaptured=builder.uncaptured)


def _module_of(fn: Callable) -> types.ModuleType | None:
    """A module holding `fn`'s globals (its file among them), for a function whose module is gone."""
    scope = getattr(fn, "__globals__", None)
    if not isinstance(scope, dict) or not scope.get("__file__"):
        return None
    module = types.ModuleType(str(scope.get("__name__") or fn.__module__))
    module.__dict__.update(scope)
    return module
