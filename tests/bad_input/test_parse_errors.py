"""sqlglot's parse errors reach users without sqlglot's internal reprs."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot.errors import ParseError

from mesh_dagster.core.config.parse_errors import describe
from tests.bad_input.harness import assert_refused, copy_example, mesh, nothing_written


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT * FROM ;", "Expected table name but got the end of the query"),
    ("SELECT a FROM t WHERE", "Incomplete WHERE clause"),
    ("SELECT a FROM (SELECT 1", "Expecting )"),
])
def test_describe_names_no_internals(sql: str, expected: str):
    with pytest.raises(ParseError) as caught:
        sqlglot.parse_one(sql, read="spark")
    message = describe(caught.value)
    assert message.startswith(expected), message
    for internal in ("<Token", "<class", "TokenType", "Line 1, Col", "\n", "\x1b"):
        assert internal not in message, message


def test_a_model_query_error_names_file_line_and_no_internals(tmp_path):
    project = copy_example(tmp_path / "project")
    (project / "models" / "broken.sql").write_text(
        "MODEL (name sqlmesh_example.broken, kind FULL);\n\nSELECT item_id\nFROM sqlmesh_example.seed_model\nWHERE\n")
    with nothing_written(project):
        outcome = mesh(project, "plan", "--auto-apply")
    assert_refused(outcome, "models/broken.sql:", "Incomplete WHERE clause")
