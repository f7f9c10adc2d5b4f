"""Two SQLMesh defaults that decide data (issue 22): a model without `start` starts where its
parents do (the earliest start inferred upstream; nothing upstream: its latest interval), and a
seed without `columns` gets the types pandas' CSV reader infers (SQLMesh reads seeds with pandas).
Expectations are SQLMesh's documented behaviour; the seed cases are checked against pandas itself.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from project_builder import write_project

from mesh_dagster.core.plan.plan import build_plan, model_start_ms
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.core.time.starts import StartNode, inferred_starts

NO_START = """model_defaults:
  dialect: spark
  cron: '@daily'
"""


def _inc(name: str, start: str | None, parent: str | None = None) -> str:
    source = f"FROM {parent}" if parent else ""
    start_line = f"  start '{start}',\n" if start else ""
    return (f"MODEL (\n  name {name},\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),\n{start_line}"
            f"  cron '@daily'\n);\nSELECT CAST(@start_ds AS DATE) AS ds, 1 AS n {source}\n"
            + ("WHERE ds BETWEEN @start_ds AND @end_ds\n" if parent else ""))


def test_a_model_without_start_starts_with_its_parents_not_the_project(tmp_path: Path, state) -> None:
    """Measured with SQLMesh 0.236: a start-less child of a model starting on the 5th holds the
    days from the 5th (3 rows at 2024-01-08), not the 7 days since the project's earliest start."""
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-01"),
        "models/b.sql": _inc("s.b", "2023-01-05"),
        "models/child.sql": _inc("s.child", None, "s.b"),
    }, NO_START)
    project = load_project(root, use_cache=False)
    assert project.start_ms("s.child") == to_ms("2023-01-05")
    plan = build_plan(project, state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.child"].intervals == [(to_ms("2023-01-05"), to_ms("2023-01-08"))]
    assert plan.backfills["s.a"].intervals == [(to_ms("2023-01-01"), to_ms("2023-01-08"))]
    assert model_start_ms(project.models["s.child"], project) == to_ms("2023-01-05")  # Dagster's partitions


def test_a_start_less_model_reading_only_external_tables_has_its_latest_interval(tmp_path: Path, state) -> None:
    """Measured with SQLMesh 0.236: a start-less model whose only parent is an external table holds
    1 row (the last interval), whatever the other models' starts."""
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-01"),
        "models/lone.sql": _inc("s.lone", None, "raw.events"),
        "external_models.yaml": "- name: raw.events\n  columns:\n    ds: date\n",
    }, NO_START)
    project = load_project(root, use_cache=False)
    assert project.start_ms("s.lone") is None  # no start upstream: only the latest interval
    plan = build_plan(project, state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.lone"].intervals == [(to_ms("2023-01-07"), to_ms("2023-01-08"))]


def test_the_start_is_inferred_through_start_less_parents_from_the_earliest(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-03"),
        "models/b.sql": _inc("s.b", "2023-01-06"),
        "models/mid.sql": _inc("s.mid", None, "s.a"),
        "models/leaf.sql": _inc("s.leaf", None).replace("1 AS n ", "1 AS n FROM s.mid JOIN s.b USING (ds) ")
        + "WHERE ds BETWEEN @start_ds AND @end_ds\n",
    }, NO_START)
    project = load_project(root, use_cache=False)
    assert project.start_ms("s.leaf") == project.start_ms("s.mid") == to_ms("2023-01-03")
    plan = build_plan(project, state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.leaf"].intervals == [(to_ms("2023-01-03"), to_ms("2023-01-08"))]


def test_model_defaults_start_is_every_model_s_own(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-01"),
        "models/child.sql": _inc("s.child", None, "s.a"),
    }, NO_START + "  start: '2023-01-05'\n")
    plan = build_plan(load_project(root, use_cache=False), state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.child"].intervals == [(to_ms("2023-01-05"), to_ms("2023-01-08"))]
    assert plan.backfills["s.a"].intervals == [(to_ms("2023-01-01"), to_ms("2023-01-08"))]


def test_without_any_start_a_model_has_its_latest_interval_only(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {"models/child.sql": _inc("s.child", None)}, NO_START)
    project = load_project(root, use_cache=False)
    assert project.start_ms("s.child") is None
    plan = build_plan(project, state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.child"].intervals == [(to_ms("2023-01-07"), to_ms("2023-01-08"))]


# A column's CSV text → the type pandas infers (SQLMesh maps int64 → BIGINT, float64 → DOUBLE,
# bool → BOOLEAN, object → text).
SEED_COLUMNS = {
    "ints": ["1", "2", "-3", "+4", "007"],
    "ints_with_gap": ["1", "", "3", "4", "5"],
    "floats": ["1.5", "2", "3e2", ".5", "-inf"],
    "bools": ["true", "False", "TRUE", "false", "True"],
    "bools_with_gap": ["true", "", "false", "true", "false"],
    "yes_no": ["yes", "no", "yes", "no", "yes"],
    "dates": ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04", "2020-01-05"],
    "mixed": ["1", "a", "2", "3", "4"],
    "all_missing": ["", "", "NULL", "NA", ""],
    "ones_zeros": ["1", "0", "1", "0", "1"],
    "huge": ["1", "99999999999999999999", "2", "3", "4"],
}
PANDAS_TO_SQLMESH = {"int64": "BIGINT", "float64": "DOUBLE", "bool": "BOOLEAN", "object": "STRING"}


def _seed_csv() -> str:
    names = list(SEED_COLUMNS)
    rows = zip(*SEED_COLUMNS.values())
    return ",".join(names) + "\n" + "".join(",".join(row) + "\n" for row in rows)


def _seed_project(root: Path, csv: str, columns: str = "") -> Path:
    return write_project(root, {
        "seeds/s.csv": csv,
        "models/s.sql": f"MODEL (name s.seed, kind SEED (path '../seeds/s.csv'){columns});",
    })


def test_a_seed_without_columns_gets_the_types_pandas_infers(tmp_path: Path) -> None:
    csv = _seed_csv()
    expected = {c: PANDAS_TO_SQLMESH[str(t)] for c, t in pd.read_csv(io.StringIO(csv)).dtypes.items()}
    project = load_project(_seed_project(tmp_path / "p", csv), use_cache=False)
    assert project.columns("s.seed") == expected
    assert expected["ints"] == "BIGINT" and expected["dates"] == "STRING"  # the table above means something


def test_inferred_types_are_cached_with_the_file(tmp_path: Path) -> None:
    root = _seed_project(tmp_path / "p", "id,x\n1,a\n")
    assert load_project(root).columns("s.seed") == {"id": "BIGINT", "x": "STRING"}
    assert load_project(root).columns("s.seed") == {"id": "BIGINT", "x": "STRING"}  # from the cache
    (root / "seeds" / "s.csv").write_text("id,x\n1.5,a\n")
    assert load_project(root).columns("s.seed") == {"id": "DOUBLE", "x": "STRING"}


def test_declared_columns_are_not_inferred(tmp_path: Path) -> None:
    root = _seed_project(tmp_path / "p", "id,x\n1,a\n", ",\n  columns (id STRING, x STRING)")
    assert load_project(root, use_cache=False).columns("s.seed") == {"id": "STRING", "x": "STRING"}


def test_a_header_only_seed_is_text(tmp_path: Path) -> None:
    assert str(pd.read_csv(io.StringIO("id,x\n")).dtypes["id"]) == "object"
    root = _seed_project(tmp_path / "p", "id,x\n")
    assert load_project(root, use_cache=False).columns("s.seed") == {"id": "STRING", "x": "STRING"}


def test_inferred_starts_take_the_earliest_of_parents_and_the_latest_interval() -> None:
    """With an execution time, a start-less node's latest interval counts too: a start-less monthly
    parent reaches back to its month's start, earlier than its daily child's latest day."""
    nodes = {
        "monthly": StartNode(None, "@monthly"),
        "day": StartNode(None, "@daily", parents=("monthly",)),
        "later": StartNode("2023-03-01", "@daily"),
        "both": StartNode(None, "@daily", parents=("later", "day", "unknown")),
    }
    at = to_ms("2023-02-10 05:00:00")
    found = inferred_starts(nodes, at)
    assert found["monthly"] == found["day"] == to_ms("2023-01-01")
    assert found["both"] == to_ms("2023-01-01")
    assert inferred_starts(nodes) == {"monthly": None, "day": None, "later": to_ms("2023-03-01"),
                                      "both": to_ms("2023-03-01")}
