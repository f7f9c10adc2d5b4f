"""Loading YAML unit tests: the format, selection, and every malformed-file error (no Spark)."""

from __future__ import annotations

import textwrap
from datetime import date
from pathlib import Path

import pytest

from mesh_dagster.core.errors import UnitTestError
from mesh_dagster.core.project.project import load_project
from mesh_dagster.scaffold import init_project
from mesh_dagster.testing import load_tests
from mesh_dagster.testing.definition import parse_csv

INCREMENTAL = "sqlmesh_example.incremental_model"
FULL = "sqlmesh_example.full_model"


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    init_project(tmp_path, today=date(2025, 6, 22))
    return tmp_path


def write_test(project_dir: Path, text: str, name: str = "test_extra.yaml") -> Path:
    path = project_dir / "tests" / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(project_dir: Path, **kw):
    return load_tests(load_project(project_dir), **kw)


def load_error(project_dir: Path, text: str) -> UnitTestError:
    write_test(project_dir, text)
    with pytest.raises(UnitTestError) as info:
        load(project_dir)
    return info.value


def test_scaffold_test_is_loaded(project_dir: Path) -> None:
    (test,) = load(project_dir)
    assert test.name == "test_example_full_model"
    assert test.id == "tests/test_full_model.yaml::test_example_full_model"
    assert test.model == FULL
    assert test.line == 1
    assert list(test.inputs) == [INCREMENTAL]
    assert test.inputs[INCREMENTAL].rows == [{"id": 1, "item_id": 1}, {"id": 2, "item_id": 1}, {"id": 3, "item_id": 2}]
    assert test.query is not None and not test.query.partial
    assert test.query.rows == [{"item_id": 1, "num_orders": 2}, {"item_id": 2, "num_orders": 1}]
    assert test.ctes == {}


def test_every_input_and_output_shape(project_dir: Path) -> None:
    write_test(project_dir, """
        test_shapes:
          model: sqlmesh_example.full_model
          description: all the shapes
          inputs:
            "SQLMESH_EXAMPLE.Incremental_Model":
              columns: {id: integer, item_id: bigint, event_date: date}
              format: csv
              csv_settings: {delimiter: ";"}
              rows: |
                id;item_id;event_date
                1;2;2020-01-01
                2;;2020-01-02
          outputs:
            partial: true
            query:
              partial: false
              query: SELECT 1 AS item_id
            ctes:
              Counted: [{item_id: 2, N: 1}]
          vars: {START: 2020-01-01, end: '2020-01-02', Execution_Time: '2020-01-03 00:00:00', Region: eu}
        test_bare_list_and_query:
          model: sqlmesh_example.incremental_model
          inputs:
            sqlmesh_example.seed_model:
              - {ID: 1, item_id: 2, event_date: 2020-01-01}
              - {id: 2}
          outputs:
            query: [{id: 1}]
        test_query_input:
          model: sqlmesh_example.incremental_model
          inputs:
            sqlmesh_example.seed_model:
              query: SELECT 1 AS id, 2 AS item_id, DATE '2020-01-01' AS event_date
          outputs:
            query:
              rows: []
    """)
    tests = {t.name: t for t in load(project_dir, names=["tests/test_extra.yaml"])}
    shapes = tests["test_shapes"]
    assert shapes.description == "all the shapes"
    given = shapes.inputs[INCREMENTAL]
    assert given.columns == {"id": "INT", "item_id": "BIGINT", "event_date": "DATE"}
    assert given.rows == [{"id": 1, "item_id": 2, "event_date": "2020-01-01"},
                          {"id": 2, "item_id": None, "event_date": "2020-01-02"}]
    assert shapes.query is not None
    assert shapes.query.query == "SELECT 1 AS item_id" and shapes.query.partial is False
    assert shapes.ctes["counted"].partial is True
    assert shapes.ctes["counted"].rows == [{"item_id": 2, "n": 1}]
    assert shapes.vars == {"start": date(2020, 1, 1), "end": "2020-01-02", "execution_time": "2020-01-03 00:00:00",
                           "region": "eu"}

    bare = tests["test_bare_list_and_query"]
    assert bare.inputs["sqlmesh_example.seed_model"].rows == [
        {"id": 1, "item_id": 2, "event_date": date(2020, 1, 1)}, {"id": 2}]
    assert bare.query is not None and bare.query.rows == [{"id": 1}]
    assert tests["test_query_input"].inputs["sqlmesh_example.seed_model"].query.startswith("SELECT 1 AS id")
    assert tests["test_query_input"].query.rows == []


