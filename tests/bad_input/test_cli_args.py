"""Bad command lines: every option's bad value is one line naming the option, and nothing is written.

Each case runs `mesh` in process on a fresh copy of the quickstart (no state, no warehouse): a
refusal must come before anything is created, and never as a traceback.
"""

import os

import pytest

from bad_input.harness import assert_refused, copy_example, mesh, nothing_written
from mesh_dagster.engine.server_record import SERVER_ENV

M = "sqlmesh_example.full_model"
TIME_HINT = "expected a date like '2020-01-01'"
LONG = "e" * 112  # sqlmesh_example__ + 112 = 129 characters: one over the metastore's limit

CASES = [
    # invalid dates, named by their option
    (["plan", "dev", "--start", "yesterdayish"], ["'-s' / '--start'", "'yesterdayish' is not a date or time", TIME_HINT]),
    (["plan", "dev", "--end", "2020-99-99"], ["'-e' / '--end'", "'2020-99-99' is not a date or time: month must be in 1..12"]),
    (["plan", "dev", "--execution-time", "not a time"], ["'--execution-time'", "'not a time'", TIME_HINT]),
    (["run", "--start", "garbage"], ["'-s' / '--start'", "'garbage'", TIME_HINT]),
    (["run", "--end", "2020-02-30"], ["'-e' / '--end'", "day is out of range for month"]),
    (["run", "--execution-time", "soonish"], ["'--execution-time'", "'soonish'"]),
    (["render", M, "--start", "the beginning"], ["'-s' / '--start'", "'the beginning'"]),
    (["render", M, "--execution-time", "99999999999999999"], ["'--execution-time'", "out of the supported range"]),
    (["evaluate", M, "--end", "2020-01-01 25:00"], ["'-e' / '--end'", "hour must be in 0..23"]),
    # ranges that are empty or reversed
    (["render", M, "--start", "2020-02-01", "--end", "2020-01-01"],
     ["Invalid start '2020-02-01': it is after the end '2020-01-01'"]),
    (["evaluate", M, "--start", "2020-01-05", "--end", "2020-01-01"],
     ["Invalid start '2020-01-05': it is after the end '2020-01-01'"]),
    (["render", M, "--start", "2020-01-01 10:00", "--end", "2020-01-01 10:00"], ["so the range is empty"]),
    (["run", "--start", "2020-02-01", "--end", "2020-01-01"], ["Invalid start '2020-02-01': it is after the end"]),
    (["plan", "dev", "--start", "2020-02-01", "--end", "2020-01-01", "--explain"], ["2020-02-01", "after"]),
    (["plan", "--start", "2020-01-01", "--explain"], ["only be set for development environments"]),
    # environment names: empty, nameless, prod by another spelling, too long for the metastore
    (["plan", ""], ["'[ENVIRONMENT]'", "'' is not an environment name: it is empty"]),
    (["plan", "   "], ["'   ' is not an environment name: it is empty"]),
    (["plan", "PROD"], ["'PROD' is not an environment name: only 'prod' names the production environment"]),
    (["plan", "///"], ["'///' is not an environment name: it has no letter or digit"]),
    (["plan", "dev", "--create-from", ""], ["'--create-from'", "it is empty"]),
    (["run", ""], ["'' is not an environment name"]),
    (["diff", "Prod"], ["only 'prod' names the production environment"]),
    (["invalidate", ""], ["'' is not an environment name: it is empty"]),
    (["audit", "--environment", " "], ["'--environment'", "it is empty"]),
    (["table_diff", "prod:", M], ["Invalid environment name '': it is empty"]),
    (["table_diff", "prod-dev", M], ["Write the environments as SOURCE:TARGET"]),
    (["ui", "-e", ""], ["'-e' / '--environment'", "it is empty"]),
    (["plan", LONG, "--explain"],
     ["112 characters make the schema 'sqlmesh_example__eee", "over the metastore's limit of 128",
      "use at most 111 characters"]),
    # other values
    (["evaluate", M, "--limit", "-1"], ["'--limit'", "-1 is not in the range x>=0"]),
    (["evaluate", M, "--limit", "many"], ["'--limit'", "'many' is not a valid integer"]),
    (["table_diff", "prod:dev", M, "--limit", "-5"], ["'--limit'", "x>=0"]),
    (["ui", "--port", "70000"], ["'--port'", "70000 is not in the range 1<=x<=65535"]),
    (["render", "sqlmesh_example.nope"], ["Unknown model 'sqlmesh_example.nope'"]),
    (["--gateway", "nope", "environments"], ["nope"]),
    (["plna"], ["No such command 'plna'"]),
    # Refused before Spark starts (Spark would write .mesh/log4j2.properties first).
    (["test", "test_nope"], ["No unit test matches 'test_nope'", "test_example_full_model"]),
    (["plan", "--bogus"], ["No such option '--bogus'", "plan --help"]),
]


@pytest.fixture(autouse=True)
def no_exec(monkeypatch):
    """`mesh ui` ends by exec'ing Dagster: were a bad value accepted, it must not replace pytest."""

    def refuse(*args):
        raise AssertionError("mesh ui accepted the bad value and would have started Dagster")

    monkeypatch.setattr(os, "execve", refuse)


@pytest.fixture
def project(tmp_path):
    root = copy_example(tmp_path / "p")
    (root / ".mesh").mkdir()  # a project mesh has run in: refusals may add a log under it
    return root


@pytest.mark.parametrize("args, fragments", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_command_line_is_one_line_and_writes_nothing(project, args, fragments, monkeypatch):
    monkeypatch.setenv(SERVER_ENV, "1")  # the product's default: a refused command starts no warm server either
    with nothing_written(project):
        outcome = mesh(project, *args)
    assert_refused(outcome, *fragments)


def test_a_path_that_is_a_file_is_refused(tmp_path):
    a_file = tmp_path / "config.yaml"
    a_file.write_text("")
    assert_refused(mesh(a_file, "environments"), "is a file")
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]
