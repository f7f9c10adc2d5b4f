"""Every batch written is timed in the state store, and the next plan estimates its backfill from
those timings (core/plan/estimate.py): in `mesh plan`'s tree, its review summary and the plan's
Dagster metadata (the summary's Markdown). Real SQLite and Postgres; the in-memory engine stands
for Spark."""

from __future__ import annotations

from tests.state.test_plan_reviews import context, project

UNPROTECTED = "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n"


def test_an_apply_times_its_batches_and_the_next_plan_estimates_from_them(tmp_path, state_url):
    root = project(tmp_path, UNPROTECTED)
    ctx = context(root, state_url)
    first = ctx.plans.plan("prod", execution_time="2020-01-04")
    assert first.estimate is not None and sorted(first.estimate.unknown) == ["s.a", "s.b"]  # nothing timed yet
    ctx.reviews.apply_recorded(ctx.reviews.record(first).plan_id)

    timings = ctx.state.timings.history(["s.a", "s.b"])
    assert [(t.version, t.units, t.full_refresh) for t in timings["s.a"]] == [
        (first.snapshots["s.a"].version, 3, False)]  # one batch of three days
    assert all(t.seconds >= 0 for ts in timings.values() for t in ts)

    later = ctx.plans.plan("prod", execution_time="2020-01-06")  # two more days of s.a: from its own batches
    assert later.estimate is not None and later.estimate.unknown == []
    assert later.estimate.models["s.a"].basis == "1 batch(es) of this version"
    summary = ctx.reviews.record(later).summary.markdown("prod")
    assert later.estimate.line() in summary and "(low)" in summary  # 2-day batches, timed at 3 days only


def test_a_models_history_is_its_latest_timings_oldest_first(tmp_path, state_url):
    from mesh_dagster.core.plan.estimate import BatchTiming
    from mesh_dagster.state.timings import KEPT_PER_MODEL

    ctx = context(project(tmp_path, UNPROTECTED), state_url)
    ctx.state.timings.record([BatchTiming("s.a", "v1", 1, float(i)) for i in range(KEPT_PER_MODEL + 5)])
    ctx.state.timings.record([BatchTiming("s.b", "v1", 1, 7.0)])
    found = ctx.state.timings.history(["s.a", "s.b", "s.none"])
    assert [t.seconds for t in found["s.a"]] == [float(i) for i in range(5, KEPT_PER_MODEL + 5)]
    assert [t.seconds for t in found["s.b"]] == [7.0] and "s.none" not in found


def test_an_applied_plan_says_what_its_backfill_took_beside_its_estimate(tmp_path, state_url):
    """After the apply, the estimate is compared with what the batches took: counted by the
    scheduler on the apply's listener (the CLI prints it; Dagster's apply_plan_<env> logs it and
    shows it as the run's `backfill` entry)."""
    import dagster as dg

    from mesh_dagster.context import ApplyListener
    from mesh_dagster.dagster.jobs.reviews import backfill_took

    ctx = context(project(tmp_path, UNPROTECTED), state_url)
    first = ApplyListener()
    ctx.reviews.apply_recorded(ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-04")).plan_id, first)
    assert first.work_s > 0  # the first apply's batches, counted although nothing was estimated
    later = ApplyListener()
    done = ctx.reviews.apply_recorded(ctx.reviews.record(ctx.plans.plan("prod", execution_time="2020-01-06")).plan_id,
                                      later)
    assert later.work_s > 0 and ApplyListener.work_s == 0.0  # each listener counts its own apply
    shown = backfill_took(done, later.work_s, dg.build_op_context())
    assert shown["backfill"].value == done.summary.estimate.took(later.work_s)
    assert shown["backfill"].value.startswith("Backfill took ") and "; estimated " in shown["backfill"].value
    assert backfill_took(done, 0.0, dg.build_op_context()) == {}  # nothing computed here: nothing to compare
