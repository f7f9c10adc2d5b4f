"""The restate_<env> job: a restatement launched from Dagster recomputes the selected models and
their downstream, reports them as materializations, and refuses a bad selector in one line."""

from __future__ import annotations

import uuid
from datetime import timedelta

import dagster as dg
import pytest
from failures import failure_text
from project_copies import TODAY, recent_example

from mesh_dagster.context import Context
from mesh_dagster.dagster import definitions

pytestmark = pytest.mark.spark


@pytest.fixture
def project(tmp_path, engine):
    schema = f"rj_{uuid.uuid4().hex[:8]}"
    root = recent_example(tmp_path / "project", 5, schema)
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan())
    yield root, schema, ctx
    for s in (schema, f"mesh__{schema}"):
        engine.catalog.drop_schema(s, cascade=True)


def test_restate_job_recomputes_and_reports(tmp_path, project):
    root, schema, ctx = project
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "home"))
    job = definitions(root, "prod", shared_spark=False).resolve_job_def("restate_prod")
    day = str(TODAY - timedelta(days=2))
    config = {"ops": {"restate_prod_models": {"config": {"models": [f"{schema}.incremental_model"],
                                                        "start": day, "end": day}}}}
    result = job.execute_in_process(run_config=config, instance=instance, raise_on_error=False)
    assert result.success
    keys = {tuple(event.asset_key.path) for event in result.get_asset_materialization_events()}
    assert {(schema, "incremental_model"), (schema, "full_model")} <= keys
    assert (schema, "seed_model") not in keys

    bad = {"ops": {"restate_prod_models": {"config": {"models": [f"{schema}.incremental_modle"]}}}}
    failed = job.execute_in_process(run_config=bad, instance=instance, raise_on_error=False)
    assert not failed.success
    failure = failure_text(failed)  # one line, no stack trace
    assert "matches no model" in failure and "incremental_model" in failure
