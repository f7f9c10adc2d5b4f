"""A version is fresh in an environment only once its views point at it, also when a run of the
environment's own code location computed it (issue 20), through Dagster's own APIs on real Spark.

Materializing never moves views, but Dagster writes the run's code version on every
materialization, so after a change materialized in prod's location without promote_prod Dagster
alone would call prod's partitions fresh while prod's view still returns the old rows. The
re-stamp sensor then stamps back what prod serves (runless materializations, reported here as
the daemon reports a sensor's asset events), with the audit verdicts that hold on that data: the
partitions read stale, the pending change, until promote_prod; then the re-stamp runs mark them
fresh, computing nothing."""

from __future__ import annotations

import dagster as dg
import pytest
from plan_checks import stamps_only
from project_copies import edit
from test_dagster_materialize import DAYS, RANGE, Project, _drop, _new_project

from mesh_dagster.context import Context
from mesh_dagster.dagster.mapping.versions import CODE_VERSION_TAG, DATA_VERSION_TAG

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark):
    from mesh_dagster.engine.adapter import SparkEngine

    p = _new_project(tmp_path_factory.mktemp("served"))
    ctx = Context(p.root)
    try:
        ctx.reviews.apply(ctx.plans.plan("prod"))  # `mesh plan --auto-apply`
    finally:
        ctx.close()
    yield p
    _drop(SparkEngine(spark), p.schema)


def _tick(project: Project) -> tuple[list, list[dg.ExecuteInProcessResult]]:
    """One tick of restamp_prod_sensor, handled as Dagster's daemon handles it: its asset events
    reported (runless), its run requests launched. (events, run results)."""
    defs = project.defs()
    with dg.build_sensor_context(instance=project.instance, definitions=defs) as context:
        wanted = stamps_only(defs.resolve_sensor_def("restamp_prod_sensor")(context), project.instance)
    if isinstance(wanted, dg.SkipReason):
        return [], []
    for event in wanted.asset_events:
        project.instance.report_runless_asset_event(event)
    runs = [project.run(tags=r.tags, asset_selection=list(r.asset_selection or [])) for r in wanted.run_requests]
    return list(wanted.asset_events), runs


def _columns(project: Project, view: str) -> list[str]:
    ctx = project.context()
    try:
        return list(ctx.engine.catalog.columns(view))
    finally:
        ctx.close()


def _served(project: Project, model: str):
    ctx = project.context()
    try:
        env = ctx.state.environments.served_environment("prod")
        return next(s for s in env.snapshots if s.name == project.name(model))
    finally:
        ctx.close()


def test_a_version_computed_in_prods_location_is_stale_until_promote_prod(project):
    events, runs = _tick(project)
    assert runs and all(r.success for r in runs) and events == []  # prod's data shown: nothing to stamp back
    assert project.statuses(project.defs(), "incremental_model") == "F" * DAYS
    old, old_full = _served(project, "incremental_model"), _served(project, "full_model")
    view = f"{project.schema}.incremental_model"

    edit(project.root, "incremental_model", "  item_id,\n", "  item_id,\n  'z' AS new_column,\n")
    edit(project.root, "full_model", "  item_id,\n", "  item_id,\n  'y' AS other_column,\n")
    assert project.statuses(project.defs(), "incremental_model") == "S" * DAYS  # the pending change
    result = project.run(tags=RANGE, asset_selection=[project.key("incremental_model"), project.key("full_model")])
    assert result.success  # computed in prod's location, without promote_prod
    defs = project.defs()
    # Dagster alone: the run's code version, fresh...
    assert project.statuses(defs, "incremental_model") == "F" * DAYS and project.statuses(defs, "full_model") == "F"
    assert "new_column" not in _columns(project, view)  # ...while prod serves the old version

    events, runs = _tick(project)
    assert all(r.success for r in runs)
    stamps = [e for e in events if isinstance(e, dg.AssetMaterialization)]
    by_model = {e.asset_key.path[-1]: [] for e in stamps}
    for e in stamps:
        by_model[e.asset_key.path[-1]].append(e)
    assert {m: len(v) for m, v in by_model.items()} == {"incremental_model": DAYS, "full_model": 1}
    assert {e.partition for e in by_model["incremental_model"]} == set(_partitions(project))
    stamp = by_model["incremental_model"][0]
    assert stamp.tags[CODE_VERSION_TAG] == old.identifier and stamp.tags[DATA_VERSION_TAG] == old.version
    assert stamp.metadata["mesh/outcome"].value == "served"
    assert f"'prod' serves version {old.version}" in (stamp.description or "")
    (full,) = by_model["full_model"]
    assert (full.partition, full.tags[CODE_VERSION_TAG]) == (None, old_full.identifier)
    (check,) = [e for e in events if isinstance(e, dg.AssetCheckEvaluation)]  # the verdict on what prod serves
    assert check.passed and check.asset_key == project.key("full_model") and events[-1] is check
    assert " by apply at " in check.metadata["audited"].value
    defs = project.defs()
    assert project.statuses(defs, "incremental_model") == "S" * DAYS  # what prod serves: stale
    assert project.statuses(defs, "full_model") == "S"
    assert _tick(project)[0] == []  # stamped back once

    assert project.run("promote_prod").success
    assert "new_column" in _columns(project, view)
    events, runs = _tick(project)
    assert events == [] and runs and all(r.success for r in runs)
    defs = project.defs()
    assert project.statuses(defs, "incremental_model") == "F" * DAYS  # served now: fresh
    assert project.statuses(defs, "full_model") == "F"


