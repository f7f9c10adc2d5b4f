"""Loading `models/*.py`: importing each file once, and reading its `@model` functions into Models.

Every decorator argument is a MODEL property, read by the very code that reads MODEL blocks
(core/project/model_reader.py, and the kind classes of core/models/kinds.py for `kind`): Python values become the
definition entries those readers take, so a property means, and is refused, exactly as in SQL, at
the line of its argument (found in the file's syntax tree). Only `columns` (a dict; required,
because the table is created before the function first runs), `pre_statements` and
`post_statements` (lists of SQL text) are Python's own.

A file is imported as `mesh_user_models.<path>` only while it is read, and forgotten afterwards,
so nothing leaks into the next project loaded in this process; what a model runs is kept as
source text (core/models/python_env.py).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import re
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from sqlglot import exp

from mesh_dagster.core.config.config import ModelDefaults
from mesh_dagster.core.config.files import read_text
from mesh_dagster.core.config.names import check_model_name
from mesh_dagster.core.config.types import to_spark_type
from mesh_dagster.core.config.user_modules import import_failure, innermost_line
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.macros.user import MacroRegistry, macro
from mesh_dagster.core.models.definition import Entry, Value, at_line, read_value, relative_path
from mesh_dagster.core.models.kinds import FullKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.models.property_values import read_column
from mesh_dagster.core.models.python_env import CONTEXT_KEYWORD, USER_MODELS_PACKAGE, EnvBuilder, TableRead
from mesh_dagster.core.models.python_model import (
    MODEL_ATTR,
    RUNTIME_ARGUMENTS,
    ModelSpec,
    PythonCode,
    context_misuse,
    context_parameter,
    model,
)
from mesh_dagster.core.models.sqlmesh_kinds import plain_kind
from mesh_dagster.core.project.blueprints import python_blueprints, templated
from mesh_dagster.core.project.is_sql_models import is_sql_query
from mesh_dagster.core.project.model_reader import (
    complete_model_properties,
    project_root_of,
    read_model_properties,
)

# Decorator arguments that are no MODEL property: Python's own way to say what a SQL file says
# with its query and statements.
PYTHON_PROPERTIES = ("columns", "pre_statements", "post_statements", "is_sql")
# SQLMesh decorator arguments we recognise but do not implement: refused, not ignored.
UNSUPPORTED_PYTHON_PROPERTIES = ("on_virtual_update", "python_env", "module_path")


def read_python_model_files(files: list[Path], root: Path, defaults: ModelDefaults,
                            variables: Mapping[str, Any], roots: Sequence[Path] = (),
                            macros: MacroRegistry | None = None) -> list[Model]:
    """The models the Python files of `models/` define, every module forgotten afterwards. `roots`:
    a multi-repo project's repositories, the first first, when `root` is one of them
    (core/project/repos.py): files are shown, and their code stored, relative to the first.
    `macros`: the repository's, which is_sql functions run at every render join (is_sql_models.py)."""
    _forget_model_modules()
    roots = tuple(roots) or (root,)
    reading = _Reading(root, roots[0], roots[1:], macros)
    try:
        models = []
        for file in files:
            shown = relative_path(file, roots[0])
            module = _import_model_file(file, shown, f"{USER_MODELS_PACKAGE}.{_MODULE_PART.sub('_', shown[:-3])}")
            models += _read_python_models(module, shown, reading, defaults, variables)
        return models
    finally:
        _forget_model_modules()


_MODULE_PART = re.compile(r"[^0-9A-Za-z_]")


@dataclass(frozen=True)
class _Reading:
    """What reading one repository's model files needs besides the files: its folder (`own`, where
    `$root` leads), the project's first repository's (`first`: files are shown, and code stored,
    relative to it), the other repositories' (`others`: their modules are the project's code too)
    and its macros."""

    own: Path
    first: Path
    others: tuple[Path, ...]
    macros: MacroRegistry | None
_MODEL_FUNCTION_NAMES = ("execute", "entrypoint")  # what SQLMesh's docs and scaffolds name a model function


def _import_model_file(file: Path, shown: str, module_name: str) -> types.ModuleType:
    """Run a model file as the module `module_name`; a failure is one error at the file's line."""
    _check_imports(file, shown)
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ModelError("Cannot import the Python model file", shown)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything while importing
        sys.modules.pop(module_name, None)
        line = e.lineno if isinstance(e, SyntaxError) else innermost_line(e, {str(file)})
        failure = import_failure(e, project_root_of(file, shown))
        raise ModelError(f"Cannot import the Python model file: {failure}", shown, line) from e
    return module


