"""YAML unit tests (`tests/test*.yaml`), read and checked against the project.

The format is SQLMesh's: each top-level key of a file is one test, naming a model, fixture rows
for its upstream models and the rows it must produce. Everything that can be checked without
Spark is checked here — unknown models, inputs that are not upstream of the tested model,
malformed rows — and reported with the file and the line of the offending key, because a test
file is code the user has to fix, not data we may guess around.
"""

from __future__ import annotations

import csv
import fnmatch
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from mesh_dagster.core.config.files import ProjectYamlLoader, load_yaml, outside_project, read_text
from mesh_dagster.core.config.types import to_spark_type
from mesh_dagster.core.errors import UnitTestError
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.time.dates import to_datetime

TEST_KEYS = {"model", "description", "inputs", "outputs", "vars", "schema", "gateway"}
INPUT_KEYS = {"rows", "format", "csv_settings", "path", "columns", "query"}
OUTPUT_KEYS = {"rows", "query", "partial"}
OUTPUTS_KEYS = {"query", "ctes", "partial"}
TIME_VARS = ("start", "end", "execution_time")
CSV_SETTING_KEYS = {"delimiter", "quotechar", "doublequote", "escapechar", "skipinitialspace"}


class TestInput(BaseModel):
    """Fixture data standing in for one upstream model: literal rows or a query."""

    __test__ = False  # not a pytest test class


    model_config = ConfigDict(frozen=True)

    model: str
    rows: list[dict[str, Any]] | None = None
    columns: dict[str, str] = Field(default_factory=dict)  # column -> Spark type, as declared by the test
    query: str | None = None
    line: int = 1


class ExpectedOutput(BaseModel):
    """Rows the model's query (or one of its CTEs) must return: literal rows or a query."""

    model_config = ConfigDict(frozen=True)

    rows: list[dict[str, Any]] | None = None
    query: str | None = None
    partial: bool = False
    line: int = 1


