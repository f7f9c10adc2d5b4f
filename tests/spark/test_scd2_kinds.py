"""SCD type 2 models on plain Parquet, on real Spark: the history after three runs (a first load,
an update, a hard delete, a key coming back), BY_COLUMN's checked and unchecked columns, a repeated
run changing nothing, and a source repeating a key failing without touching the table.

The source is a real table rewritten between runs, as a "current state" source is; each run is a
`mesh run` at its own execution time (SQLMesh's documentation example, one day per run).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark

CONFIG = """model_defaults:
  dialect: spark
  start: 2019-12-31
  cron: '@daily'
"""
FIRST = "(1, 'Chicken Sandwich', 10.99, '2020-01-01'), (2, 'Cheeseburger', 8.99, '2020-01-01'), " \
        "(3, 'French Fries', 4.99, '2020-01-01')"
# Chicken Sandwich is dearer, Cheeseburger is gone, Milkshake is new.
SECOND = "(1, 'Chicken Sandwich', 12.99, '2020-01-02'), (3, 'French Fries', 4.99, '2020-01-01'), " \
         "(4, 'Milkshake', 3.99, '2020-01-02')"
# Dearer again, Cheeseburger is back, the Milkshake renamed.
THIRD = "(1, 'Chicken Sandwich', 14.99, '2020-01-03'), (2, 'Cheeseburger', 8.99, '2020-01-03'), " \
        "(3, 'French Fries', 4.99, '2020-01-01'), (4, 'Chocolate Milkshake', 3.99, '2020-01-03')"


@pytest.fixture
def schema(engine):
    name = f"scd_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _source(engine: SparkEngine, schema: str, rows: str) -> None:
    """The source table holding exactly `rows` (id, name, price, updated_at)."""
    engine.catalog.create_schema(f"{schema}_raw")
    engine.session.execute(f"CREATE TABLE IF NOT EXISTS {schema}_raw.menu (id INT, name STRING, price DOUBLE, "
                           "updated_at TIMESTAMP) USING parquet")
    engine.session.execute(f"INSERT OVERWRITE TABLE {schema}_raw.menu SELECT id, name, price, CAST(ts AS TIMESTAMP) "
                           f"FROM VALUES {rows} AS t(id, name, price, ts)")


def _project(tmp_path: Path, schema: str, models: dict[str, str]) -> Context:
    external = (f"- name: {schema}_raw.menu\n  columns:\n    id: int\n    name: string\n    price: double\n"
                "    updated_at: timestamp\n")
    files = {"external_models.yaml": external, **{f"models/{name}.sql": text for name, text in models.items()}}
    return Context(write_project(tmp_path / "p", files, CONFIG))


def _history(engine: SparkEngine, table: str, columns: str = "id, name, price") -> list[tuple]:
    rows = engine.session.fetchall(f"SELECT {columns}, CAST(valid_from AS STRING), CAST(valid_to AS STRING) FROM {table}")
    return sorted((tuple(r) for r in rows), key=repr)


def _three_runs(ctx: Context, engine: SparkEngine, schema: str) -> None:
    """First load at 2020-01-01 11:00, then a run a day, the source changing in between."""
    _source(engine, schema, FIRST)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-01 11:00:00"))
    _source(engine, schema, SECOND)
    assert ctx.runs.run(execution_time="2020-01-02 11:00:00") == 1
    _source(engine, schema, THIRD)
    assert ctx.runs.run(execution_time="2020-01-03 11:00:00") == 1


BY_TIME = """
    MODEL (
      name {schema}.menu,
      kind SCD_TYPE_2 (unique_key id, invalidate_hard_deletes {invalidate})
    );

    SELECT id, name, price, updated_at FROM {schema}_raw.menu
