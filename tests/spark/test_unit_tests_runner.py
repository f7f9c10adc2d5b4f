"""Running YAML unit tests on the shared SparkSession."""

from __future__ import annotations

import textwrap
from datetime import date
from pathlib import Path

import pytest

from mesh_dagster.core.project.project import load_project
from mesh_dagster.scaffold import init_project
from mesh_dagster.testing import run_tests
from mesh_dagster.testing.runner import FIXTURE_PREFIX

pytestmark = pytest.mark.spark

CTE_MODEL = """
MODEL (name sqlmesh_example.cte_model, kind FULL);

WITH recent AS (
  SELECT id, item_id, event_date
  FROM sqlmesh_example.incremental_model
  WHERE event_date >= '2020-01-02'
), per_item AS (
  SELECT item_id, COUNT(*) AS orders FROM recent GROUP BY item_id ORDER BY item_id
)
SELECT item_id, orders, CURRENT_DATE AS run_date, @VAR('region', 'none') AS region
FROM per_item
"""

BROKEN_MODEL = """
MODEL (name sqlmesh_example.broken_model, kind FULL);

SELECT id, no_such_column FROM sqlmesh_example.seed_model
"""

EXTERNAL_MODELS = """
- name: raw.events
  columns:
    id: int
    tags: array<string>
    props: struct<a int, b string>
    attrs: map<string, int>
    ts: timestamp
    amount: decimal(10, 2)
    flag: boolean
"""

EVENTS_MODEL = """
MODEL (name sqlmesh_example.events_model, kind FULL);

SELECT id, tags, props, attrs, ts, amount, flag, SIZE(tags) AS n_tags, props.a AS a
FROM raw.events
"""

TYPES_TEST = """
test_typed_values:
  model: sqlmesh_example.events_model
  inputs:
    raw.events:
      - id: 1
        tags: [x, y]
        props: {a: 1, b: one}
        attrs: {k: 5}
        ts: 2020-01-01 10:30:00
        amount: 12.5
        flag: true
      - {id: 2, tags: []}
  outputs:
    query:
      - {id: 1, tags: [x, y], props: {a: 1, b: one}, attrs: {k: 5}, ts: '2020-01-01 10:30:00', amount: 12.50,
         flag: true, n_tags: 2, a: 1}
      - {id: 2, tags: [], n_tags: 0}

test_typed_values_wrong:
  model: sqlmesh_example.events_model
  inputs:
    raw.events:
      - {id: 1, tags: [x, y], props: {a: 1, b: one}, ts: 2020-01-01 10:30:00}
  outputs:
    partial: true
    query:
      - {id: 1, tags: [x, z], props: {a: 2, b: one}, ts: 2020-01-01 10:30:01}
"""

TESTS = """
test_wrong_output:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1}
      - {id: 2, item_id: 1}
      - {id: 3, item_id: 2}
  outputs:
    query:
      - {item_id: 1, num_orders: 3}
      - {item_id: 2, num_orders: 1}

test_partial:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      rows:
        - {id: 1, item_id: 5, event_date: 2020-01-01}
        - {id: 2, event_date: '2020-01-02'}
  outputs:
    partial: true
    query:
      - {event_date: 2020-01-01, id: 1}
      - {id: 2, event_date: 2020-01-02}

test_missing_values_are_null:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      - {id: 2, event_date: '2020-01-02'}
  outputs:
    query:
      - {id: 2, item_id: null, event_date: '2020-01-02'}

test_interval_from_vars:
  model: sqlmesh_example.incremental_model
  vars: {start: 2020-01-02, end: 2020-01-03}
  inputs:
    sqlmesh_example.seed_model:
      format: csv
      rows: |
        id,item_id,event_date
        1,2,2020-01-01
        2,1,2020-01-02
        3,3,2020-01-03
        4,1,2020-01-04
  outputs:
    query:
      - {id: 2, item_id: 1, event_date: 2020-01-02}
      - {id: 3, item_id: 3, event_date: 2020-01-03}

test_whole_history_without_vars:
  model: sqlmesh_example.incremental_model
  inputs:
    sqlmesh_example.seed_model:
      query: SELECT 1 AS id, 2 AS item_id, DATE '1999-12-31' AS event_date
  outputs:
    query:
      query: SELECT 1 AS id, 2 AS item_id, DATE '1999-12-31' AS event_date

test_ctes:
  model: sqlmesh_example.cte_model
  vars: {execution_time: '2024-05-06 07:00:00', region: eu}
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1, event_date: 2020-01-01}
      - {id: 2, item_id: 1, event_date: 2020-01-02}
      - {id: 3, item_id: 2, event_date: 2020-01-03}
      - {id: 4, item_id: 1, event_date: 2020-01-04}
  outputs:
    ctes:
      recent:
        - {id: 2, item_id: 1, event_date: 2020-01-02}
        - {id: 3, item_id: 2, event_date: 2020-01-03}
        - {id: 4, item_id: 1, event_date: 2020-01-04}
      per_item:
        rows:
          - {item_id: 1, orders: 2}
          - {item_id: 2, orders: 1}
    query:
      - {item_id: 1, orders: 2, run_date: 2024-05-06, region: eu}
      - {item_id: 2, orders: 1, run_date: 2024-05-06, region: eu}

test_ordered_cte_fails_on_order:
  model: sqlmesh_example.cte_model
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 2, item_id: 1, event_date: 2020-01-02}
      - {id: 3, item_id: 2, event_date: 2020-01-03}
  outputs:
    ctes:
      per_item:
        - {item_id: 2, orders: 1}
        - {item_id: 1, orders: 1}

test_unknown_cte:
  model: sqlmesh_example.cte_model
  outputs:
    ctes:
      nope: []

test_sql_error:
  model: sqlmesh_example.broken_model
  inputs:
    sqlmesh_example.seed_model:
      - {id: 1}
  outputs:
    query: []
"""