def test_parse_csv_infers_column_types_like_pandas() -> None:
    rows = parse_csv("a,b,c,d\n1,1.5,x,\n2,2,,\n")
    assert rows == [{"a": 1, "b": 1.5, "c": "x", "d": None}, {"a": 2, "b": 2.0, "c": None, "d": None}]
    assert isinstance(rows[1]["b"], float)
    assert parse_csv("a,b\n") == []
    assert parse_csv("") == []


def test_selection_by_id_name_file_glob_and_pattern(project_dir: Path) -> None:
    write_test(project_dir, """
        test_one:
          model: sqlmesh_example.full_model
          outputs: {query: []}
        test_two:
          model: sqlmesh_example.full_model
          outputs: {query: []}
        other_check:
          model: sqlmesh_example.full_model
          outputs: {query: []}
    """)
    names = lambda **kw: [t.name for t in load(project_dir, **kw)]  # noqa: E731
    assert names() == ["test_one", "test_two", "other_check", "test_example_full_model"]  # files sorted
    assert names(names=["tests/test_extra.yaml::test_two"]) == ["test_two"]
    assert names(names=["test_one"]) == ["test_one"]
    assert names(names=[str(project_dir / "tests" / "test_full_model.yaml")]) == ["test_example_full_model"]
    assert names(names=["tests/test_extra.yaml::test_*"]) == ["test_one", "test_two"]
    assert names(names=["test_one", "test_one"]) == ["test_one"]
    assert sorted(names(pattern="test_")) == ["test_example_full_model", "test_one", "test_two"]
    assert names(pattern="*check") == ["other_check"]
    assert names(pattern="tests/test_extra.yaml::*t*o*") == ["test_one", "test_two"]
    assert names(pattern="extra.yaml::test_t") == ["test_two"]
    assert names(pattern="nothing") == []


def test_unknown_selector_lists_known_tests(project_dir: Path) -> None:
    with pytest.raises(UnitTestError) as info:
        load(project_dir, names=["tests/test_full_model.yaml::nope"])
    assert "No unit test matches 'tests/test_full_model.yaml::nope'" in str(info.value)
    assert "tests/test_full_model.yaml::test_example_full_model" in str(info.value)


