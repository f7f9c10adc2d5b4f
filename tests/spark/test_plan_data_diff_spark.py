"""A development plan's data diff on Spark: once the dev apply has built the new table of a model
changed in a breaking way, its record holds the comparison with prod's table on the grain (rows
only in one side, changed rows, per-column counts, sample rows), and `plan.data_diff.max_rows`
makes it compare a deterministic sample of keys."""

from __future__ import annotations

from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.snapshots.table_diff import key_sample

NEW_QUERY = ("SELECT id, CASE WHEN id <= 3 THEN v + 1 ELSE v END AS v, 'x' AS w FROM {s}.seed WHERE id <> 10 "
             "UNION ALL SELECT 11 AS id, 0 AS v, 'x' AS w")


def _project(tmp_path, schema: str, config: str = ""):
    return write_project(tmp_path / "p", {
        "seeds/seed.csv": "id,v\n" + "".join(f"{i},{i * 10}\n" for i in range(1, 11)),
        "models/seed.sql": f"MODEL (name {schema}.seed, kind SEED (path '../seeds/seed.csv'), "
                           "columns (id INT, v INT), grain (id));\n",
        "models/m.sql": f"MODEL (name {schema}.m, kind FULL, grain (id));\nSELECT id, v FROM {schema}.seed\n",
        "models/n.sql": f"MODEL (name {schema}.n, kind FULL);\nSELECT id FROM {schema}.seed\n",
    }, CONFIG + config)


def _dev_plan(root, engine, schema: str):
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-03"))
    (root / "models" / "m.sql").write_text(f"MODEL (name {schema}.m, kind FULL, grain (id));\n"
                                           + NEW_QUERY.format(s=schema) + "\n")
    (root / "models" / "n.sql").write_text(f"MODEL (name {schema}.n, kind FULL);\nSELECT id FROM {schema}.seed "
                                           "WHERE id > 1\n")
    ctx.reload()
    plan = ctx.plans.plan("dev", execution_time="2020-01-03")
    assert plan.category(f"{schema}.m").name == "BREAKING"
    ctx.reviews.apply(plan)
    return ctx, plan


def test_a_dev_plan_records_the_data_diff_of_its_breaking_change(tmp_path, engine, unique_schema):
    schema = unique_schema
    ctx, plan = _dev_plan(_project(tmp_path, schema), engine, schema)
    record = ctx.reviews.records.find(plan.plan_id)
    d = record.summary.data_diffs[f"{schema}.m"]
    assert d.old_table == f"mesh__{schema}.{schema}__m__{plan.previous[f'{schema}.m'].version}"
    assert d.new_table == plan.snapshots[f"{schema}.m"].table_name and d.old_environment == "prod"
    assert (d.status, d.grain, d.old_rows, d.new_rows) == ("compared", ["id"], 10, 10)
    assert (d.only_new, d.only_old, d.changed, d.unchanged) == (1, 1, 3, 6)
    assert d.column_changes == {"v": 3} and d.columns_added == ["w"] and d.sampled is None
    assert d.sample_columns == ["id", "new v", "old v"] and len(d.sample) == 5  # sample_rows' default
    shown = {row[0]: row[1:] for row in d.sample}
    assert shown["1"] == ["11", "10"] and shown["11"] == ["0", "NULL"] and shown["10"] == ["NULL", "100"]
    n = record.summary.data_diffs[f"{schema}.n"]  # no grain: counts only
    assert (n.status, n.note, n.old_rows, n.new_rows, n.only_new) == ("counts only", "no grain: counts only",
                                                                       10, 9, None)
    assert f"{schema}.seed" not in record.summary.data_diffs  # not modified
    assert "| `" + f"{schema}.m` | `id` | 10 → 10 | 1 | 1 | 3 | 6 |" in record.summary.markdown("dev")


def test_above_max_rows_a_sample_of_keys_is_compared(tmp_path, engine, unique_schema):
    schema = unique_schema
    config = "plan:\n  data_diff:\n    max_rows: 4\n    sample_rows: 1\n"
    ctx, plan = _dev_plan(_project(tmp_path, schema, config), engine, schema)
    d = ctx.reviews.records.find(plan.plan_id).summary.data_diffs[f"{schema}.m"]
    assert d.sampled == 0.4 and (d.old_rows, d.new_rows) == (10, 10) and len(d.sample) <= 1
    kept = {r[0] for r in engine.session.fetchall(f"SELECT id FROM {key_sample(d.new_table, ['id'], 0.4)}")}
    kept_old = {r[0] for r in engine.session.fetchall(f"SELECT id FROM {key_sample(d.old_table, ['id'], 0.4)}")}
    assert (d.only_new, d.only_old) == (len(kept - kept_old), len(kept_old - kept))
    assert d.changed == len({1, 2, 3} & kept) and d.unchanged == len(kept & kept_old) - d.changed
    assert len(kept | kept_old) < 11  # fewer keys than the tables hold were compared


def test_a_forward_only_preview_is_compared_over_its_preview_range(tmp_path, engine, unique_schema):
    """The preview of a forward-only change holds its preview range only (the last day here): the
    diff cuts prod's table to that range too, so prod's older days do not count as removed rows."""
    schema = unique_schema
    days = "".join(f"{i},{i * 10},2020-01-0{(i + 1) // 2}\n" for i in range(1, 7))  # two rows a day, 3 days
    incremental = (f"MODEL (name {schema}.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain (id));\n"
                   f"SELECT id, v, ds FROM {schema}.seed WHERE ds BETWEEN @start_ds AND @end_ds\n")
    root = write_project(tmp_path / "p", {
        "seeds/seed.csv": "id,v,ds\n" + days,
        "models/seed.sql": f"MODEL (name {schema}.seed, kind SEED (path '../seeds/seed.csv'), "
                           "columns (id INT, v INT, ds DATE), grain (id));\n",
        "models/m.sql": incremental}, CONFIG + "plan:\n  forward_only: true\n")
    ctx = Context(root, engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-04"))
    (root / "models" / "m.sql").write_text(incremental.replace("SELECT id, v,", "SELECT id, CASE WHEN id = 6 THEN v + 1 "
                                                                                "ELSE v END AS v,"))
    ctx.reload()
    plan = ctx.plans.plan("dev", execution_time="2020-01-04")
    assert plan.previews == [f"{schema}.m"]
    ctx.reviews.apply(plan)
    d = ctx.reviews.records.find(plan.plan_id).summary.data_diffs[f"{schema}.m"]
    assert (d.status, d.old_rows, d.new_rows) == ("compared", 2, 2)  # prod holds 6 rows, 2 of them on 2020-01-03
    assert (d.only_new, d.only_old, d.changed, d.unchanged, d.column_changes) == (0, 0, 1, 1, {"v": 1, "ds": 0})
    assert d.note == "preview of a forward-only change: rows of `ds` in 2020-01-03 - 2020-01-03 (its preview range) compared"
    assert engine.session.fetchall(f"SELECT COUNT(*) FROM {d.old_table}") == [(6,)]
