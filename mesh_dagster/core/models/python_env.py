"""The code a Python model runs, kept as source text: its function and everything the function uses.

A snapshot must run the code it was planned with, long after its file changed (a prod `mesh run`
while a dev edit is in progress) and in other processes (Dagster runs). So, like SQLMesh's
`python_env`, the loader stores text rather than live objects: the model function; the functions,
classes and global values of the project's own modules (the model's file, `macros/`) that it
uses, recursively; and one import statement for each thing it takes from an installed library.
Only what the function reaches is kept: editing an unrelated function of the same file changes
nothing, editing anything it reaches changes the text, and so the model's data hash.

Each piece keeps the file and line it was written at, so it is compiled at those lines and a
traceback from a running model points into the user's file.

A global whose assignment reads outside the code when the file is imported (`RATE =
int(os.environ["RATE"])`, a JSON file read beside it) would give another value at each evaluation:
it is stored as the value it had when the plan was made, when that is plain data, and noted as
`uncaptured` otherwise (core/models/import_time.py has the rule).

The same walk notes the calls the model makes on its execution context with literal arguments:
`resolve_table("schema.model")` (its dependencies) and `var("name")` (the variables it reads).
"""

from __future__ import annotations
import __future__

import ast
import builtins
import importlib
import importlib.util
import inspect
import linecache
import symtable
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mesh_dagster.core.config.files import read_text
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import REPO_PACKAGE_MARK, USER_MACROS_PACKAGE
from mesh_dagster.core.models import sqlmesh_names
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.models.import_time import UncapturedValue, captured_text, outside_read, plain_text

USER_MODELS_PACKAGE = "mesh_user_models"
_USER_PACKAGES = (USER_MACROS_PACKAGE, USER_MODELS_PACKAGE)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_MISSING: Any = object()
# The namespace stored code runs in: a module name nothing can import, so that cloudpickle ships
# the model's functions by value to Spark's Python workers (a UDF defined in a model works there).
ENV_MODULE = "mesh_python_model"
CONTEXT_KEYWORD = "context"  # the keyword SQLMesh passes a model function its execution context by


class Executable(BaseModel):
    """One piece of stored code: an import, a global value's assignment, or a function/class."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["import", "value", "definition"]
    text: str
    path: str | None = None  # the project file it was written in (imports have none)
    line: int = 1  # the line its text starts at in that file
    lazy_annotations: bool = False  # its file has `from __future__ import annotations`


class TableRead(BaseModel):
    """A `resolve_table("schema.model")` call: a dependency of the model, and where it is read."""

    model_config = ConfigDict(frozen=True)

    name: str  # as written
    path: str
    line: int


def is_user_module(name: str) -> bool:
    """Whether a module is one of the project's (its macros or model files), not an installed one."""
    top = name.split(".")[0]
    return top in _USER_PACKAGES or top.startswith(USER_MACROS_PACKAGE + REPO_PACKAGE_MARK)


def run_env(env: dict[str, Executable], root: Path | None = None) -> dict[str, Any]:
    """Execute stored code in a fresh namespace (nothing is shared between runs), at its lines.

    With the project's `root`, each piece's `__file__` is its own file there: code that finds files
    beside it (`Path(__file__).parent`, in the model's file or in a helper module it imports) looks
    in the project it runs for. The pieces share one namespace, so `__file__` is written into each
    piece as its file's path when it is compiled (the stored text is unchanged)."""
    sqlmesh_names.install()  # stored imports may name SQLMesh's modules (`from sqlmesh.utils.date import to_ds`)
    namespace: dict[str, Any] = {"__name__": ENV_MODULE, "__builtins__": builtins}
    for piece in env.values():
        filename = piece.path or "<mesh python model>"
        flags = __future__.annotations.compiler_flag if piece.lazy_annotations else 0
        source: str | ast.Module = "\n" * (piece.line - 1) + piece.text
        if root is not None and piece.path and "__file__" in piece.text:
            source = _with_file(ast.parse(source, filename), str(root / piece.path))
        code = compile(source, filename, "exec", flags=flags, dont_inherit=True)
        if piece.path:  # tracebacks show the stored text, even where the file is absent or changed
            padded = ["\n"] * (piece.line - 1) + [line + "\n" for line in piece.text.splitlines()]
            linecache.cache[filename] = (0, None, padded, filename)
        exec(code, namespace)
    return namespace


