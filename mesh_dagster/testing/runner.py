"""Running YAML unit tests on Spark.

A test never touches the warehouse: each input becomes a session-scoped temporary view, the
model's query is rendered with its upstream models pointing at those views, and the result is
fetched and compared in Python. Upstream models the test gives no rows for are empty views of
their known columns, so a query can never fall through to real tables. Views are dropped when
the test ends, pass or fail.

Tests run on the project's own engine — Spark SQL is what runs in production, so it is what the
tests exercise (SQLMesh runs them on DuckDB, transpiled).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from mesh_dagster.core.errors import MeshError, UnitTestError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.sql.renderer import RenderContext, render_query
from mesh_dagster.core.time.dates import EPOCH, ms_to_datetime, now, to_datetime, to_end_ms
from mesh_dagster.execution.evaluate.python_evaluation import inclusive_interval, python_query
from mesh_dagster.execution.ports import Engine
from mesh_dagster.testing.comparison import Table, compare
from mesh_dagster.testing.definition import ExpectedOutput, TestInput, UnitTest, load_tests, normalize_name
from mesh_dagster.testing.fixtures import fixture_columns, fixture_select, quote

SPARK = "spark"
RUNTIME_STAGE = "testing"
FIXTURE_PREFIX = "mesh_test_"


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    name: str
    path: str
    passed: bool
    message: str = ""
    seconds: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass
class TestReport:
    __test__ = False  # not a pytest test class

    results: list[TestResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.passed)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.passed)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> bool:
        return self.failed == 0


def run_tests(project: Any, engine: Callable[[], Engine], names: list[str] | None = None,
              pattern: str | None = None) -> TestReport:
    """Load the selected tests (malformed ones raise `UnitTestError`) and run each on `engine()`.

    The engine is asked for only once the tests are known to be good: a typo in a test name or
    file is reported before Spark starts.
    """
    tests = load_tests(project, names, pattern)
    report = TestReport()
    started = time.perf_counter()
    for test in tests:
        report.results.append(run_test(project, engine(), test))
    report.seconds = time.perf_counter() - started
    return report


def run_test(project: Any, engine: Engine, test: UnitTest) -> TestResult:
    """One test; any failure — wrong data, invalid SQL, a Spark error — is a failed result."""
    started = time.perf_counter()
    run = _TestRun(project, engine, test)
    try:
        failures = run.execute()
        message = "\n".join(failures)
        passed = not failures
    except MeshError as e:
        passed, message = False, str(e)
    except Exception as e:  # noqa: BLE001 - a broken test must not stop the others
        passed, message = False, f"{type(e).__name__}: {e}"
    finally:
        run.cleanup()
    if not passed and run.empty_inputs:
        message += (f"\n(no input rows were given for {', '.join(sorted(run.empty_inputs))}: "
                    "they were treated as empty)")
    return TestResult(test.name, test.path, passed, message, time.perf_counter() - started)


class _TestRun:
    def __init__(self, project: Any, engine: Engine, test: UnitTest):
        self.project = project
        self.engine = engine
        self.test = test
        self.model: Model = project.models[test.model]
        self.token = uuid.uuid4().hex[:10]
        self.views: list[str] = []
        self.mapping: dict[str, str] = {}  # model name -> fixture view
        self.schemas: dict[str, dict[str, str | None]] = {}
        self.empty_inputs: set[str] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    def execute(self) -> list[str]:
        if self.model.python is not None:
            return self._execute_python()
        if self.model.query is None:
            raise UnitTestError(f"Model {self.model.name} has no query to test ({self.model.kind.name.value} model)",
                                self.test.path, self.test.line)
        start, end, execution_time = self._interval()
        for name, given in self.test.inputs.items():
            self._create_fixture(name, given)
        ctx = self._context(start, end, execution_time, mapped=False)
        macros = self.project.repo_of(self.model.name).macros
        for name in self._unmapped_references(render_query(self.model, ctx, macros)):
            self._create_empty_fixture(name)
        tree = render_query(self.model, self._context(start, end, execution_time, mapped=True), macros)
        if "execution_time" in self.test.vars:
            tree = _freeze_now(tree, execution_time)
        failures: list[str] = []
        if self.test.query is not None:
            failures += self._check("query", tree, self.test.query)
        for cte, expected in self.test.ctes.items():
            failures += self._check(f"CTE '{cte}'", _cte_query(tree, cte, self.model), expected)
        return failures

    def _execute_python(self) -> list[str]:
        """A Python model is tested as SQLMesh tests it: its function runs on the test's input rows
        (each dependency's `resolve_table` answers a fixture view; an input not given is empty), and
        what it returns is compared with the expected rows."""
        if self.test.ctes:
            raise UnitTestError(f"Test '{self.test.name}': {self.model.name} is a Python model, it has no CTEs to "
                                "test", self.test.path, self.test.line)
        start, end, execution_time = self._interval()
        for name, given in self.test.inputs.items():
            self._create_fixture(name, given)
        for name in self.project.parents(self.model.name):
            if name not in self.mapping:
                self._create_empty_fixture(name)
        low, high = inclusive_interval(start, end)
        with python_query(cast(Any, self.engine), self.model, dict(self.mapping), self._variables(), low, high,
                          execution_time, self.project.path) as sql:
            if self.test.query is None:
                return []
            return self._check("query", cast(exp.Query, sqlglot.parse_one(sql, read=SPARK)), self.test.query)

    def cleanup(self) -> None:
        for view in reversed(self.views):
            try:
                self.engine.session.execute(f"DROP VIEW IF EXISTS {quote(view)}")
            except Exception:  # noqa: BLE001 - temporary views die with the session anyway
                pass
        self.views.clear()

    # -- rendering -----------------------------------------------------------------------------

    def _interval(self) -> tuple[datetime, datetime, datetime]:
        """Without `vars.start`/`end` the whole history: 1970-01-01 up to the execution time."""
        variables = self.test.vars
        execution_time = (
            to_datetime(variables["execution_time"]) if variables.get("execution_time") is not None else now()
        )
        start = to_datetime(variables["start"]) if variables.get("start") is not None else EPOCH
        end = ms_to_datetime(to_end_ms(variables["end"])) if variables.get("end") is not None else execution_time
        if end <= start:
            raise UnitTestError(
                f"Test '{self.test.name}': vars.end must be after vars.start", self.test.path, self.test.line
            )
        return start, end, execution_time

    def _context(self, start: datetime, end: datetime, execution_time: datetime, mapped: bool) -> RenderContext:
        embedded = {name: m for name, m in self.project.models.items()
                    if m.kind.is_inlined and name not in self.mapping}
        return RenderContext(
            start=start,
            end=end,
            execution_time=execution_time,
            runtime_stage=RUNTIME_STAGE,
            table_mapping=dict(self.mapping) if mapped else {},
            this_model=self.mapping.get(self.model.name, self.model.name) if mapped else self.model.name,
            variables=self._variables(),
            schemas=dict(self.schemas),
            embedded=embedded,
            gateway=getattr(self.project, "gateway", None),
        )

    def _variables(self) -> dict[str, Any]:
        """The project's variables with the test's `vars` (but its interval bounds) over them."""
        return {**self.project.repo_of(self.model.name).variables,
                **{k: v for k, v in self.test.vars.items() if k not in ("start", "end", "execution_time")}}

    def _unmapped_references(self, tree: exp.Expr) -> list[str]:
        """Project models the query reads for which the test gave no input."""
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        names: list[str] = []
        for table in tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                continue
            key = ".".join(p.name for p in table.parts).lower()
            if table.args.get("db") is None and key in ctes:
                continue
            if key in self.project.models and key not in self.mapping and key not in names:
                names.append(key)
        return names

    # -- fixtures ------------------------------------------------------------------------------

    def _new_view(self, name: str) -> str:
        view = f"{FIXTURE_PREFIX}{self.token}_{len(self.views)}"
        self.views.append(view)
        self.mapping[name] = view
        return view

    def _known_columns(self, name: str) -> dict[str, str | None] | None:
        try:
            return self.project.columns(name)
        except MeshError:
            return None

    def _create_fixture(self, name: str, given: TestInput) -> None:
        if given.query is not None:
            sql = _rewrite_tables(given.query, self.model.dialect, self.mapping)
            view = self._new_view(name)
            self.engine.session.execute(f"CREATE OR REPLACE TEMPORARY VIEW {quote(view)} AS {sql}")
            return
        rows = given.rows or []
        columns = fixture_columns(rows, given.columns, self._known_columns(name))
        if not columns:
            raise UnitTestError(f"Test '{self.test.name}': input '{name}' has no rows and its columns are unknown; "
                                "declare them with `columns:`", self.test.path, given.line)
        view = self._new_view(name)
        self.schemas[name] = dict(columns)
        select = fixture_select(rows, columns)
        self.engine.session.execute(f"CREATE OR REPLACE TEMPORARY VIEW {quote(view)} AS {select}")

    def _create_empty_fixture(self, name: str) -> None:
        known = self._known_columns(name)
        if not known:
            raise UnitTestError(f"Test '{self.test.name}': {self.test.model} reads {name}, whose columns are unknown; "
                                f"give rows for it under `inputs`", self.test.path, self.test.line)
        columns = fixture_columns([], {}, known)
        view = self._new_view(name)
        self.schemas[name] = dict(columns)
        self.empty_inputs.add(name)
        self.engine.session.execute(f"CREATE OR REPLACE TEMPORARY VIEW {quote(view)} AS {fixture_select([], columns)}")

    # -- checking ------------------------------------------------------------------------------

    def _check(self, what: str, query: exp.Query, expected: ExpectedOutput) -> list[str]:
        actual = Table.from_frame(self.engine.session.fetchdf(query.sql(dialect=SPARK)))
        if expected.query is not None:
            sql = _rewrite_tables(expected.query, self.model.dialect, self.mapping)
            wanted = Table.from_frame(self.engine.session.fetchdf(sql))
        else:
            wanted = Table.from_records(expected.rows or [])
        result = compare(wanted, actual, partial=expected.partial, ordered=_is_ordered(query))
        if result.ok:
            return []
        return [f"{self.model.name} ({what}, {self.test.path}:{expected.line}):\n{result.message}"]


def _is_ordered(query: exp.Expr) -> bool:
    return query.args.get("order") is not None


def _cte_query(tree: exp.Query, name: str, model: Model) -> exp.Query:
    """`WITH <the query's CTEs> SELECT * FROM name`: one top-level CTE's rows."""
    with_ = tree.args.get("with_")
    ctes = list(with_.expressions) if with_ is not None else []
    names = [cte.alias_or_name.lower() for cte in ctes]
    if name not in names:
        raise UnitTestError(f"Model {model.name} has no top-level CTE named '{name}' "
                            f"(CTEs: {', '.join(names) or 'none'})", model.path, model.query_line)
    select = exp.select("*").from_(exp.to_table(quote(ctes[names.index(name)].alias_or_name), dialect=SPARK))
    assert with_ is not None  # it holds the CTE found above
    select.set("with_", with_.copy())
    inner = ctes[names.index(name)].this
    if inner.args.get("order") is not None:
        select.set("order", inner.args["order"].copy())
    return select


def _rewrite_tables(sql: str, dialect: str, mapping: dict[str, str]) -> str:
    """A test-written query in Spark SQL, reading fixture views instead of model tables."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError as e:
        raise UnitTestError(f"Cannot parse the test's query: {str(e).splitlines()[0]}") from None
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            continue
        key = normalize_name(".".join(p.name for p in table.parts))
        if key in mapping:
            alias = table.alias or table.name
            table.replace(exp.Table(this=exp.to_identifier(mapping[key]),
                                    alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return tree.sql(dialect=SPARK)


def _freeze_now(tree: exp.Query, moment: datetime) -> exp.Query:
    """`vars.execution_time` also fixes CURRENT_DATE / CURRENT_TIMESTAMP / NOW()."""
    moment = moment.astimezone(UTC).replace(tzinfo=None)

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.CurrentDate):
            return exp.cast(exp.Literal.string(moment.date().isoformat()), "DATE")
        if isinstance(node, exp.CurrentTimestamp) or (
                isinstance(node, exp.Anonymous) and str(node.this).lower() in ("now", "localtimestamp")):
            return exp.cast(exp.Literal.string(moment.isoformat(sep=" ")), "TIMESTAMP")
        return node

    return cast(exp.Query, tree.transform(replace))  # the root is a query, never replaced