def test_malformed_yaml_names_file_and_line(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_a:
          model: sqlmesh_example.full_model
          outputs:
            query: [{item_id: 1}
    """)
    assert error.path == "tests/test_extra.yaml"
    assert error.line == 5
    assert error.message == ("Invalid YAML: expected ',' or ']', but got '<stream end>' "
                             "(while parsing a flow sequence started on line 4)")


def test_yaml_syntax_error_line(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_a:
          model: sqlmesh_example.full_model
          outputs: query: []
    """)
    assert str(error) == "tests/test_extra.yaml:3: Invalid YAML: mapping values are not allowed here"


def test_file_must_be_a_mapping(project_dir: Path) -> None:
    error = load_error(project_dir, "- just\n- a list\n")
    assert str(error) == "tests/test_extra.yaml:1: A test file must be a mapping of test names to tests"


def test_empty_file_has_no_tests(project_dir: Path) -> None:
    write_test(project_dir, "# nothing yet\n")
    assert [t.name for t in load(project_dir)] == ["test_example_full_model"]


def test_unknown_model_points_at_model_key(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_ok:
          model: sqlmesh_example.full_model
          outputs: {query: []}
        test_bad:
          description: x
          model: sqlmesh_example.missing
          outputs: {query: []}
    """)
    assert str(error) == "tests/test_extra.yaml:6: Test 'test_bad': unknown model 'sqlmesh_example.missing'"


def test_unknown_input_model_points_at_its_key(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_bad:
          model: sqlmesh_example.full_model
          inputs:
            sqlmesh_example.incremental_model: []
            sqlmesh_example.nope:
              - {id: 1}
          outputs: {query: []}
    """)
    assert str(error) == "tests/test_extra.yaml:5: Test 'test_bad': unknown input model 'sqlmesh_example.nope'"


def test_input_that_is_not_upstream(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_bad:
          model: sqlmesh_example.incremental_model
          inputs:
            sqlmesh_example.full_model: [{item_id: 1}]
          outputs: {query: []}
    """)
    assert error.line == 4
    assert ("input 'sqlmesh_example.full_model' is not upstream of sqlmesh_example.incremental_model "
            "(upstream models: sqlmesh_example.seed_model)") in error.message


def test_upstream_includes_grandparents(project_dir: Path) -> None:
    write_test(project_dir, """
        test_grandparent:
          model: sqlmesh_example.full_model
          inputs:
            sqlmesh_example.seed_model: [{id: 1}]
          outputs: {query: []}
    """)
    assert "sqlmesh_example.seed_model" in load(project_dir, names=["test_grandparent"])[0].inputs


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("  model: sqlmesh_example.full_model\n  output: {query: []}\n", 3,
         "unknown key 'output' (expected one of: description, gateway, inputs, model, outputs, schema, vars)"),
        ("  outputs: {query: []}\n", 1, "`model` is required"),
        ("  model: sqlmesh_example.full_model\n", 1, "`outputs` is required (with `query` and/or `ctes`)"),
        ("  model: sqlmesh_example.full_model\n  outputs: {partial: true}\n", 3, "`outputs` needs `query` or `ctes`"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: [], cte: {}}\n", 3,
         "unknown key 'cte' in outputs (expected one of: ctes, partial, query)"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: {rows: [], partial: yes please}}\n", 3,
         "`partial` must be true or false, got 'yes please'"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: {rows: [], query: SELECT 1}}\n", 3,
         "the output of query has both `rows` and `query`: give one"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: [1, 2]}\n", 3,
         "row 1 must be a mapping of column names to values, got 1"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: 3}\n", 3,
         "expected output of query must be a list of rows or a mapping with `rows` or `query`"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      columns: {id: notatype}\n  outputs: {query: []}\n", 5, "column 'id': unknown type 'notatype'"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      rows: []\n      query: SELECT 1\n  outputs: {query: []}\n", 4,
         "input 'sqlmesh_example.incremental_model' has both `rows` and `query`: give one"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      format: csv\n      rows: [{id: 1}]\n  outputs: {query: []}\n", 6,
         "input 'sqlmesh_example.incremental_model' has `format: csv`: `rows` must be CSV text (`rows: |`)"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      format: parquet\n      rows: []\n  outputs: {query: []}\n", 5,
         "unknown format 'parquet' of input 'sqlmesh_example.incremental_model' (expected yaml or csv)"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      row: []\n  outputs: {query: []}\n", 5,
         "unknown key 'row' in input 'sqlmesh_example.incremental_model' "
         "(expected one of: columns, csv_settings, format, path, query, rows)"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model:\n"
         "      path: fixtures/missing.csv\n  outputs: {query: []}\n", 5, "fixture file not found: fixtures/missing.csv"),
        ("  model: sqlmesh_example.full_model\n  inputs:\n    sqlmesh_example.incremental_model: 5\n"
         "  outputs: {query: []}\n", 4,
         "input 'sqlmesh_example.incremental_model' must be a list of rows or a mapping with `rows` or `query`"),
        ("  model: sqlmesh_example.full_model\n  inputs: [1]\n  outputs: {query: []}\n", 3,
         "`inputs` must map upstream model names to rows"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: []}\n  vars: {start: someday}\n", 4,
         "vars.start: Invalid"),
        ("  model: sqlmesh_example.full_model\n  outputs: {query: []}\n  vars: [1]\n", 4, "`vars` must be a mapping"),
        ("  - not a mapping\n", 1, "expected a mapping with `model`, `inputs` and `outputs`"),
    ],
)
def test_malformed_test_errors(project_dir: Path, body: str, line: int, message: str) -> None:
    error = load_error(project_dir, "test_bad:\n" + body)
    assert error.path == "tests/test_extra.yaml"
    assert error.line == line
    assert error.message.startswith("Test 'test_bad': ")
    assert message in error.message


def test_duplicate_test_name_in_one_file(project_dir: Path) -> None:
    error = load_error(project_dir, """
        test_a:
          model: sqlmesh_example.full_model
          outputs: {query: []}
        test_a:
          model: sqlmesh_example.full_model
          outputs: {query: []}
    """)
    # The one YAML loader of project files refuses any duplicate key (core/config/files.py).
    assert str(error).startswith("tests/test_extra.yaml:4: Invalid YAML: duplicate key 'test_a' (first on line 1)")


def test_input_rows_from_a_csv_file(project_dir: Path) -> None:
    (project_dir / "tests" / "fixtures").mkdir()
    (project_dir / "tests" / "fixtures" / "seed.csv").write_text("id,item_id,event_date\n7,1,2020-01-05\n")
    write_test(project_dir, """
        test_file:
          model: sqlmesh_example.incremental_model
          inputs:
            sqlmesh_example.seed_model:
              path: tests/fixtures/seed.csv
          outputs: {query: []}
    """)
    (test,) = load(project_dir, names=["test_file"])
    assert test.inputs["sqlmesh_example.seed_model"].rows == [{"id": 7, "item_id": 1, "event_date": "2020-01-05"}]


def test_latin1_test_file_is_one_error_naming_it(project_dir: Path) -> None:
    (project_dir / "tests" / "test_extra.yaml").write_bytes("test_a:\n  model: caf\xe9\n".encode("latin-1"))
    with pytest.raises(UnitTestError) as info:
        load(project_dir)
    assert str(info.value).startswith("tests/test_extra.yaml:2: Not UTF-8 text: byte 0xe9")


def test_byte_order_mark_is_accepted_in_test_files(project_dir: Path) -> None:
    path = project_dir / "tests" / "test_full_model.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [t.name for t in load(project_dir)] == ["test_example_full_model"]


def test_an_input_a_python_model_does_not_read_says_how_it_reads(project_dir: Path) -> None:
    """A Python model's upstream is what its `resolve_table` calls name (and `depends_on`): a table it
    reads another way (`context.fetchdf("... FROM raw.x")`) is no input, and the error says why."""
    (project_dir / "models" / "py_model.py").write_text(textwrap.dedent('''
        import pandas as pd
        from mesh_dagster import model


        @model("sqlmesh_example.py_model", kind="FULL", columns={"id": "int"})
        def execute(context, start, end, execution_time):
            context.resolve_table("sqlmesh_example.seed_model")
            return pd.DataFrame({"id": [1]})
    '''))
    error = load_error(project_dir, """
        test_py:
          model: sqlmesh_example.py_model
          inputs:
            sqlmesh_example.full_model: [{item_id: 1}]
          outputs: {query: []}
    """)
    assert error.line == 4
    assert ("(upstream models: sqlmesh_example.seed_model: a Python model reads the tables its "
            "`context.resolve_table(...)` calls name and its `depends_on`)") in error.message