"""


def test_by_time_with_invalidated_hard_deletes(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {"menu": BY_TIME.format(schema=schema, invalidate="true")})
    _three_runs(ctx, engine, schema)
    assert _history(engine, f"{schema}.menu") == sorted([
        (1, "Chicken Sandwich", 10.99, "1970-01-01 00:00:00", "2020-01-02 00:00:00"),
        (1, "Chicken Sandwich", 12.99, "2020-01-02 00:00:00", "2020-01-03 00:00:00"),
        (1, "Chicken Sandwich", 14.99, "2020-01-03 00:00:00", None),
        # closed when the run of 2020-01-02 11:00 found it gone; back from its new updated_at
        (2, "Cheeseburger", 8.99, "1970-01-01 00:00:00", "2020-01-02 11:00:00"),
        (2, "Cheeseburger", 8.99, "2020-01-03 00:00:00", None),
        (3, "French Fries", 4.99, "1970-01-01 00:00:00", None),
        (4, "Milkshake", 3.99, "2020-01-02 00:00:00", "2020-01-03 00:00:00"),
        (4, "Chocolate Milkshake", 3.99, "2020-01-03 00:00:00", None),
    ], key=repr)
    # The history is what the view shows, with the validity columns typed as the kind says.
    assert engine.catalog.columns(f"{schema}.menu") == {"id": "int", "name": "string", "price": "double",
                                                "updated_at": "timestamp", "valid_from": "timestamp",
                                                "valid_to": "timestamp"}


def test_by_time_keeps_a_hard_deleted_row_current_by_default(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {"menu": BY_TIME.format(schema=schema, invalidate="false")})
    _source(engine, schema, FIRST)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-01 11:00:00"))
    _source(engine, schema, SECOND)
    ctx.runs.run(execution_time="2020-01-02 11:00:00")
    assert (2, "Cheeseburger", 8.99, "1970-01-01 00:00:00", None) in _history(engine, f"{schema}.menu")
    _source(engine, schema, THIRD)
    ctx.runs.run(execution_time="2020-01-03 11:00:00")
    cheeseburger = [row for row in _history(engine, f"{schema}.menu") if row[0] == 2]
    # Back with a newer updated_at: the version kept open is closed where the new one starts.
    assert cheeseburger == [(2, "Cheeseburger", 8.99, "1970-01-01 00:00:00", "2020-01-03 00:00:00"),
                            (2, "Cheeseburger", 8.99, "2020-01-03 00:00:00", None)]
    assert len(_history(engine, f"{schema}.menu")) == 8


def test_rerunning_a_run_changes_nothing(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {"menu": BY_TIME.format(schema=schema, invalidate="true")})
    _three_runs(ctx, engine, schema)
    before = _history(engine, f"{schema}.menu")
    # The last run again, same source, same execution time (as a Dagster re-materialization does).
    results = list(ctx.runs.materialize([f"{schema}.menu"], "2020-01-02", "2020-01-03", execution_time="2020-01-03 11:00:00"))
    assert [r.recorded for r in results] == [[(1577923200000, 1578009600000)]]
    assert _history(engine, f"{schema}.menu") == before


def test_by_column_opens_a_version_only_when_a_checked_column_changes(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {"menu": f"""
        MODEL (
          name {schema}.menu,
          kind SCD_TYPE_2_BY_COLUMN (
            unique_key id, columns [name], invalidate_hard_deletes true,
            valid_from_name starts, valid_to_name ends, time_data_type TIMESTAMP_NTZ
          )
        );

        SELECT id, name, price FROM {schema}_raw.menu
        """})
    _three_runs(ctx, engine, schema)
    rows = engine.session.fetchall(f"SELECT id, name, price, CAST(starts AS STRING), CAST(ends AS STRING) FROM {schema}.menu")
    assert sorted((tuple(r) for r in rows), key=repr) == sorted([
        # Only the price changed: still one version, as first loaded (prices are not checked).
        (1, "Chicken Sandwich", 10.99, "1970-01-01 00:00:00", None),
        (2, "Cheeseburger", 8.99, "1970-01-01 00:00:00", "2020-01-02 11:00:00"),
        (2, "Cheeseburger", 8.99, "2020-01-03 11:00:00", None),  # back: stamped with the execution time
        (3, "French Fries", 4.99, "1970-01-01 00:00:00", None),
        (4, "Milkshake", 3.99, "2020-01-02 11:00:00", "2020-01-03 11:00:00"),  # renamed: a new version
        (4, "Chocolate Milkshake", 3.99, "2020-01-03 11:00:00", None),
    ], key=repr)
    assert engine.catalog.columns(f"{schema}.menu") == {"id": "int", "name": "string", "price": "double",
                                                "starts": "timestamp_ntz", "ends": "timestamp_ntz"}


def test_a_child_reads_the_validity_columns(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {
        "menu": BY_TIME.format(schema=schema, invalidate="true"),
        "current": f"""
            MODEL (name {schema}.current_menu, kind FULL);

            SELECT id, name, valid_from FROM {schema}.menu WHERE valid_to IS NULL
            """,
    })
    _source(engine, schema, FIRST)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-01 11:00:00"))
    rows = engine.session.fetchall(f"SELECT id, name, CAST(valid_from AS STRING) FROM {schema}.current_menu")
    assert sorted(tuple(r) for r in rows) == [(1, "Chicken Sandwich", "1970-01-01 00:00:00"),
                                              (2, "Cheeseburger", "1970-01-01 00:00:00"),
                                              (3, "French Fries", "1970-01-01 00:00:00")]


def test_a_source_repeating_a_key_fails_and_leaves_the_history_alone(tmp_path, engine, schema) -> None:
    ctx = _project(tmp_path, schema, {"menu": BY_TIME.format(schema=schema, invalidate="true")})
    _source(engine, schema, FIRST)
    plan = ctx.plans.plan(execution_time="2020-01-01 11:00:00")
    ctx.reviews.apply(plan)
    before = _history(engine, f"{schema}.menu")
    _source(engine, schema, FIRST + ", (3, 'Fries', 5.99, '2020-01-02')")
    with pytest.raises(EngineError) as e:
        ctx.runs.run(execution_time="2020-01-02 11:00:00")
    message = str(e.value)
    assert "models/menu.sql:1" in message and "more than one row for one unique_key (id)" in message, message
    assert _history(engine, f"{schema}.menu") == before
    key = plan.snapshots[f"{schema}.menu"].interval_key
    assert ctx.state.intervals.get_intervals([key])[key] == [(1577750400000, 1577836800000)]  # the failed interval is not recorded


def test_a_breaking_change_above_keeps_the_history_in_prod_and_previews_it_in_dev(tmp_path, engine, schema) -> None:
    """SQLMesh's plan of a breaking parent above an SCD type 2 model (forward-only): INDIRECT_BREAKING,
    a preview in dev built on the new parent, prod's history kept and extended by the next run."""
    names = f"""
        MODEL (name {schema}.names, kind FULL);

        SELECT id, name FROM {schema}_raw.menu
        """
    ctx = _project(tmp_path, schema, {"names": names, "menu": f"""
        MODEL (name {schema}.menu, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name]));

        SELECT id, name FROM {schema}.names
        """})
    _source(engine, schema, FIRST)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-01 11:00:00"))
    prod_rows = _history(engine, f"{schema}.menu", "id, name")
    upper = names.replace("SELECT id, name", "SELECT id, UPPER(name) AS name")
    (ctx.project.path / "models/names.sql").write_text(upper)
    ctx.reload()
    dev = ctx.plans.plan("dev", execution_time="2020-01-01 11:00:00")
    assert (dev.category(f"{schema}.names"), dev.category(f"{schema}.menu")) == (C.BREAKING, C.INDIRECT_BREAKING)
    ctx.reviews.apply(dev)
    assert {r[1] for r in _history(engine, f"{schema}__dev.menu", "id, name")} == \
        {"CHICKEN SANDWICH", "CHEESEBURGER", "FRENCH FRIES"}  # the preview reads the new parent
    assert _history(engine, f"{schema}.menu", "id, name") == prod_rows  # prod untouched

    prod = ctx.plans.plan(execution_time="2020-01-01 11:00:00")
    assert prod.category(f"{schema}.menu") == C.INDIRECT_BREAKING and f"{schema}.menu" not in prod.backfills
    ctx.reviews.apply(prod)
    assert _history(engine, f"{schema}.menu", "id, name") == prod_rows  # the history is kept, not rebuilt
    ctx.runs.run(execution_time="2020-01-02 11:00:00")
    current = engine.session.fetchall(f"SELECT name FROM {schema}.menu WHERE valid_to IS NULL")
    assert sorted(r[0] for r in current) == ["CHEESEBURGER", "CHICKEN SANDWICH", "FRENCH FRIES"]
    assert len(_history(engine, f"{schema}.menu", "id, name")) == 6  # each old name closed, a new version opened
