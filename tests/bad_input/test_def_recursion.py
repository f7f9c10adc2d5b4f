"""`@DEF` functions that call themselves, and errors inside a `@DEF`: one line at the `@DEF`'s line.

A recursive `@DEF` used to end in "Unexpected RecursionError ... This is a bug" (or, caught by the
renderer, at the MODEL line), and an error inside any `@DEF` was counted from the MODEL block's
line, so the line named was not the `@DEF`'s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from project_builder import write_project

from bad_input.harness import assert_refused, mesh, nothing_written

HEAD = "MODEL (\n  name s.a,\n  kind FULL\n);\n\n-- helpers\n"  # the first @DEF goes on line 7


def _project(tmp_path: Path, body: str) -> Path:
    return write_project(tmp_path / "p", {"models/a.sql": HEAD + body},
                         "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n")


def test_a_recursive_def_is_reported_at_its_line(tmp_path: Path) -> None:
    root = _project(tmp_path, "@DEF(one, 1);\n@DEF(f, x -> @f(x) + 1);\n\nSELECT @f(@one) AS a\n")
    started = time.monotonic()
    with nothing_written(root):
        result = mesh(root, "plan", "--explain")
    assert_refused(result, "models/a.sql:8:", "@DEF f is recursive", "@f -> @f")
    assert time.monotonic() - started < 10


def test_mutually_recursive_defs_are_reported_at_a_def_line(tmp_path: Path) -> None:
    root = _project(tmp_path, "@DEF(f, x -> @g(x));\n@DEF(g, x -> @f(x));\n\nSELECT @f(1) AS a\n")
    with nothing_written(root):
        result = mesh(root, "plan", "--explain")
    line = assert_refused(result, "is recursive", "@f -> @g")
    assert line.split(": ", 1)[1].startswith(("models/a.sql:7:", "models/a.sql:8:")), line


def test_an_error_inside_a_def_is_reported_at_the_def(tmp_path: Path) -> None:
    root = _project(tmp_path, "@DEF(one, 1);\n\n@DEF(f, x -> @nope(x));\n\nSELECT @f(1) AS a\n")
    with nothing_written(root):
        result = mesh(root, "plan", "--explain")
    assert_refused(result, "models/a.sql:9:", "Unknown macro @nope")


@pytest.mark.parametrize("query", ["SELECT @g(@g(@g(1))) AS a", "SELECT @h(1) AS a"])
def test_nested_and_chained_defs_still_work(tmp_path: Path, query: str) -> None:
    root = _project(tmp_path, "@DEF(g, x -> x + 1);\n@DEF(h, x -> @g(@g(x)));\n\n" + query + "\n")
    result = mesh(root, "plan", "--explain")
    assert result.exit_code == 0, result.stderr