PY_MODEL = """
import pandas as pd
from mesh_dagster import model


@model("sqlmesh_example.py_totals", kind="FULL", columns={"item_id": "int", "total": "bigint", "region": "string"},
       depends_on=["sqlmesh_example.incremental_model"])
def execute(context, start, end, execution_time, **kwargs):
    rows = context.fetchdf(f"SELECT item_id, COUNT(*) AS n FROM {context.resolve_table('sqlmesh_example.incremental_model')} "
                           "GROUP BY item_id")
    rows["total"] = rows["n"] * 10
    rows["region"] = context.var("region", "none")
    return rows[["item_id", "total", "region"]]
"""

PY_TESTS = """
test_py_totals:
  model: sqlmesh_example.py_totals
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1, event_date: 2020-01-01}
      - {id: 2, item_id: 1, event_date: 2020-01-02}
      - {id: 3, item_id: 2, event_date: 2020-01-02}
  outputs:
    query:
      - {item_id: 1, total: 20, region: eu}
      - {item_id: 2, total: 10, region: eu}
  vars:
    region: eu

test_py_totals_wrong:
  model: sqlmesh_example.py_totals
  inputs:
    sqlmesh_example.incremental_model:
      - {id: 1, item_id: 1, event_date: 2020-01-01}
  outputs:
    query:
      - {item_id: 1, total: 99, region: none}

test_py_totals_empty_input:
  model: sqlmesh_example.py_totals
  outputs:
    query: []
"""


@pytest.fixture(scope="module")
def project_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unit_tests_project")
    init_project(root, today=date(2025, 6, 22))
    (root / "models" / "cte_model.sql").write_text(CTE_MODEL.lstrip())
    (root / "models" / "broken_model.sql").write_text(BROKEN_MODEL.lstrip())
    (root / "tests" / "test_more.yaml").write_text(textwrap.dedent(TESTS).lstrip())
    (root / "external_models.yaml").write_text(EXTERNAL_MODELS.lstrip())
    (root / "models" / "events_model.sql").write_text(EVENTS_MODEL.lstrip())
    (root / "tests" / "test_types.yaml").write_text(TYPES_TEST.lstrip())
    (root / "models" / "py_totals.py").write_text(PY_MODEL.lstrip())
    (root / "tests" / "test_py.yaml").write_text(PY_TESTS.lstrip())
    return root


@pytest.fixture(scope="module")
def project(project_dir: Path):
    return load_project(project_dir)


def run_one(project, engine, name: str):
    report = run_tests(project, lambda: engine, names=[name])
    assert report.total == 1
    return report.results[0]


def test_scaffold_test_passes(project, engine) -> None:
    report = run_tests(project, lambda: engine, names=["tests/test_full_model.yaml"])
    assert [(r.name, r.passed, r.message) for r in report.results] == [("test_example_full_model", True, "")]
    assert report.ok and report.passed == 1 and report.failed == 0 and report.total == 1
    assert report.seconds >= report.results[0].seconds > 0