class UnitTest(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    path: str  # relative to the project
    line: int
    model: str
    description: str | None = None
    inputs: dict[str, TestInput] = Field(default_factory=dict)
    query: ExpectedOutput | None = None  # `outputs.query`
    ctes: dict[str, ExpectedOutput] = Field(default_factory=dict)  # `outputs.ctes`
    vars: dict[str, Any] = Field(default_factory=dict)

    @property
    def id(self) -> str:
        """`tests/test_x.yaml::test_name`, the selector users pass to `mesh test`."""
        return f"{self.path}::{self.name}"

    def where(self) -> str:
        return f"{self.path}:{self.line}"


# ---------------------------------------------------------------------------------------------
# Reading files: data plus the YAML nodes, so every key can be traced back to its line.


@dataclass
class _Node:
    """A YAML node with its line, so errors can point at the key that is wrong."""

    node: yaml.Node

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def items(self) -> list[tuple[str, int, _Node]]:
        """(key, line of the key, value) of a mapping node."""
        if not isinstance(self.node, yaml.MappingNode):
            return []
        return [(str(k.value), k.start_mark.line + 1, _Node(v)) for k, v in self.node.value]

    def get(self, key: str) -> _Node | None:
        return next((v for k, _, v in self.items() if k == key), None)

    def key_line(self, key: str) -> int:
        return next((line for k, line, _ in self.items() if k == key), self.line)


@dataclass
class _RawTest:
    name: str
    path: Path
    shown: str
    line: int
    data: Any
    node: _Node


def _read_file(path: Path, shown: str) -> list[_RawTest]:
    text = read_text(path, shown, UnitTestError)
    loader = ProjectYamlLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        context, context_mark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and context_mark is not None and (mark is None or context_mark.line != mark.line):
            problem += f" ({context} started on line {context_mark.line + 1})"
        raise UnitTestError(f"Invalid YAML: {problem}", shown, mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    if root is None:
        return []
    if not isinstance(data, dict):
        raise UnitTestError("A test file must be a mapping of test names to tests", shown, 1)
    node = _Node(root)
    seen: dict[str, int] = {}
    tests = []
    for name, line, value in node.items():
        if name in seen:
            raise UnitTestError(f"Test '{name}' is defined twice (also on line {seen[name]})", shown, line)
        seen[name] = line
        tests.append(_RawTest(name, path, shown, line, data[_original_key(data, name)], value))
    return tests


def _original_key(data: dict, name: str) -> Any:
    """YAML keys may be non-strings (`123:`); nodes give their text, data their value."""
    return next(k for k in data if str(k) == name)


def _test_files(project: Any) -> list[Path]:
    return list(getattr(project, "test_files", []) or [])


# ---------------------------------------------------------------------------------------------
# Selecting tests


def load_tests(project: Any, names: list[str] | None = None, pattern: str | None = None) -> list[UnitTest]:
    """The project's tests, optionally only those selected.

    `names` are `tests/file.yaml::test_name`, a file (`tests/file.yaml`), or a test name; each
    may be a glob. `pattern` keeps tests whose name contains it or matches it as a glob (the
    whole id when the pattern contains `::` or `/`).
    """
    raw: list[_RawTest] = []
    for file in _test_files(project):
        raw += _read_file(file, relative_path(Path(file), Path(project.path)))
    if names:
        selected: list[_RawTest] = []
        for selector in names:
            matched = [t for t in raw if _matches_selector(t, selector, Path(project.path))]
            if not matched:
                raise UnitTestError(f"No unit test matches '{selector}'. "
                                    f"Known tests: {', '.join(f'{t.shown}::{t.name}' for t in raw) or 'none'}")
            selected += [t for t in matched if t not in selected]
        raw = selected
    if pattern:
        raw = [t for t in raw if _matches_pattern(t, pattern)]
    return [_build(t, project) for t in raw]


def _matches_selector(test: _RawTest, selector: str, root: Path) -> bool:
    file_part, sep, name_part = selector.partition("::")
    if not sep:
        if _same_file(test, file_part, root):
            return True
        return fnmatch.fnmatchcase(test.name, selector)
    return _same_file(test, file_part, root) and fnmatch.fnmatchcase(test.name, name_part)


def _same_file(test: _RawTest, selector: str, root: Path) -> bool:
    if fnmatch.fnmatchcase(test.shown, selector):
        return True
    candidate = Path(selector)
    candidate = candidate if candidate.is_absolute() else root / candidate
    try:
        return candidate.resolve() == Path(test.path).resolve()
    except OSError:
        return False


def _matches_pattern(test: _RawTest, pattern: str) -> bool:
    """Substring or glob of the test name; of the whole id when the pattern names a file too."""
    target = f"{test.shown}::{test.name}" if ("::" in pattern or "/" in pattern) else test.name
    return pattern in target or fnmatch.fnmatchcase(target, pattern)


# ---------------------------------------------------------------------------------------------
# Building one test


def normalize_name(name: Any) -> str:
    """Model names as the loader stores them: unquoted, lower case."""
    return ".".join(p.strip("`\"' ") for p in str(name).strip().split(".")).lower()


class _Builder:
    def __init__(self, raw: _RawTest, project: Any):
        self.raw = raw
        self.project = project
        self.path = raw.shown

    def error(self, message: str, line: int | None = None) -> UnitTestError:
        return UnitTestError(f"Test '{self.raw.name}': {message}", self.path, line or self.raw.line)

    def build(self) -> UnitTest:
        body, node = self.raw.data, self.raw.node
        if not isinstance(body, dict):
            raise self.error("expected a mapping with `model`, `inputs` and `outputs`")
        for key, line, _ in node.items():
            if key not in TEST_KEYS:
                raise self.error(f"unknown key '{key}' (expected one of: {', '.join(sorted(TEST_KEYS))})", line)
        if "model" not in body:
            raise self.error("`model` is required")
        model_name = normalize_name(body["model"])
        model_line = node.key_line("model")
        if model_name not in self.project.models:
            raise self.error(f"unknown model '{model_name}'", model_line)
        self.model = self.project.models[model_name]
        self.upstream = self._upstream(model_name)
        description = body.get("description")
        return UnitTest(
            name=self.raw.name,
            path=self.path,
            line=self.raw.line,
            model=model_name,
            description=None if description is None else str(description),
            inputs=self._inputs(body.get("inputs"), node.get("inputs")),
            **self._outputs(body.get("outputs"), node.get("outputs"), node.key_line("outputs")),
            vars=self._vars(body.get("vars"), node.key_line("vars")),
        )

    def _upstream(self, name: str) -> set[str]:
        """Models whose data can reach `name`: every ancestor, and the model itself (self-reference)."""
        seen: set[str] = {name}
        stack = [name]
        while stack:
            for parent in self.project.parents(stack.pop()):
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        return seen

    # -- inputs --------------------------------------------------------------------------------

    def _inputs(self, value: Any, node: _Node | None) -> dict[str, TestInput]:
        if value is None:
            return {}
        if not isinstance(value, dict) or node is None:
            raise self.error("`inputs` must map upstream model names to rows", node.line if node else None)
        out: dict[str, TestInput] = {}
        for key, line, child in node.items():
            spec = value[_original_key(value, key)]
            name = normalize_name(key)
            if name not in self.project.models:
                raise self.error(f"unknown input model '{name}'", line)
            if name not in self.upstream:
                parents = sorted(self.upstream - {self.model.name})
                how = (": a Python model reads the tables its `context.resolve_table(...)` calls name and its "
                       "`depends_on`" if self.model.python is not None else "")
                raise self.error(f"input '{name}' is not upstream of {self.model.name} "
                                 f"(upstream models: {', '.join(parents) or 'none'}{how})", line)
            if name in out:
                raise self.error(f"input '{name}' is given twice", line)
            out[name] = self._input(name, spec, child, line)
        return out

    def _input(self, name: str, spec: Any, node: _Node, line: int) -> TestInput:
        if spec is None:
            return TestInput(model=name, rows=[], line=line)
        if isinstance(spec, list):
            return TestInput(model=name, rows=self._rows(spec, line), line=line)
        if not isinstance(spec, dict):
            raise self.error(f"input '{name}' must be a list of rows or a mapping with `rows` or `query`", line)
        for key, key_line, _ in node.items():
            if key not in INPUT_KEYS:
                raise self.error(f"unknown key '{key}' in input '{name}' "
                                 f"(expected one of: {', '.join(sorted(INPUT_KEYS))})", key_line)
        columns = self._columns(spec.get("columns"), node.key_line("columns"))
        sources = [k for k in ("rows", "query", "path") if spec.get(k) is not None]
        if len(sources) > 1:
            raise self.error(f"input '{name}' has both {' and '.join(f'`{s}`' for s in sources)}: give one", line)
        if "query" in sources:
            query = spec["query"]
            if not isinstance(query, str) or not query.strip():
                raise self.error(f"the query of input '{name}' must be SQL text", node.key_line("query"))
            return TestInput(model=name, query=query, columns=columns, line=line)
        fmt = str(spec.get("format", "yaml")).lower()
        if fmt not in ("yaml", "csv"):
            raise self.error(
                f"unknown format '{fmt}' of input '{name}' (expected yaml or csv)", node.key_line("format")
            )
        settings = self._csv_settings(spec.get("csv_settings"), node.key_line("csv_settings"))
        if "path" in sources:
            rows = self._rows_from_file(spec["path"], fmt, settings, node.key_line("path"))
        else:
            data = spec.get("rows")
            rows_line = node.key_line("rows")
            if fmt == "csv":
                if not isinstance(data, str):
                    raise self.error(
                        f"input '{name}' has `format: csv`: `rows` must be CSV text (`rows: |`)", rows_line
                    )
                rows = parse_csv(data, settings)
            else:
                rows = self._rows(data if data is not None else [], rows_line)
        return TestInput(model=name, rows=rows, columns=columns, line=line)

    def _columns(self, value: Any, line: int) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("`columns` must map column names to types", line)
        out = {}
        for col, type_text in value.items():
            try:
                out[str(col).lower()] = to_spark_type(str(type_text), self.model.dialect)
            except ValueError as e:
                raise self.error(f"column '{col}': {e}", line) from None
        return out

    def _csv_settings(self, value: Any, line: int) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("`csv_settings` must be a mapping", line)
        unknown = sorted(set(map(str, value)) - CSV_SETTING_KEYS)
        if unknown:
            raise self.error(f"unsupported csv_settings {', '.join(unknown)} "
                             f"(supported: {', '.join(sorted(CSV_SETTING_KEYS))})", line)
        return dict(value)

    def _rows_from_file(self, file: Any, fmt: str, settings: dict[str, Any], line: int) -> list[dict[str, Any]]:
        path = Path(str(file))
        path = path if path.is_absolute() else Path(self.project.path) / path
        refusal = outside_project(path, Path(self.project.path), f"fixture file {file}")
        if refusal is not None:
            raise self.error(refusal, line)
        if not path.is_file():
            raise self.error(f"fixture file not found: {file}", line)
        text = read_text(path, str(file), UnitTestError)
        if fmt == "csv" or path.suffix.lower() == ".csv":
            return parse_csv(text, settings)
        try:
            data = load_yaml(text)
        except yaml.YAMLError as e:
            raise self.error(f"fixture file {file} is not valid YAML: {getattr(e, 'problem', e)}", line) from None
        if isinstance(data, dict) and "rows" in data:
            data = data["rows"]
        return self._rows(data, line)

    def _rows(self, value: Any, line: int) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise self.error("`rows` must be a list of mappings (`- column: value`)", line)
        rows = []
        for i, row in enumerate(value, 1):
            if not isinstance(row, dict):
                raise self.error(f"row {i} must be a mapping of column names to values, got {row!r}", line)
            rows.append({str(k).lower(): v for k, v in row.items()})
        return rows

    # -- outputs -------------------------------------------------------------------------------

    def _outputs(self, value: Any, node: _Node | None, line: int) -> dict[str, Any]:
        if value is None:
            raise self.error("`outputs` is required (with `query` and/or `ctes`)")
        if not isinstance(value, dict) or node is None:
            raise self.error("`outputs` must be a mapping with `query` and/or `ctes`", line)
        for key, key_line, _ in node.items():
            if key not in OUTPUTS_KEYS:
                raise self.error(f"unknown key '{key}' in outputs (expected one of: {', '.join(sorted(OUTPUTS_KEYS))})",
                                 key_line)
        partial = self._bool(value.get("partial", False), node.key_line("partial"))
        query = None
        if value.get("query") is not None:
            query = self._expected(value["query"], node.get("query"), node.key_line("query"), partial, "query")
        ctes: dict[str, ExpectedOutput] = {}
        if value.get("ctes") is not None:
            ctes_node = node.get("ctes")
            if not isinstance(value["ctes"], dict) or ctes_node is None:
                raise self.error("`outputs.ctes` must map CTE names to rows", node.key_line("ctes"))
            for cte, cte_line, child in ctes_node.items():
                spec = value["ctes"][_original_key(value["ctes"], cte)]
                ctes[cte.lower()] = self._expected(spec, child, cte_line, partial, f"CTE '{cte}'")
        if query is None and not ctes:
            raise self.error("`outputs` needs `query` or `ctes`", line)
        return {"query": query, "ctes": ctes}

    def _expected(self, spec: Any, node: _Node | None, line: int, partial: bool, what: str) -> ExpectedOutput:
        if isinstance(spec, list):
            return ExpectedOutput(rows=self._rows(spec, line), partial=partial, line=line)
        if not isinstance(spec, dict) or node is None:
            raise self.error(f"expected output of {what} must be a list of rows or a mapping with `rows` or `query`",
                             line)
        for key, key_line, _ in node.items():
            if key not in OUTPUT_KEYS:
                raise self.error(f"unknown key '{key}' in the output of {what} "
                                 f"(expected one of: {', '.join(sorted(OUTPUT_KEYS))})", key_line)
        partial = self._bool(spec.get("partial", partial), node.key_line("partial"))
        if spec.get("query") is not None and spec.get("rows") is not None:
            raise self.error(f"the output of {what} has both `rows` and `query`: give one", line)
        if spec.get("query") is not None:
            if not isinstance(spec["query"], str):
                raise self.error(f"the query of the output of {what} must be SQL text", node.key_line("query"))
            return ExpectedOutput(query=spec["query"], partial=partial, line=line)
        return ExpectedOutput(
            rows=self._rows(spec.get("rows") or [], node.key_line("rows")), partial=partial, line=line
        )

    def _bool(self, value: Any, line: int) -> bool:
        if isinstance(value, bool):
            return value
        raise self.error(f"`partial` must be true or false, got {value!r}", line)

    def _vars(self, value: Any, line: int) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("`vars` must be a mapping", line)
        out = {str(k).lower(): v for k, v in value.items()}
        for key in TIME_VARS:
            if out.get(key) is not None:
                try:
                    to_datetime(out[key])
                except ValueError as e:
                    raise self.error(f"vars.{key}: {e}", line) from None
        return out


def _build(raw: _RawTest, project: Any) -> UnitTest:
    return _Builder(raw, project).build()


def parse_csv(text: str, settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """CSV text (header row first) as rows; empty cells are NULL and numeric columns are numbers.

    Types are inferred per column, the way pandas reads a CSV: a column is integer only if every
    non-empty cell is, so `1` and `1.5` in one column give two floats.
    """
    reader = csv.reader(io.StringIO(text.strip("\n")), **(settings or {}))
    lines = [row for row in reader if row]
    if not lines:
        return []
    header = [h.strip().lower() for h in lines[0]]
    columns = list(zip(*[row + [""] * (len(header) - len(row)) for row in lines[1:]])) or [() for _ in header]
    converted = [_convert_csv_column(list(cells)) for cells in columns]
    return [dict(zip(header, values)) for values in zip(*converted)] if lines[1:] else []


def _convert_csv_column(cells: list[str]) -> list[Any]:
    values = [c if c != "" else None for c in cells]
    present = [v for v in values if v is not None]
    for cast in (int, float):
        try:
            return [None if v is None else cast(v) for v in values] if present else values
        except ValueError:
            continue
    return values