def _check_imports(file: Path, shown: str) -> None:
    """Model files are no package: a relative import is refused as what it is, before it fails as
    a missing module."""
    try:
        tree = ast.parse(read_text(file, shown), shown)
    except SyntaxError:
        return  # reported by the import, with its line
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise ModelError("Python model files cannot use relative imports: import from installed packages or "
                             "from the project's macros (`from mesh_user_macros.<file> import helper`), or define the "
                             "helper in the model's file", shown, node.lineno)


def _forget_model_modules() -> None:
    """Model files are imported only to read them: none stays importable afterwards."""
    for name in [n for n in sys.modules if n == USER_MODELS_PACKAGE or n.startswith(USER_MODELS_PACKAGE + ".")]:
        del sys.modules[name]


def _read_python_models(module: types.ModuleType, shown: str, reading: _Reading, defaults: ModelDefaults,
                       variables: Mapping[str, Any]) -> list[Model]:
    """The models an imported model file defines: none for a helper module (one defining an
    undecorated `execute` is refused: it looks like a model that would be skipped)."""
    tree = ast.parse(read_text(Path(module.__file__ or ""), shown), shown)
    decorated = _decorated_defs(tree, module)
    functions = [fn for fn in vars(module).values()
                 if inspect.isfunction(fn) and getattr(fn, MODEL_ATTR, None) and fn.__module__ == module.__name__]
    found = {fn.__code__.co_firstlineno for fn in functions}
    for node, _ in decorated:
        if _first_line(node) not in found:
            raise ModelError(f"The model function '{node.name}' is not reachable by its name: another definition "
                             "of the same name replaces it; give each model function its own name",
                             shown, _first_line(node))
    if not functions:
        forgotten = next((node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and node.name in _MODEL_FUNCTION_NAMES), None)
        if forgotten is not None:  # a model whose decorator is missing: it would be skipped without a word
            raise ModelError(f"This Python file in models/ defines no model, but a function named "
                             f"'{forgotten.name}': decorate it with @model(\"schema.name\", columns={{...}}), or "
                             "rename it if the file only holds helpers", shown, forgotten.lineno)
        return []  # a helper module the models import (`from models.shared import ...`), as SQLMesh allows
    calls = {_first_line(node): call for node, call in decorated}
    models: list[Model] = []
    for fn in sorted(functions, key=lambda f: f.__code__.co_firstlineno):
        models += _read_blueprints(fn, calls.get(fn.__code__.co_firstlineno), module, shown, reading, defaults,
                                   variables)
    return models


def _read_blueprints(fn: Callable, call: ast.expr | None, module: types.ModuleType, shown: str, reading: _Reading,
                     defaults: ModelDefaults, variables: Mapping[str, Any]) -> list[Model]:
    """The model a function defines, or one per blueprint (`blueprints=[{...}, ...]`, core/project/blueprints.py)."""
    specs: tuple[ModelSpec, ...] = getattr(fn, MODEL_ATTR)
    value = specs[0].properties.get("blueprints") if len(specs) == 1 else None
    if value is None:
        return [_read_model(fn, call, module, shown, reading, defaults, variables)]
    where = _Decorator.of(call, fn.__code__.co_firstlineno)
    dialect = str(specs[0].properties.get("dialect") or defaults.dialect)
    blueprints = python_blueprints(value, specs[0].name, dialect, shown, where.at("blueprints"), where.name_line)
    models: list[Model] = []
    for blueprint in blueprints:
        model = _read_model(fn, call, module, shown, reading, defaults, variables, blueprint)
        if any(other.name == model.name for other in models):
            raise ModelError(f"Two blueprints generate the model name {model.name}: give each its own name variables",
                             shown, where.at("blueprints"))
        models.append(model)
    return models


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([d.lineno for d in node.decorator_list] + [node.lineno])


