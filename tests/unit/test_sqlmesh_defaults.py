"""Two SQLMesh defaults that decide data (issue 22): a model without `start` is backfilled from
the plan's start (the earliest start of the project's models, or `model_defaults.start`), and a
seed without `columns` gets the types pandas' CSV reader infers (SQLMesh reads seeds with pandas).
Expectations are SQLMesh's documented behaviour; the seed cases are checked against pandas itself.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from project_builder import write_project

from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.state.store import StateStore

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


@pytest.fixture
def state(tmp_path):
    with StateStore(f"sqlite:///{tmp_path / 'state.db'}") as store:
        yield store


def test_a_model_without_start_is_backfilled_from_the_earliest_start(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-01"),
        "models/b.sql": _inc("s.b", "2023-01-04"),
        "models/child.sql": _inc("s.child", None, "s.a"),
    }, NO_START)
    project = load_project(root, use_cache=False)
    assert project.default_start == "2023-01-01"
    plan = build_plan(project, state, "prod", execution_time="2023-01-08 00:00:00")
    # like its parent, the start-less child holds 7 days of history, not the last day only
    assert plan.backfills["s.child"].intervals == [(to_ms("2023-01-01"), to_ms("2023-01-08"))]
    assert plan.backfills["s.a"].intervals == plan.backfills["s.child"].intervals


def test_model_defaults_start_wins_over_the_earliest_model_start(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {
        "models/a.sql": _inc("s.a", "2023-01-01"),
        "models/child.sql": _inc("s.child", None, "s.a"),
    }, NO_START + "  start: '2023-01-05'\n")
    plan = build_plan(load_project(root, use_cache=False), state, "prod", execution_time="2023-01-08 00:00:00")
    assert plan.backfills["s.child"].intervals == [(to_ms("2023-01-05"), to_ms("2023-01-08"))]


def test_without_any_start_a_model_has_its_latest_interval_only(tmp_path: Path, state) -> None:
    root = write_project(tmp_path / "p", {"models/child.sql": _inc("s.child", None)}, NO_START)
    project = load_project(root, use_cache=False)
    assert project.default_start is None
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
