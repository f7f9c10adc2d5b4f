"""What SQLMesh projects write around their models' queries, applied on Spark (issue 37): a user
macro inside an EMBEDDED model (rendered within the models that inline it), a user macro in an
audit's argument, and an audit naming its own model instead of `@this_model` (SQLMesh resolves it
to the table being audited). Each used to fail only once the plan was executing."""

from __future__ import annotations

import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import AuditError

pytestmark = pytest.mark.spark

CONFIG = """model_defaults:
  dialect: spark
  start: 2024-01-01
  cron: '@daily'
"""
MACROS = """from sqlmesh import macro


@macro()
def double(evaluator, column):
    return f"{column} * 2"


@macro()
def threshold(evaluator):
    return 5
"""


@pytest.fixture
def schema(engine):
    name = f"q_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}"):
        engine.catalog.drop_schema(s, cascade=True)


def _files(schema: str, values: str) -> dict[str, str]:
    return {
        "macros/m.py": MACROS,
        "models/base.sql": f"MODEL (name {schema}.base, kind EMBEDDED);\n"
                           f"SELECT id, @double(id) AS d FROM VALUES {values} AS t(id)\n",
        "models/mid.sql": f"MODEL (name {schema}.mid, kind EMBEDDED);\nSELECT id, @double(d) AS dd FROM {schema}.base\n",
        "models/m.sql": f"MODEL (name {schema}.m, kind FULL, audits (at_most(limit := @threshold()), no_nulls));\n"
                        f"SELECT id, dd FROM {schema}.mid\n",
        "audits/at_most.sql": "AUDIT (name at_most);\nSELECT * FROM @this_model WHERE id > @limit\n",
        "audits/no_nulls.sql": f"AUDIT (name no_nulls);\nSELECT * FROM {schema}.m WHERE id IS NULL\n",
    }


def test_macros_of_embedded_models_and_audit_arguments_and_self_named_audits_run(tmp_path, engine, schema):
    ctx = Context(write_project(tmp_path / "p", _files(schema, "(1), (2)"), CONFIG), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert [tuple(r) for r in engine.session.fetchall(f"SELECT id, dd FROM {schema}.m ORDER BY id")] == [(1, 4), (2, 8)]


@pytest.mark.parametrize("values, failing", [("(1), (7)", "at_most"), ("(1), (NULL)", "no_nulls")])
def test_those_audits_check_the_rows_being_written(tmp_path, engine, schema, values, failing):
    """The macro argument's value and the self-named table are the ones of the write under audit:
    a failing row makes the audit fail and nothing is promoted."""
    ctx = Context(write_project(tmp_path / "p", _files(schema, values), CONFIG), engine=engine)
    with pytest.raises(AuditError) as e:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2024-01-02"))
    assert e.value.audit == failing and e.value.count == 1
    assert not engine.catalog.schema_exists(schema)  # no view: nothing promoted
