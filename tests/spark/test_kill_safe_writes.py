"""The engine's kill-safe writes on real Spark (engine/writes.py, engine/generations.py), in process.

A crash is simulated by a journal that raises: the engine calls it just before a write's
destructive step, so raising there leaves the write exactly as a kill at that moment would (the
end-to-end kills are tests/cli/test_kill_points.py). What is checked: the table still holds its
previous rows, `writes.finish` completes the write exactly and only once, a half-committed append is
refused naming the table, a reader that listed the old files can still read them, dropped tables
leave no files behind, and the janitor deletes old generations but never what the journal needs.
"""

from __future__ import annotations

import os
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mesh_dagster.context import Context
from mesh_dagster.core.errors import EngineError
from mesh_dagster.core.models.merge import Upsert
from mesh_dagster.engine.catalog import SparkCatalog
from mesh_dagster.engine.statements import SparkStatements
from mesh_dagster.engine.writes import TableWrites
from mesh_dagster.execution.events import LogLines
from tests.project_builder import write_project

pytestmark = pytest.mark.spark


class Crash(Exception):
    """Raised by a journal: the process 'dies' right before the write's destructive step."""


def crash_when(ready: bool = True):
    """A journal keeping what it hears and crashing once the write is ready to be made (a switch
    tells it twice: before writing the new generation, and once it is complete)."""
    heard: list[dict[str, Any]] = []

    def journal(payload: dict[str, Any]) -> None:
        heard.append(payload)
        if payload["operation"] != "switch" or payload["ready"] == ready:
            raise Crash(payload["operation"])

    return journal, heard


def _rows(engine, table: str) -> list[tuple]:
    return sorted(engine.session.fetchall(f"SELECT * FROM {table}"))


def _path(location: str) -> Path:
    return Path(location.removeprefix("file:"))


def _table(engine, schema: str, name: str, rows: str, partitioned_by: str = "") -> str:
    engine.catalog.create_schema(schema)
    table = f"{schema}.{name}"
    engine.session.execute(f"CREATE TABLE {table} (id INT, v STRING) USING parquet {partitioned_by}")
    engine.session.execute(f"INSERT INTO {table} VALUES {rows}")
    return table


def test_an_upsert_crashed_before_its_switch_keeps_the_old_rows_and_is_finished_exactly_once(
        engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "t", "(1, 'a'), (2, 'b')")
    before = engine.catalog.table_location(table)
    journal, heard = crash_when(ready=True)
    with pytest.raises(Crash):
        engine.writes.upsert(table, "SELECT 2 AS id, 'B' AS v UNION ALL SELECT 3, 'c'", Upsert(("id",)), journal=journal)
    assert _rows(engine, table) == [(1, "a"), (2, "b")] and engine.catalog.table_location(table) == before
    payload = heard[-1]
    assert _path(payload["location"]).is_dir() and payload["previous"] == before  # the new generation, complete

    assert engine.writes.finish(payload) is True
    assert _rows(engine, table) == [(1, "a"), (2, "B"), (3, "c")]
    assert engine.catalog.table_location(table) == payload["location"]
    assert engine.writes.finish(payload) is True  # finishing again changes nothing
    assert _rows(engine, table) == [(1, "a"), (2, "B"), (3, "c")]
    assert _path(before).is_dir()  # the previous generation stays until it is retired and deleted


def test_a_rewrite_crashed_while_writing_its_generation_is_undone(engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "t", "(1, 'a')")
    journal, heard = crash_when(ready=False)
    with pytest.raises(Crash):
        engine.writes.rewrite_table(table, f"SELECT id, CONCAT(v, 'x') AS v FROM {table}", journal=journal)
    [payload] = heard
    engine.catalog.drop_locations([])  # nothing to delete: a no-op
    os.makedirs(_path(payload["location"]) / "_temporary")  # what a killed job would have left

    assert engine.writes.finish(payload) is False  # never switched to: deleted instead
    assert not _path(payload["location"]).exists()
    assert _rows(engine, table) == [(1, "a")]


def test_a_reader_that_listed_the_old_files_reads_them_until_the_old_generation_is_deleted(
        spark, engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "t", "(1, 'a')")
    reader = spark.newSession()
    assert reader.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0] == 1  # it has listed the files
    heard: list[dict[str, Any]] = []
    engine.writes.replace_table(table, "SELECT 1 AS id, 'a' AS v UNION ALL SELECT 2, 'b'", journal=heard.append)
    assert reader.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0] == 1  # the old content, no missing file
    engine.catalog.drop_locations([heard[-1]["previous"]])
    reader.catalog.refreshTable(table)
    assert reader.sql(f"SELECT COUNT(*) FROM {table}").collect()[0][0] == 2


