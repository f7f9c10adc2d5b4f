"""A table swapped for a new layout on real Spark (engine/swaps.py), in process (issue 34, point 1).

A crash is a journal that raises (before the table is touched) or a step of the swap that raises
(the end-to-end kills are tests/cli/test_killed_swaps.py). What is checked: a swap keeps the
rows and takes the new types and partitioning; crashed before the drop, the table is untouched and
nothing is left; killed after the drop, `writes.finish` renames the staged table into place, exactly
once, even over files a crash left at the table's location; a table that lost rows in an
interrupted rename is refused, naming it, and nothing more is written.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mesh_dagster.core.errors import EngineError
from mesh_dagster.engine import swaps
from mesh_dagster.engine.adapter import SparkEngine

pytestmark = pytest.mark.spark


class Crash(Exception):
    """Raised at a step of the swap: the process 'dies' there."""


def _table(engine: SparkEngine, schema: str) -> str:
    engine.catalog.create_schema(schema)
    table = f"{schema}.t"
    engine.session.execute(f"CREATE TABLE {table} (id INT, v INT, ds DATE) USING parquet PARTITIONED BY (ds)")
    engine.session.execute(f"INSERT INTO {table} VALUES (1, 10, DATE '2020-01-01'), (2, 20, DATE '2020-01-02')")
    return table


def _rows(engine: SparkEngine, table: str) -> list[tuple]:
    return sorted(engine.session.fetchall(f"SELECT * FROM {table}"))


def _staged(engine: SparkEngine, schema: str) -> list[str]:
    return [r[1] for r in engine.session.fetchall(f"SHOW TABLES IN {schema}") if r[1].startswith("__mesh_tmp")]


def _killed_after_the_drop(engine: SparkEngine, table: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The journaled payload of a retype to BIGINT stopped at its `dropped` step, as a kill leaves it."""
    def kill_point(step: str, name: str) -> None:
        if step == "dropped":
            raise Crash()

    monkeypatch.setattr(swaps, "kill_point", kill_point)
    heard: list[dict[str, Any]] = []
    with pytest.raises(Crash):
        engine.writes.retype_table(table, {"id": "int", "v": "bigint", "ds": "date"}, journal=heard.append)
    monkeypatch.undo()
    [payload] = heard
    return payload


def test_a_retype_keeps_every_row_and_the_partitioning(engine, unique_schema) -> None:
    table = _table(engine, unique_schema)
    heard: list[dict[str, Any]] = []
    engine.writes.retype_table(table, {"id": "int", "v": "bigint", "ds": "date"}, journal=heard.append)
    assert engine.catalog.columns(table) == {"id": "int", "v": "bigint", "ds": "date"}
    assert engine.catalog.partition_columns(table) == ["ds"]
    assert [r[:2] for r in _rows(engine, table)] == [(1, 10), (2, 20)]
    assert [(p["operation"], p["rows"], p["committed"], p["completes_write"]) for p in heard] == [
        ("swap", 2, False, False), ("swap", 2, True, False)]  # before the drop, and once renamed
    assert _staged(engine, unique_schema) == []


def test_a_retype_crashed_before_the_drop_leaves_the_table_as_it_was(engine, unique_schema) -> None:
    table = _table(engine, unique_schema)

    def journal(payload: dict[str, Any]) -> None:
        raise Crash()

    with pytest.raises(Crash):
        engine.writes.retype_table(table, {"id": "int", "v": "bigint", "ds": "date"}, journal=journal)
    assert engine.catalog.columns(table)["v"] == "int" and [r[:2] for r in _rows(engine, table)] == [(1, 10), (2, 20)]
    assert _staged(engine, unique_schema) == []


def test_a_swap_killed_after_the_drop_is_finished_from_its_staged_rows_once(engine, unique_schema,
                                                                           monkeypatch) -> None:
    table = _table(engine, unique_schema)
    payload = _killed_after_the_drop(engine, table, monkeypatch)
    assert not engine.catalog.table_exists(table) and _staged(engine, unique_schema) == [payload["staging"][0].split(".")[1]]
    # What a crash inside DROP TABLE leaves: files at the table's location, which no table owns.
    described = dict(engine.session.fetchall(f"DESCRIBE SCHEMA EXTENDED {unique_schema}"))
    location = Path(described["Location"].removeprefix("file:"))
    (location / "t").mkdir(parents=True)
    (location / "t" / "part-left-behind").write_text("x")

    assert engine.writes.finish(payload) is False  # a migration: the write it preceded is still to make
    assert engine.catalog.columns(table)["v"] == "bigint" and engine.catalog.partition_columns(table) == ["ds"]
    assert [r[:2] for r in _rows(engine, table)] == [(1, 10), (2, 20)]
    assert engine.writes.finish(payload) is False  # again: nothing changes
    assert [r[:2] for r in _rows(engine, table)] == [(1, 10), (2, 20)] and _staged(engine, unique_schema) == []


def test_a_rename_that_lost_rows_is_refused_naming_the_table(engine, unique_schema, monkeypatch) -> None:
    table = _table(engine, unique_schema)
    payload = _killed_after_the_drop(engine, table, monkeypatch)
    engine.session.execute(f"ALTER TABLE {payload['staging'][0]} RENAME TO {table}")
    engine.session.execute(f"TRUNCATE TABLE {table}")  # the metastore renamed, the files did not follow
    with pytest.raises(EngineError) as refused:
        engine.writes.finish(payload)
    assert str(refused.value) == (
        f"Cannot finish the interrupted rewrite of {table}: it was being renamed from {payload['staging'][0]} when "
        "the process died, and holds 0 of the 2 staged rows (the others may still be in the staging table's "
        "directory). Nothing more was written: restore them, or restate the model to rebuild it.")
    assert _rows(engine, table) == []


def test_a_swap_whose_table_and_staged_rows_are_both_gone_leaves_nothing_to_finish(engine, unique_schema,
                                                                                  monkeypatch) -> None:
    table = _table(engine, unique_schema)
    payload = _killed_after_the_drop(engine, table, monkeypatch)
    engine.catalog.drop_table(payload["staging"][0])
    assert engine.writes.finish(payload) is False and not engine.catalog.table_exists(table)


def test_a_full_rewrite_under_a_new_partitioning_swaps_the_table(engine, unique_schema) -> None:
    table = _table(engine, unique_schema)
    heard: list[dict[str, Any]] = []
    engine.writes.replace_table(table, "SELECT 3 AS id, CAST(30 AS BIGINT) AS v, DATE '2020-01-03' AS ds", partitioned_by=(),
                                journal=heard.append)
    assert engine.catalog.columns(table) == {"id": "int", "v": "bigint", "ds": "date"} and engine.catalog.partition_columns(table) == []
    assert _rows(engine, table) == [(3, 30, date(2020, 1, 3))]
    assert [p["completes_write"] for p in heard] == [True, True]