def test_a_change_made_before_dagster_saw_the_served_data_shows_that_data_stale(project, tmp_path):
    """An edit, then Dagster for the first time (a new instance, as a first `mesh ui` after the
    edit): prod's served partitions show materialized with the version prod serves, stale (the
    pending change), not missing; once shown, nothing more is stamped."""
    first_look = Project(project.root, project.schema, dg.DagsterInstance.local_temp(str(tmp_path)))
    edit(project.root, "incremental_model", "  item_id,\n", "  item_id,\n  'x' AS another_column,\n")
    served = _served(project, "incremental_model")
    events, runs = _tick(first_look)
    assert all(r.success for r in runs)  # the unchanged seed_model is stamped by a run, as always
    stamps = [e for e in events if isinstance(e, dg.AssetMaterialization)
              and e.asset_key == project.key("incremental_model")]
    assert sorted(e.partition for e in stamps) == _partitions(project)
    assert {(e.tags[CODE_VERSION_TAG], e.tags[DATA_VERSION_TAG]) for e in stamps} == {
        (served.identifier, served.version)}
    assert first_look.statuses(first_look.defs(), "incremental_model") == "S" * DAYS  # not M: prod holds data
    assert [e for e in _tick(first_look)[0] if e.asset_key == project.key("incremental_model")] == []


def _partitions(project: Project) -> list[str]:
    defs = project.defs()
    return defs.resolve_asset_graph().get(project.key("incremental_model")).partitions_def.get_partition_keys()


def test_an_environment_serving_nothing_yet_claims_no_data(tmp_path, spark, engine):
    """Prod not applied yet: what a run of its location computed is stamped back as serving nothing
    there (no data version claimed), stale until promote_prod."""
    fresh = _new_project(tmp_path)
    try:
        result = fresh.run(tags=RANGE, asset_selection=[fresh.key("seed_model"), fresh.key("incremental_model")])
        assert result.success
        assert fresh.statuses(fresh.defs(), "incremental_model") == "F" * DAYS  # Dagster alone
        events, runs = _tick(fresh)
        assert runs == [] and {e.asset_key.path[-1] for e in events} == {"seed_model", "incremental_model"}
        assert len(events) == DAYS + 1
        for event in events:
            assert event.tags == {CODE_VERSION_TAG: "none"}  # no data version: prod serves none
            assert event.metadata["mesh/version"].value == "" and "'prod' serves no data here" in event.description
        assert fresh.statuses(fresh.defs(), "incremental_model") == "S" * DAYS
        assert fresh.statuses(fresh.defs(), "seed_model") == "S"
    finally:
        _drop(engine, fresh.schema)