def _with_file(tree: ast.Module, file: str) -> ast.Module:
    """`tree` with every read of `__file__` replaced by `file`, at the same place."""
    class Replace(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id == "__file__" and isinstance(node.ctx, ast.Load):
                return ast.copy_location(ast.Constant(file), node)
            return node

    return ast.fix_missing_locations(Replace().visit(tree))


# ---------------------------------------------------------------------------------------------
# Building an env from live modules


@dataclass
class _Source:
    """A project module as the builder reads it: its text, and what each top-level statement binds."""

    module: types.ModuleType
    path: str  # as shown to users (relative to the project)
    lines: list[str]
    bindings: dict[str, ast.stmt]
    lazy_annotations: bool

    def text(self, first: int, last: int, blank: list[ast.expr] | None = None) -> str:
        """Lines `first..last`, with the lines of `blank` nodes inside them emptied (keeps the numbering)."""
        lines = self.lines[first - 1:last]
        for node in blank or []:
            for number in range(max(node.lineno, first), min(node.end_lineno or node.lineno, last) + 1):
                lines[number - first] = ""
        return textwrap.dedent("\n".join(lines))


@dataclass
class EnvBuilder:
    """Collects the code of one model function (see the module docstring).

    `dropped` are the decorators left out of stored definitions (mesh_dagster's own `model` and
    `macro`: they only mark functions for the loader).
    """

    root: Path
    dropped: tuple[Callable, ...]
    context: str = CONTEXT_KEYWORD  # the name the model's code calls its execution context by
    # The other repositories' folders of a multi-repo project (core/project/repos.py): their modules
    # are the project's code too. Stored paths stay relative to `root` (`../repo_2/helpers.py`).
    others: tuple[Path, ...] = ()
    env: dict[str, Executable] = field(default_factory=dict)
    reads: list[TableRead] = field(default_factory=list)
    dynamic_reads: list[tuple[str, int]] = field(default_factory=list)  # resolve_table of a computed name
    variables: set[str] = field(default_factory=set)
    all_variables: bool = False  # var() of a computed name: any variable may be read
    uncaptured: list[UncapturedValue] = field(default_factory=list)  # globals stored as code that read outside it
    _origins: dict[str, tuple[str, int]] = field(default_factory=dict)
    _sources: dict[str, _Source] = field(default_factory=dict)

    def add_function(self, fn: Callable, module: types.ModuleType) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """Add a model function (found in `module`'s file) and what it uses; its definition node."""
        source = self._source(module)
        node = _function_node(source, fn)
        if node is None:
            raise ModelError(f"Cannot find the source of {fn.__name__} in {source.path}", source.path,
                             fn.__code__.co_firstlineno)
        self._add_definition(fn.__name__, node, source)
        return node

    def add_class(self, cls: type, module: types.ModuleType) -> int:
        """Add a class of `module`'s file (a custom materialization) and what it uses; its line."""
        source = self._source(module)
        node = _definition_node(source, cls)
        if node is None:
            raise ModelError(f"Cannot find the source of {cls.__name__} in {source.path}", source.path)
        self._add_definition(cls.__name__, node, source)
        return node.lineno

    # -- sources ---------------------------------------------------------------------------

    def _source(self, module: types.ModuleType) -> _Source:
        if module.__name__ not in self._sources:
            file = Path(getattr(module, "__file__", "") or "")
            shown = relative_path(file, self.root)
            text = read_text(file, shown)
            tree = ast.parse(text, shown)
            self._sources[module.__name__] = _Source(module, shown, text.splitlines(), _bindings(tree),
                                                     _has_lazy_annotations(tree))
        return self._sources[module.__name__]

    # -- names -----------------------------------------------------------------------------

    def _resolve(self, name: str, source: _Source, line: int) -> None:
        """Add what `name` means in `source`'s module, if it is a global of that module."""
        if name.startswith("__") and name.endswith("__"):
            return
        binding = source.bindings.get(name)
        value = vars(source.module).get(name, _MISSING)
        if binding is None and value is _MISSING:
            return  # a builtin, or a name of the function's own
        if isinstance(binding, _DEFINITIONS):
            self._add_definition(name, binding, source)
        elif isinstance(binding, (ast.Import, ast.ImportFrom)):
            self._add_import(name, binding, value, source)
        elif isinstance(binding, (ast.Assign, ast.AnnAssign)):
            self._add_statement(name, binding, source)
        else:
            self._add_value(name, value, source, line)

    def _claim(self, name: str, origin: tuple[str, int], path: str, line: int) -> bool:
        """Reserve `name` for the code written at `origin`; False when it is already there.

        The stored code runs in one namespace, so two different things of one name cannot both be
        used (a helper `fmt` of the model's file and another `fmt` of a macro file)."""
        known = self._origins.get(name)
        if known is None:
            self._origins[name] = origin
            return True
        if known != origin:
            raise ModelError(f"The model uses two different things named '{name}' ({known[0]}:{known[1]} and "
                             f"{origin[0]}:{origin[1]}): rename one", path, line)
        return False

    def _own(self, module_name: str) -> bool:
        """Whether a module is project code: a user package (macros/, model files) or a module found
        under the project root, which SQLMesh puts on the import path (`from helper import fmt`):
        its code is stored with the model like the model file's own, so an edit to it is a change."""
        if is_user_module(module_name):
            return True
        file = getattr(sys.modules.get(module_name), "__file__", None)
        if not file:
            return False
        path = Path(file).resolve()
        return "site-packages" not in path.parts and any(
            path.is_relative_to(root) and not path.is_relative_to(root / ".mesh")
            for root in (self.root.resolve(), *(other.resolve() for other in self.others)))

    def _put(self, name: str, piece: Executable) -> None:
        self.env[name] = piece

    def _add_definition(self, name: str, node: ast.stmt, source: _Source) -> None:
        assert isinstance(node, _DEFINITIONS)
        if not self._claim(name, (source.path, node.lineno), source.path, node.lineno):
            return
        dropped = [d for d in node.decorator_list if self._is_dropped(d, source)]
        first = min([d.lineno for d in node.decorator_list if d not in dropped] + [node.lineno])
        text = source.text(first, node.end_lineno or node.lineno, dropped)
        self._walk(node, text, dropped, source)
        self._put(name, Executable(kind="definition", text=text, path=source.path, line=first,
                                   lazy_annotations=source.lazy_annotations))

    def _add_statement(self, name: str, node: ast.Assign | ast.AnnAssign, source: _Source) -> None:
        if not self._claim(name, (source.path, node.lineno), source.path, node.lineno):
            return
        if node.value is not None and self._add_computed(name, node.value, node.lineno, source):
            return
        text = source.text(node.lineno, node.end_lineno or node.lineno)
        self._walk(node, text, [], source)
        self._put(name, Executable(kind="value", text=text, path=source.path, line=node.lineno,
                                   lazy_annotations=source.lazy_annotations))

    def _add_computed(self, name: str, expression: ast.expr, line: int, source: _Source) -> bool:
        """A global whose expression reads outside the code: stored as its value when plain data
        (True), else noted as uncaptured and left to be stored as code (False)."""
        value = vars(source.module).get(name, _MISSING)
        reads = self._outside_read(expression, source, set()) if value is not _MISSING else None
        if reads is None:
            return False
        text = captured_text(name, value, expression)
        if text is None:
            self.uncaptured.append(UncapturedValue(name=name, path=source.path, line=line, kind=type(value).__name__,
                                                   reads=reads))
            return False
        self._put(name, Executable(kind="value", text=text, path=source.path, line=line))
        return True

    def _outside_read(self, node: ast.AST, source: _Source, seen: set[tuple[str, int, str]]) -> str | None:
        """What the import-time code `node` reads outside the code (core/models/import_time.py), in
        itself or in the project code it runs: the functions and classes it calls, the globals it
        reads that will not be stored as values."""
        found = outside_read(node, vars(source.module), self._own)
        if found is not None:
            return found
        for child in ast.walk(node):
            target = self._import_time_code(child, source)
            if target is None or _code_key(*target) in seen:
                continue
            seen.add(_code_key(*target))
            found = self._outside_read(*target, seen)
            if found is not None:
                return found
        return None

    def _import_time_code(self, node: ast.AST, source: _Source) -> tuple[ast.AST, _Source] | None:
        """The project code that runs when `node` (a name or attribute read) is used at import: a
        definition, the expression of a global that is no plain data, or (imported from a project
        module) the name there."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            binding = source.bindings.get(node.id)
        elif not isinstance(node, ast.Attribute):
            return None
        else:
            binding = None
        if isinstance(binding, _DEFINITIONS):
            return binding, source
        if isinstance(binding, (ast.Assign, ast.AnnAssign)) and binding.value is not None:
            return (binding.value, source) if plain_text(_live_value(node, source.module)) is None else None
        if isinstance(binding, ast.ImportFrom) and isinstance(node, ast.Name):
            module = _relative_module(binding, source.module) if binding.level else binding.module
            if module is None or not self._own(module) or module not in sys.modules:
                return None
            alias = next(a for a in binding.names if _bound_name(a, False) == node.id)
            return ast.Name(id=alias.name, ctx=ast.Load()), self._source(sys.modules[module])
        value = _live_value(node, source.module)
        if not (inspect.isfunction(value) or inspect.isclass(value)) or not self._own(value.__module__) \
                or value.__module__ not in sys.modules:
            return None
        other = self._source(sys.modules[value.__module__])
        definition = _definition_node(other, value)
        return (definition, other) if definition is not None else None

    def _add_import(self, name: str, node: ast.Import | ast.ImportFrom, value: Any, source: _Source) -> None:
        alias = next(a for a in node.names if _bound_name(a, isinstance(node, ast.Import)) == name)
        if isinstance(node, ast.ImportFrom) and node.level:
            # Inside a folder of the project imported as a package (macros/, signals/), files import
            # each other relatively (core/config/user_modules.py): what they import is project code, stored.
            module = _relative_module(node, source.module)
            if module is None or not self._own(module):
                raise ModelError("Relative imports cannot be used by Python models: import from installed packages, "
                                 "or define the helper in the model's file", source.path, node.lineno)
            self._add_from_project(name, alias.name, module, source, node.lineno)
            return
        if isinstance(value, types.ModuleType) and self._own(value.__name__):
            raise ModelError(f"'{name}' is a module of the project: import the functions the model uses from it "
                             "by name (`from module import helper`)", source.path, node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module and self._own(node.module):
            self._add_from_project(name, alias.name, node.module, source, node.lineno)
            return
        text = ast.unparse(ast.Import(names=[alias]) if isinstance(node, ast.Import)
                           else ast.ImportFrom(module=node.module, names=[alias], level=0))
        if self._claim(name, (text, 0), source.path, node.lineno):
            self._put(name, Executable(kind="import", text=text))

    def _add_from_project(self, name: str, original: str, module_name: str, source: _Source, line: int) -> None:
        """`from <project module> import x [as y]`: x's own code is stored, not the import."""
        module = sys.modules.get(module_name)
        if module is None:
            raise ModelError(f"Cannot find the project module {module_name}", source.path, line)
        other = self._source(module)
        value = vars(module).get(original, _MISSING)
        if original in other.bindings:
            self._resolve(original, other, line)
        elif inspect.isfunction(value) or inspect.isclass(value):
            self._add_nested_definition(value, other, line)
        elif value is not _MISSING:
            self._add_value(original, value, other, line)
        else:
            raise ModelError(f"{module_name} has no '{original}'", source.path, line)
        if name != original:
            self._add_alias(name, original, source, line)

    def _add_nested_definition(self, value: Any, source: _Source, line: int) -> None:
        """A function or class of a project module defined inside a block (`if`, `try`)."""
        node = _definition_node(source, value)
        if node is None:
            raise ModelError(f"Cannot find the source of '{value.__name__}' in {source.path}", source.path, line)
        self._add_definition(value.__name__, node, source)

    def _add_alias(self, name: str, original: str, source: _Source, line: int) -> None:
        text = f"{name} = {original}"
        if self._claim(name, (text, 0), source.path, line):
            self._put(name, Executable(kind="value", text=text))

    def _add_value(self, name: str, value: Any, source: _Source, line: int) -> None:
        """A global bound by code the loader cannot read statically (inside an `if`/`try`):
        stored from its live value when that can be written back as code."""
        if isinstance(value, types.ModuleType):
            if self._own(value.__name__):
                raise ModelError(f"'{name}' is a module of the project: import the functions the model uses "
                                 "from it by name", source.path, line)
            text = f"import {value.__name__}" if value.__name__ == name else f"import {value.__name__} as {name}"
        elif (inspect.isfunction(value) or inspect.isclass(value)) and not self._own(value.__module__):
            if not _importable(value):
                raise ModelError(f"'{name}' cannot be imported by name from {value.__module__}", source.path, line)
            text = f"from {value.__module__} import {value.__qualname__}"
            text += f" as {name}" if value.__qualname__ != name else ""
        elif inspect.isfunction(value) or inspect.isclass(value):  # of the project
            self._add_from_project(name, value.__name__, value.__module__, source, line)
            return
        elif (plain := plain_text(value)) is not None:
            text = f"{name} = {plain}"
        else:
            raise ModelError(f"The model uses the global '{name}' (a {type(value).__name__}), which cannot be stored "
                             "with the model: assign it at the top level of the file, or import it", source.path, line)
        if self._claim(name, (text, 0), source.path, line):
            self._put(name, Executable(kind="import" if text.startswith(("import", "from")) else "value", text=text))

    # -- walking code ----------------------------------------------------------------------

    def _walk(self, node: ast.AST, text: str, skipped: list[ast.expr], source: _Source) -> None:
        """Resolve the globals the code `text` (of `node`) reads, and note its execution-context calls.

        Python's own scoping (symtable) decides which names are globals: a function's local that
        happens to share a global's name does not drag that global in."""
        skip = {id(n) for part in skipped for n in ast.walk(part)}
        lines: dict[str, int] = {}
        global_names = _global_names(text, source.path) | _annotation_names(node)
        for child in ast.walk(node):
            if id(child) in skip:
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                lines.setdefault(child.id, child.lineno)
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                self._note_call(child, source, global_names)
        for name in sorted(global_names & set(lines)):
            self._resolve(name, source, lines[name])

    def _note_call(self, call: ast.Call, source: _Source, global_names: set[str]) -> None:
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        argument = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
        literal = _string_value(argument, source, global_names)
        if method == "table" and _called_on(call, self.context):  # SQLMesh's name (`spark.table` is Spark's)
            method = "resolve_table"
        if method == "resolve_table":
            if literal is None:
                self.dynamic_reads.append((source.path, call.lineno))
            else:
                self.reads.append(TableRead(name=literal, path=source.path, line=call.lineno))
        elif method == "var" and argument is not None:
            if literal is None:
                self.all_variables = True
            else:
                self.variables.add(literal.lower())

    def _is_dropped(self, decorator: ast.expr, source: _Source) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return any(_live_value(target, source.module) is fn for fn in self.dropped)


def _called_on(call: ast.Call, name: str) -> bool:
    """Whether `call` is a method call on the execution context: the name `name` (`context.table(...)`)
    or, as SQLMesh passes it, the keyword arguments' entry (`kwargs["context"].table(...)`)."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Subscript) and isinstance(receiver.slice, ast.Constant):
        return receiver.slice.value == CONTEXT_KEYWORD
    return isinstance(receiver, ast.Name) and receiver.id == name


def _code_key(node: ast.AST, source: _Source) -> tuple[str, int, str]:
    """Which project code `node` is, to follow it once: its file, line and (a name) its name."""
    return source.path, getattr(node, "lineno", 0), getattr(node, "id", "")


def _function_node(source: _Source, fn: Callable) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The `def` of `fn` in its file: same name, same first line (that of its first decorator)."""
    node = _definition_node(source, fn)
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _definition_node(source: _Source, value: Any) -> ast.stmt | None:
    """Where a function (same name and first line) or a class (same name) is defined in its file."""
    first = value.__code__.co_firstlineno if inspect.isfunction(value) else None
    for node in ast.walk(ast.parse("\n".join(source.lines))):
        if not isinstance(node, _DEFINITIONS) or node.name != value.__name__:
            continue
        if first is None if isinstance(node, ast.ClassDef) else _first_line(node) == first:
            return node
    return None


def _global_names(text: str, path: str) -> set[str]:
    """Names the code reads as globals: at its top level, and in any scope nested in it."""
    names: set[str] = set()

    def visit(table: symtable.SymbolTable, top: bool) -> None:
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (top or symbol.is_global()):
                names.add(symbol.get_name())
        for child in table.get_children():
            visit(child, False)

    visit(symtable.symtable(text, path, "exec"), True)
    return names


def _annotation_names(node: ast.AST) -> set[str]:
    """Names read by the annotations in `node`. Under `from __future__ import annotations` Python's
    scoping does not count them as used, but the stored code needs them: typed macro and signal
    arguments are converted by their annotations (`exp.Column`), resolved against its globals."""
    names: set[str] = set()
    for child in ast.walk(node):
        annotations: list[ast.expr | None] = []
        if isinstance(child, ast.arg):
            annotations.append(child.annotation)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(child.returns)
        elif isinstance(child, ast.AnnAssign):
            annotations.append(child.annotation)
        for annotation in annotations:
            if annotation is not None:
                names |= {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
    return names


def _relative_module(node: ast.ImportFrom, module: types.ModuleType) -> str | None:
    """The absolute name of the module a relative `from . import x` in `module` reads."""
    package = module.__package__ or (module.__name__ if hasattr(module, "__path__") else None)
    if not package:
        return None
    try:
        return importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    except (ImportError, ValueError):
        return None


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([d.lineno for d in node.decorator_list] + [node.lineno])


def _bindings(tree: ast.Module) -> dict[str, ast.stmt]:
    """What each top-level statement binds (the last binding of a name wins, as when it ran)."""
    out: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, _DEFINITIONS):
            out[stmt.name] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name != "*":
                    out[_bound_name(alias, isinstance(stmt, ast.Import))] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        out[node.id] = stmt
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = stmt
        else:  # a statement binding names in ways not read here (`for`, `with`, `if`...): from live values
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    out.pop(node.id, None)
                elif isinstance(node, _DEFINITIONS):
                    out.pop(node.name, None)
    return out


def _bound_name(alias: ast.alias, plain_import: bool) -> str:
    if alias.asname:
        return alias.asname
    return alias.name.split(".")[0] if plain_import else alias.name


def _has_lazy_annotations(tree: ast.Module) -> bool:
    return any(isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations"
                                                                                  for a in s.names)
               for s in tree.body)


def _live_value(node: ast.expr, module: types.ModuleType) -> Any:
    """The object a `name` or `name.attr...` expression means in `module` (or _MISSING)."""
    if isinstance(node, ast.Name):
        return vars(module).get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = _live_value(node.value, module)
        return getattr(base, node.attr, _MISSING) if base is not _MISSING else _MISSING
    return _MISSING


def _importable(value: Any) -> bool:
    try:
        return getattr(importlib.import_module(value.__module__), value.__qualname__, None) is value
    except Exception:  # noqa: BLE001 - any failure means: not importable by name
        return False


def _string_value(node: ast.expr | None, source: _Source, global_names: set[str]) -> str | None:
    """A string literal, or a module-level string constant read by name (`resolve_table(ORDERS)`, as
    SQLMesh infers it): its value when the file was loaded."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in global_names and node.id in source.bindings:
        value = getattr(source.module, node.id, None)
        return value if isinstance(value, str) else None
    return None