def _decorated_defs(tree: ast.Module, module: types.ModuleType
                    ) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]]:
    """Every `def` of the file decorated with `@model`, with its decorator expression."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if _names_model(target, module):
                    out.append((node, decorator))
                    break
    return out


def _names_model(node: ast.expr, module: types.ModuleType) -> bool:
    if isinstance(node, ast.Name):
        return vars(module).get(node.id) is model
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return getattr(vars(module).get(node.value.id), node.attr, None) is model
    return False


@dataclass
class _Decorator:
    """Where the decorator and each of its arguments are written (for errors)."""

    line: int
    name_line: int
    lines: dict[str, int]

    @classmethod
    def of(cls, call: ast.expr | None, fallback: int) -> _Decorator:
        if not isinstance(call, ast.Call):
            return cls(fallback, fallback, {})
        name_line = call.args[0].lineno if call.args else call.lineno
        return cls(call.lineno, name_line, {k.arg: k.value.lineno for k in call.keywords if k.arg})

    def at(self, key: str) -> int:
        return self.lines.get(key, self.line)


def _read_model(fn: Callable, call: ast.expr | None, module: types.ModuleType, shown: str, reading: _Reading,
                defaults: ModelDefaults, variables: Mapping[str, Any],
                blueprint: dict[str, str] | None = None) -> Model:
    specs: tuple[ModelSpec, ...] = getattr(fn, MODEL_ATTR)
    where = _Decorator.of(call, fn.__code__.co_firstlineno)
    if len(specs) > 1:
        raise ModelError(f"{fn.__name__} is decorated with @model twice", shown, where.line)
    spec = specs[0]
    if blueprint is not None:  # its values in the name and the other arguments' strings
        spec = ModelSpec(templated(spec.name, blueprint, shown, where.name_line),
                         {k: templated(v, blueprint, shown, where.at(k)) for k, v in spec.properties.items()
                          if k != "blueprints"})
    name = _model_name(spec, shown, where)
    properties = {k: v for k, v in spec.properties.items() if v is not None}
    for key in properties:
        if key in UNSUPPORTED_PYTHON_PROPERTIES:
            raise ModelError(f"@model argument '{key}' is not supported by mesh_dagster yet", shown, where.at(key))
    entries = [Entry(key, where.name_line, [], key="name", value=Value(name, where.name_line, "string"))]
    entries += [_entry(key, value, shown, where.at(key)) for key, value in properties.items()
                if key not in PYTHON_PROPERTIES]
    props, lines, deferred = read_model_properties(entries, shown, where.line, defaults)
    is_sql = properties.get("is_sql", False)
    if not isinstance(is_sql, bool):
        raise ModelError("is_sql is True or False", shown, where.at("is_sql"))
    declared = properties.get("columns")
    props["columns"] = (None if is_sql and declared is None
                        else _columns(declared, props["name"], props["dialect"], shown, where))
    kind = complete_model_properties(props, lines, deferred.get("kind"), FullKind(), shown, where.line, defaults,
                                     reading.own)
    if not (kind.has_query if is_sql else kind.allows_python):
        raise ModelError(f"Python models cannot be {kind.name.value} models: use FULL or an incremental kind (or "
                         "write the model in SQL)", shown, where.at("kind"))
    lines.update({key: where.at(key) for key in PYTHON_PROPERTIES if key in properties})
    if is_sql:
        props.update(is_sql_query(fn, props["name"], shown, props["dialect"], variables, blueprint or {},
                                  reading.macros))
    else:
        code, def_line = _code(fn, module, reading, shown, variables, blueprint or {})
        code = code.model_copy(update={"reads": _checked_reads(code, props.get("depends_on", []), props["name"])})
        props.update(query=None, python=code, query_line=def_line)
    props.update(
        pre_statements=_statements(properties.get("pre_statements"), "pre_statements", shown, where),
        post_statements=_statements(properties.get("post_statements"), "post_statements", shown, where),
        property_lines=lines,
        blueprint_variables=blueprint or {},
    )
    return Model(**props)


def _model_name(spec: ModelSpec, shown: str, where: _Decorator) -> str:
    if not isinstance(spec.name, str):
        problem = "must be a string" if spec.name is not None else "is missing"
        raise ModelError(f"The model's name {problem}: write @model(\"schema.name\", columns={{...}}, ...)",
                         shown, where.name_line)
    return spec.name


def _code(fn: Callable, module: types.ModuleType, reading: _Reading, shown: str, variables: Mapping[str, Any],
          blueprint: Mapping[str, str]) -> tuple[PythonCode, int]:
    """The stored code of a model function, its signature checked; and the line of its `def`.
    Parameters named like a blueprint variable receive its value (those are no config variables)."""
    context = context_parameter(fn)
    builder = EnvBuilder(reading.first, (model, macro), context=context or CONTEXT_KEYWORD, others=reading.others)
    node = builder.add_function(fn, module)
    parameters = _check_signature(fn, shown, node.lineno, {**variables, **blueprint})
    parameters = {name for name in parameters if name in variables and name not in blueprint}
    misuse = context_misuse(node, context) if context is not None else None
    if misuse is not None:
        raise ModelError(misuse[0], shown, misuse[1])
    code = PythonCode(entrypoint=fn.__name__, env=builder.env, reads=builder.reads, dynamic_reads=builder.dynamic_reads,
                      variables=sorted(builder.variables | parameters), all_variables=builder.all_variables,
                      uncaptured=builder.uncaptured)
    return code, node.lineno


def _check_signature(fn: Callable, shown: str, line: int, variables: Mapping[str, Any]) -> set[str]:
    """The config variables the parameters take; a function that cannot be called is refused now."""
    params = list(inspect.signature(fn).parameters.values())
    context = context_parameter(fn)
    if context is None and not any(p.kind == p.VAR_KEYWORD for p in params):
        raise ModelError(f"{fn.__name__}() must take the execution context, as its first parameter or in its "
                         f"keyword arguments: def {fn.__name__}(context, start, end, execution_time, **kwargs)",
                         shown, line)
    taken: set[str] = set()
    for param in params[0 if context is None else 1:]:
        if param.kind == param.POSITIONAL_ONLY and param.default is param.empty:
            raise ModelError(f"{fn.__name__}() parameter '{param.name}' is positional-only: it cannot be given",
                             shown, line)
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY) or param.name in RUNTIME_ARGUMENTS:
            continue
        key = param.name.lower()
        if key in variables:
            taken.add(key)
        elif param.default is param.empty:
            raise ModelError(f"{fn.__name__}() parameter '{param.name}' has no default and no config variable "
                             f"'{key}' is defined (parameters other than context, start, end and execution_time "
                             "receive the config variable of their name)", shown, line)
    return taken


def _columns(value: Any, name: str, dialect: str, shown: str, where: _Decorator) -> dict[str, str]:
    """`columns={"id": "int", ...}`: required, because the table is created before the function runs."""
    if value is None:
        raise ModelError(f"Python model {name} needs columns={{\"column\": \"type\", ...}}: its table is created "
                         "before its function first runs", shown, where.line)
    line = where.at("columns")
    if not isinstance(value, Mapping) or not value:
        raise ModelError("columns is written columns={\"column\": \"type\", ...} (at least one column)", shown, line)
    columns: dict[str, str] = {}
    for column, type_text in value.items():
        key = read_column(str(column), shown, line)
        if key in columns:
            raise ModelError(f"Column '{key}' is declared twice", shown, line)
        if not isinstance(type_text, str):
            raise ModelError(f"The type of column '{key}' must be a string such as \"int\"", shown, line)
        try:
            columns[key] = to_spark_type(type_text, dialect)
        except ValueError as e:
            raise ModelError(f"Invalid type for column '{key}': {e}", shown, line) from None
    return columns


def _statements(value: Any, key: str, shown: str, where: _Decorator) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(s, str) and s.strip() for s in items):
        raise ModelError(f"{key} is a list of SQL statements (strings)", shown, where.at(key))
    return [s.strip().rstrip(";") for s in items]


# ---------------------------------------------------------------------------------------------
# Python values as the definition entries the MODEL readers take


def _entry(key: str, value: Any, shown: str, line: int) -> Entry:
    if key == "kind":
        parsed = _kind_value(value, shown, line)
    elif key in ("audits", "signals"):
        parsed = _written_list(key, value, shown, line)
    else:
        parsed = _value(value, key, shown, line)
    return Entry(key, line, [], key=key, value=parsed)


def _value(value: Any, key: str, shown: str, line: int) -> Value:
    if isinstance(value, bool):
        return Value("true" if value else "false", line, "scalar")
    if isinstance(value, Enum):
        return _value(value.value, key, shown, line)
    if isinstance(value, (int, float)):
        return Value(str(value), line, "number")
    if isinstance(value, str):
        return Value(value, line, "string")
    if isinstance(value, (datetime, date)):
        return Value(value.isoformat(), line, "string")
    if isinstance(value, (list, tuple)):
        items = [Entry(_raw(v), line, [], value=_value(v, key, shown, line)) for v in value]
        return Value(repr(value), line, "group", items=items)
    if isinstance(value, Mapping):
        items = [Entry(str(k), line, [], key=str(k), value=_value(v, key, shown, line)) for k, v in value.items()]
        return Value(repr(value), line, "group", items=items)
    raise ModelError(f"@model argument '{key}' cannot be a {type(value).__name__}", shown, line)


def _raw(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value.value if isinstance(value, Enum) else value)


def _kind_value(value: Any, shown: str, line: int) -> Value:
    """`"FULL"`, or `dict(name="INCREMENTAL_BY_TIME_RANGE", time_column="ds", ...)`: the kind's name
    and the properties its class reads, as `kind NAME (property value, ...)` would give them."""
    value = plain_kind(value)  # SQLMesh's kind classes (`IncrementalByTimeRangeKind(...)`) say a dict
    if isinstance(value, (str, Enum)):
        return Value(_raw(value), line, "scalar")
    if isinstance(value, Mapping) and isinstance(value.get("name"), (str, Enum)):
        items = [Entry(str(k), line, [], key=str(k), value=_value(v, str(k), shown, line))
                 for k, v in value.items() if k != "name" and v is not None]
        return Value(repr(dict(value)), line, "call", head=_raw(value["name"]), items=items)
    raise ModelError("kind is a kind name (kind=\"FULL\") or a dict of the name and the kind's properties "
                     "(kind=dict(name=\"INCREMENTAL_BY_TIME_RANGE\", time_column=\"ds\"))", shown, line)


_WRITTEN_EXAMPLES = {"audits": "not_null(columns := (id))", "signals": "files_landed(folder := 'raw')"}


def _written_list(key: str, value: Any, shown: str, line: int) -> Value:
    """`audits=["not_null(columns := (id))", "my_audit"]`, `signals=["files_landed(folder := 'raw')"]`:
    each entry written as in a MODEL block; or, as SQLMesh documents it, a `(name, {argument: value})`
    pair, whose values are Python values (`_argument_sql`: a string is a string literal) or sqlglot
    expressions."""
    items = [value] if isinstance(value, str) or _is_pair(value) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(a, str) or _is_pair(a) for a in items):
        raise ModelError(f"{key} is a list of {key} written as in SQL, e.g. [\"{_WRITTEN_EXAMPLES[key]}\"], "
                         f"or of (name, {{argument: value}}) pairs", shown, line)
    entries = []
    for text in (a if isinstance(a, str) else _pair_sql(key, a, shown, line) for a in items):
        try:
            parsed = read_value(text, shown)
        except ModelError as e:
            raise ModelError(e.message, shown, line) from None
        entries.append(Entry(text, line, [], value=at_line(parsed, line)))
    return Value(repr(items), line, "group", items=entries)


def _is_pair(item: Any) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], Mapping)


def _pair_sql(key: str, pair: tuple[str, Mapping], shown: str, line: int) -> str:
    """`("not_null", {"columns": [to_column("id")]})` as `not_null(columns := (id))`."""
    name, arguments = pair
    written = ", ".join(f"{arg} := {_argument_sql(key, arg, v, shown, line)}" for arg, v in arguments.items())
    return f"{name}({written})" if arguments else name


def _argument_sql(key: str, arg: str, value: Any, shown: str, line: int) -> str:
    """A Python argument value as SQL, as SQLMesh converts it: a sqlglot expression as it is
    (`to_column("id")` names a column), a string as a string literal (`"id"` is the text 'id', not
    a column), numbers and booleans as literals, None as NULL, a list or tuple as a tuple of them."""
    if isinstance(value, exp.Expr):
        return value.sql()
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"  # Spark's escapes
    if isinstance(value, (int, float)) and math.isfinite(value):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_argument_sql(key, arg, v, shown, line) for v in value) + ")"
    raise ModelError(f"{key}: argument '{arg}' cannot be a {type(value).__name__} (write a string, a number, a "
                     "boolean, a sqlglot expression such as to_column('id'), or a list of them)", shown, line)


def _checked_reads(code: PythonCode, depends_on: list[str], name: str) -> list[TableRead]:
    """The dependencies read with `resolve_table`, names checked; with `depends_on` given, each
    read must be one of them (it replaces inference)."""
    reads = []
    for read in code.reads:
        try:
            reads.append(read.model_copy(update={"name": check_model_name(read.name)}))
        except ValueError as e:
            raise ModelError(f"resolve_table: {e}", read.path, read.line) from None
    if depends_on:
        for read in reads:
            if read.name not in depends_on and read.name != name:
                raise ModelError(f"resolve_table('{read.name}') reads a model missing from depends_on "
                                 f"({', '.join(depends_on)}): add it there", read.path, read.line)
    elif code.dynamic_reads:
        path, line = code.dynamic_reads[0]
        raise ModelError("resolve_table is called with a computed name, so the model's dependencies cannot be "
                         "inferred: list the models it reads in depends_on=[...]", path, line)
    return reads
