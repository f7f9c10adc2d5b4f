"""Self-referencing models at load and plan time (no Spark): a query reading its own name is no
cycle but the model's previous state; its column types must be known before it first runs; it
depends on its past, so its intervals are planned from its own start and run one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.state.store import StateStore

EXTERNAL = "- name: raw.events\n  columns:\n    ds: DATE\n    amount: INT\n"
RUNNING_TOTAL = """MODEL (
  name s.totals,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds{kind_props}){props}
);

SELECT
  e.ds,
  CAST(SUM(e.amount) + COALESCE((SELECT MAX(t.total) FROM s.totals AS t WHERE t.ds < @start_ds), 0) AS BIGINT) AS total
FROM raw.events AS e
WHERE e.ds BETWEEN @start_ds AND @end_ds
GROUP BY e.ds
"""
PLAIN = """MODEL (name s.plain, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));

SELECT ds, amount FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds
"""


def project_root(tmp_path: Path, model: str = RUNNING_TOTAL.format(kind_props="", props=""), **extra: str) -> Path:
    root = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
    others = {f"models/{name}.sql": text for name, text in extra.items()}
    return write_project(root, {"external_models.yaml": EXTERNAL, "models/totals.sql": model, **others})


def refused(root: Path, where: str, message: str) -> None:
    with pytest.raises(ModelError) as e:
        load_project(root, use_cache=False)
    assert f"{where}: {message}" in str(e.value), str(e.value)


def test_a_query_reading_its_own_name_is_self_referencing_not_a_cycle(tmp_path: Path) -> None:
    project = load_project(project_root(tmp_path, plain=PLAIN), use_cache=False)
    model = project.models["s.totals"]
    assert model.self_referencing and model.depends_on_past and model.batch_concurrency == 1
    assert project.parents("s.totals") == ["raw.events"]
    assert not project.models["s.plain"].self_referencing and not project.models["s.plain"].depends_on_past
    # Its types were inferred (a typed parent column, a cast): they become its declared columns, so
    # its table is created before its query, which reads that table, can even be analysed.
    assert model.columns == {"ds": "DATE", "total": "BIGINT"}
    assert build_snapshots(project)["s.totals"].depends_on_past


def test_a_cached_load_knows_it_too(tmp_path: Path) -> None:
    root = project_root(tmp_path)
    cold = load_project(root)
    warm = load_project(root)
    assert warm.models["s.totals"].self_referencing and warm.parents("s.totals") == ["raw.events"]
    assert build_snapshots(warm)["s.totals"].fingerprint == build_snapshots(cold)["s.totals"].fingerprint


def test_declared_columns_stand_in_for_types_the_query_does_not_say(tmp_path: Path) -> None:
    untyped = RUNNING_TOTAL.format(kind_props="", props=",\n  columns (ds DATE, total BIGINT)").replace(
        "CAST(SUM(e.amount) + COALESCE((SELECT MAX(t.total) FROM s.totals AS t WHERE t.ds < @start_ds), 0) AS BIGINT)",
        "SUM(e.amount) + COALESCE((SELECT MAX(t.total) FROM s.totals AS t WHERE t.ds < @start_ds), 0)")
    model = load_project(project_root(tmp_path, untyped), use_cache=False).models["s.totals"]
    assert model.self_referencing and model.columns == {"ds": "DATE", "total": "BIGINT"}


def test_a_column_of_unknown_type_is_refused_where_the_query_writes_it(tmp_path: Path) -> None:
    untyped = RUNNING_TOTAL.format(kind_props="", props="").replace(
        "CAST(SUM(e.amount) + COALESCE((SELECT MAX(t.total) FROM s.totals AS t WHERE t.ds < @start_ds), 0) AS BIGINT)",
        "SUM(e.amount) + COALESCE((SELECT MAX(t.total) FROM s.totals AS t WHERE t.ds < @start_ds), 0)")
    refused(project_root(tmp_path, untyped), "models/totals.sql:8",
            "Model s.totals reads its own table, so its column types must be known before it first runs, but the type "
            "of total is not: cast each column (`CAST(x AS INT) AS x`) or declare `columns (...)`")


def test_columns_unknown_altogether_are_refused_at_the_query(tmp_path: Path) -> None:
    model = "MODEL (name s.totals, kind FULL);\n\nSELECT * FROM raw.untyped UNION ALL SELECT * FROM s.totals\n"
    root = project_root(tmp_path, model)
    (root / "external_models.yaml").write_text(EXTERNAL + "- name: raw.untyped\n")
    refused(root, "models/totals.sql:3", "Model s.totals reads its own table, so its column types must be known "
                                         "before it first runs, but its columns are not")


@pytest.mark.parametrize("kind", ["VIEW", "EMBEDDED"])
def test_kinds_without_a_table_cannot_read_themselves(tmp_path: Path, kind: str) -> None:
    model = f"MODEL (name s.totals, kind {kind});\n\nSELECT CAST(1 AS INT) AS n FROM s.totals\n"
    refused(project_root(tmp_path, model), "models/totals.sql:3",
            f"Model s.totals reads itself, which a {kind} model cannot do")


def test_batch_concurrency_is_refused_for_a_model_reading_itself(tmp_path: Path) -> None:
    refused(project_root(tmp_path, RUNNING_TOTAL.format(kind_props=", batch_concurrency 2", props="")),
            "models/totals.sql:3", "batch_concurrency 2 cannot apply: model s.totals reads its own table")


def test_its_intervals_are_planned_from_its_own_start_whatever_the_plan_start(tmp_path: Path) -> None:
    """A development plan from 2020-01-03 backfills the other models from there, but a model that
    builds on its past cannot begin in the middle of its history: it starts from its own start."""
    scd = ("MODEL (name s.scd, kind SCD_TYPE_2_BY_COLUMN (unique_key ds, columns *));\n\n"
           "SELECT ds, amount FROM raw.events\n")
    project = load_project(project_root(tmp_path, plain=PLAIN, scd=scd), use_cache=False)
    with StateStore(f"sqlite:///{tmp_path / 'state.db'}") as state:
        plan = build_plan(project, state, "dev", start="2020-01-03", execution_time="2020-01-05")
    day = {d: to_ms(f"2020-01-0{d}") for d in range(1, 6)}
    assert plan.backfills["s.plain"].intervals == [(day[3], day[5])]
    assert plan.backfills["s.totals"].intervals == [(day[1], day[5])]
    assert plan.backfills["s.scd"].intervals == [(day[1], day[5])]
    assert not plan.backfills["s.scd"].full_refresh  # batched like any incremental model