def test_wrong_expected_output_fails_with_readable_diff(project, engine) -> None:
    result = run_one(project, engine, "test_wrong_output")
    assert not result.passed
    assert result.path == "tests/test_more.yaml"
    lines = result.message.splitlines()
    assert lines[0] == "sqlmesh_example.full_model (query, tests/test_more.yaml:9):"
    assert lines[1] == "Data mismatch (2 expected rows, 2 actual rows):"
    assert "  row (item_id=1): num_orders: expected 3, actual 2" in lines
    assert lines[lines.index("Actual:") + 1:] == ["  item_id  num_orders", "  1        2", "  2        1"]


def test_partial_output(project, engine) -> None:
    result = run_one(project, engine, "test_partial")
    assert result.passed, result.message


def test_missing_input_and_output_values_are_null(project, engine) -> None:
    result = run_one(project, engine, "test_missing_values_are_null")
    assert result.passed, result.message


def test_vars_start_end_filter_incremental_model(project, engine) -> None:
    result = run_one(project, engine, "test_interval_from_vars")
    assert result.passed, result.message


def test_default_interval_is_whole_history_and_queries_work(project, engine) -> None:
    result = run_one(project, engine, "test_whole_history_without_vars")
    assert result.passed, result.message


def test_ctes_execution_time_and_variables(project, engine) -> None:
    result = run_one(project, engine, "test_ctes")
    assert result.passed, result.message


def test_cte_with_order_by_compares_in_order(project, engine) -> None:
    result = run_one(project, engine, "test_ordered_cte_fails_on_order")
    assert not result.passed
    assert result.message.splitlines()[0] == "sqlmesh_example.cte_model (CTE 'per_item', tests/test_more.yaml:92):"
    assert "  row 1: item_id: expected 2, actual 1" in result.message.splitlines()


def test_unknown_cte_is_a_failure(project, engine) -> None:
    result = run_one(project, engine, "test_unknown_cte")
    assert not result.passed
    assert "Model sqlmesh_example.cte_model has no top-level CTE named 'nope' (CTEs: recent, per_item)" in result.message
    # no rows were given for the upstream model: it was an empty view, and the failure says so
    assert "(no input rows were given for sqlmesh_example.incremental_model: they were treated as empty)" \
        in result.message


def test_nested_and_typed_values_of_an_external_model(project, engine) -> None:
    result = run_one(project, engine, "test_typed_values")
    assert result.passed, result.message
    wrong = run_one(project, engine, "test_typed_values_wrong")
    assert not wrong.passed
    assert ("  row (id=1): tags: expected ('x', 'z'), actual ('x', 'y'); props: expected (('a', 2), ('b', 'one')), "
            "actual (('a', 1), ('b', 'one')); ts: expected 2020-01-01 10:30:01, actual 2020-01-01 10:30:00"
            ) in wrong.message.splitlines()


def test_sql_error_is_a_failed_test_not_a_crash(project, engine) -> None:
    report = run_tests(project, lambda: engine, names=["test_sql_error", "tests/test_full_model.yaml"])
    assert [(r.name, r.passed) for r in report.results] == [("test_sql_error", False),
                                                            ("test_example_full_model", True)]
    assert "no_such_column" in report.results[0].message
    assert not report.ok and report.failed == 1 and report.passed == 1


def test_nothing_is_written_to_the_warehouse(project, engine) -> None:
    databases = set(engine.session.fetchall("SHOW DATABASES"))
    tables = set(engine.session.fetchall("SHOW TABLES"))
    report = run_tests(project, lambda: engine, names=["test_example_full_model", "test_ctes", "test_sql_error"])
    assert (report.total, report.passed) == (3, 2)
    assert set(engine.session.fetchall("SHOW DATABASES")) == databases
    assert set(engine.session.fetchall("SHOW TABLES")) == tables  # temporary views included
    assert not [t for t in tables if str(t[1]).startswith(FIXTURE_PREFIX)]
    assert ("sqlmesh_example",) not in databases


def test_a_python_model_is_tested_on_its_input_rows(project, engine) -> None:
    """As in SQLMesh: the function runs on the test's inputs (resolve_table answers the fixture),
    its output is compared with the expected rows; a dependency not given is empty."""
    result = run_one(project, engine, "test_py_totals")
    assert result.passed, result.message
    wrong = run_one(project, engine, "test_py_totals_wrong")
    assert not wrong.passed and "total" in wrong.message and "99" in wrong.message
    assert run_one(project, engine, "test_py_totals_empty_input").passed
