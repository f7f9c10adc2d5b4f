"""Plans that cannot be made: one line saying why, and nothing written (no snapshot, no environment).

The quickstart's prod is put in the state store directly (no Spark): the refusals come from
planning, which reads the project and the state store only.
"""

import pytest
from project_builder import applied_example

from bad_input.harness import assert_refused, mesh, nothing_written


@pytest.fixture
def project(tmp_path):
    return applied_example(tmp_path / "p")


CASES = [
    (["plan", "dev", "--create-from", "nope", "--explain"],
     ["Cannot create environment 'dev' from 'nope': it does not exist"]),
    (["plan", "dev", "--explain", "--execution-time", "2025-06-20"],
     ["Creating a new environment requires a change", "match the `prod` environment", "--include-unmodified"]),
    (["plan", "dev", "--end", "2999-01-01", "--include-unmodified", "--explain"],
     ["The plan end cannot be in the future"]),
]


@pytest.mark.parametrize("args, fragments", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_plan_that_cannot_be_made(project, args, fragments):
    with nothing_written(project):
        outcome = mesh(project, *args)
    assert_refused(outcome, *fragments)