def test_a_dropped_table_leaves_no_files_and_its_name_can_be_created_again(engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "t", "(1, 'a')")
    first = engine.catalog.table_location(table)
    engine.writes.replace_table(table, "SELECT 2 AS id, 'b' AS v")  # no journal: the previous generation goes at once
    current = engine.catalog.table_location(table)
    assert current != first and not _path(first).exists()
    engine.catalog.drop_table(table)
    assert not _path(current).exists() and not _path(first).exists()

    # Files at the default location of a table that does not exist (a crash between DROP TABLE and
    # the deletion of its first generation) would make Spark refuse the name.
    os.makedirs(_path(first))
    (_path(first) / "part-00000.parquet").write_bytes(b"left behind")
    engine.catalog.create_table(table, None, columns={"id": "INT", "v": "STRING"})
    assert _rows(engine, table) == []


def test_an_append_is_redone_when_it_did_not_commit_and_never_twice(engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "log", "(1, 'a')")
    journal, heard = crash_when()
    with pytest.raises(Crash):
        engine.writes.append(table, "SELECT 2 AS id, 'b' AS v UNION ALL SELECT 3, 'c'", journal=journal)
    [payload] = heard
    assert payload["before"] == 1 and payload["rows"] == 2 and _rows(engine, table) == [(1, "a")]
    # A killed INSERT leaves its committed tasks' files under `_temporary`: the next INSERT into the
    # table would commit them as its own. Finishing the append removes them first.
    data = next(f for f in _path(engine.catalog.table_location(table)).iterdir() if f.name.endswith(".parquet"))
    leftover = _path(engine.catalog.table_location(table)) / "_temporary" / "0" / "task_202001010000_0001_m_000000"
    leftover.mkdir(parents=True)
    shutil.copy(data, leftover / "part-99999-leftover.parquet")

    assert engine.writes.finish(payload) is True
    assert _rows(engine, table) == [(1, "a"), (2, "b"), (3, "c")]
    assert engine.writes.finish(payload) is True  # committed: nothing appended again
    assert _rows(engine, table) == [(1, "a"), (2, "b"), (3, "c")]
    engine.writes.discard(payload)
    assert not engine.catalog.table_exists(payload["staging"][0])


def test_a_half_committed_append_is_refused_naming_the_table(engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "log", "(1, 'a')")
    journal, heard = crash_when()
    with pytest.raises(Crash):
        engine.writes.append(table, "SELECT 2 AS id, 'b' AS v UNION ALL SELECT 3, 'c'", journal=journal)
    engine.session.execute(f"INSERT INTO {table} VALUES (2, 'b')")  # one of its two rows landed
    with pytest.raises(EngineError) as refused:
        engine.writes.finish(heard[-1])
    assert str(refused.value) == (
        f"An append to {table} was interrupted while Spark committed it: the table holds 2 rows, 1 before the "
        f"append and 3 after it, so some of its 2 rows are missing. Nothing more was written. Bring {table} back "
        "to 1 rows (the append is then redone) or to 3 (it is then recorded), and run again.")
    assert _rows(engine, table) == [(1, "a"), (2, "b")]  # nothing written


def test_a_partitioned_rewrite_is_redone_from_its_staged_rows(engine, unique_schema) -> None:
    table = _table(engine, unique_schema, "p", "(1, 'a'), (2, 'b')", "PARTITIONED BY (v)")
    journal, heard = crash_when()
    with pytest.raises(Crash):  # reads the table it rewrites: staged durably, then overwritten
        engine.writes.rewrite_table(table, f"SELECT id + 10 AS id, v FROM {table} WHERE v = 'b'", journal=journal)
    [payload] = heard
    assert payload["operation"] == "overwrite" and _rows(engine, table) == [(1, "a"), (2, "b")]
    assert engine.catalog.table_exists(payload["staging"][0])

    assert engine.writes.finish(payload) is True
    assert _rows(engine, table) == [(12, "b")]  # partition a, no longer produced, dropped
    assert engine.writes.finish(payload) is True
    assert _rows(engine, table) == [(12, "b")]
    engine.writes.discard(payload)
    assert not engine.catalog.table_exists(payload["staging"][0])


class SqlOnly(SparkStatements):
    """The engine's session as a Spark Connect client has it: no file system at hand."""

    @property
    def is_classic(self) -> bool:
        return False


def test_without_a_file_system_generations_are_deleted_with_spark_sql_only(spark, unique_schema, tmp_path) -> None:
    """A directory (with what it holds, nested ones too) is deleted by creating a database at it and
    dropping that database; one already gone is no error; no borrowed database is left."""
    catalog = SparkCatalog(SqlOnly(spark))
    catalog.create_schema(unique_schema)
    doomed, kept = tmp_path / "generation", tmp_path / "generation_kept"
    (doomed / "ds=2020-01-01").mkdir(parents=True)
    (doomed / "part-00000.parquet").write_text("x")
    (doomed / "ds=2020-01-01" / "part-00001.parquet").write_text("y")
    kept.mkdir()
    catalog.drop_locations([f"file:{doomed}", f"file:{tmp_path / 'never_written'}"])
    assert not doomed.exists() and not (tmp_path / "never_written").exists() and kept.is_dir()
    assert not [d for d in spark.catalog.listDatabases() if d.name.startswith("__mesh_tmp_")]


# -- through the scheduler and the janitor ------------------------------------------------------

MODEL = """
MODEL (name {s}.latest, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1), partitioned_by grp);
SELECT id, id % 2 AS grp, CAST(@start_ds AS DATE) AS seen
FROM (SELECT EXPLODE(SEQUENCE(DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01'),
                              DATEDIFF(CAST(@start_ds AS DATE), DATE '2020-01-01') + 3)) AS id) AS t
"""


def test_a_failed_write_is_finished_by_the_next_run_and_the_janitor_keeps_its_staged_rows(
        engine, unique_schema, tmp_path, monkeypatch) -> None:
    root = write_project(tmp_path / "p", {"models/latest.sql": MODEL.format(s=unique_schema)})
    ctx = Context(root, engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))  # day 1: ids 0-3
        def crash(self, table, *args, **kwargs):
            raise Crash("the process died before its overwrite")

        with monkeypatch.context() as patched:
            patched.setattr(TableWrites, "_overwrite", crash)
            with pytest.raises(Crash):
                ctx.runs.run(execution_time="2020-01-03")  # day 2: ids 1-4, journaled, not written
        [pending] = ctx.state.journal.pending_writes()
        staging = pending.payload["staging"][0]

        ctx.upkeep.janitor(ignore_ttl=True)
        assert engine.catalog.table_exists(staging)  # the journal still needs it

        lines = LogLines()
        assert ctx.runs.run(execution_time="2020-01-03", listener=lines) == 1
        assert f"{unique_schema}.latest: finished the write of insert 2020-01-02 - 2020-01-02 that an interrupted " \
               "run left" in lines.lines
        assert sorted(engine.session.fetchall(f"SELECT id, seen FROM {unique_schema}.latest")) == [
            (0, date(2020, 1, 1)), *((i, date(2020, 1, 2)) for i in range(1, 5))]
        assert ctx.state.journal.pending_writes() == [] and not engine.catalog.table_exists(staging)
    finally:
        ctx.close()
        engine.catalog.drop_schema(f"mesh__{unique_schema}", cascade=True)


def test_the_janitor_deletes_the_generations_rewrites_left(engine, unique_schema, tmp_path) -> None:
    model = MODEL.format(s=unique_schema).replace(", partitioned_by grp", "")
    root = write_project(tmp_path / "p", {"models/latest.sql": model})
    ctx = Context(root, engine=engine)
    try:
        ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-05"))  # four days: four switches
        table = ctx.plans.plan("prod", allow_empty=True).snapshots[f"{unique_schema}.latest"].table_name
        current = _path(engine.catalog.table_location(table))
        generations = sorted(p.name for p in current.parent.iterdir() if p.name.startswith(table.split(".")[1]))
        assert len(generations) == 2 and current.name in generations  # each switch deleted the older ones
        assert [loc for _, loc in ctx.state.journal.retired_locations(table)] == [
            f"file:{current.parent / (set(generations) - {current.name}).pop()}"]

        ctx.upkeep.janitor()
        assert [p.name for p in current.parent.iterdir() if p.name.startswith(table.split(".")[1])] == [current.name]
        assert ctx.state.journal.retired_locations() == []
        assert len(engine.session.fetchall(f"SELECT * FROM {unique_schema}.latest")) == 7  # ids 0-6
    finally:
        ctx.close()
        engine.catalog.drop_schema(f"mesh__{unique_schema}", cascade=True)
