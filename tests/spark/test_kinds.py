"""Every model kind applied on Spark through Context, and the properties that shape evaluation:
time columns of every type, column descriptions, batch concurrency, materialized views.

One module on the shared session: each test is a small project applied once or twice.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import AuditError
from mesh_dagster.engine.adapter import SparkEngine
from mesh_dagster.engine.catalog import SparkCatalog
from mesh_dagster.engine.writes import TableWrites
from mesh_dagster.execution.events import ApplyListener

pytestmark = pytest.mark.spark


@pytest.fixture
def schema(engine):
    name = f"k_{uuid.uuid4().hex[:8]}"
    yield name
    for s in (name, f"{name}__dev", f"mesh__{name}", f"{name}_raw"):
        engine.catalog.drop_schema(s, cascade=True)


def _rows(engine: SparkEngine, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in engine.session.fetchall(sql)), key=repr)


def _kind_of(engine: SparkEngine, physical: str) -> str:
    schema, _, table = physical.partition(".")
    return engine.catalog.list_objects(schema)[table]


# -- every kind ---------------------------------------------------------------------------------


def test_every_kind_is_applied_and_read_through_the_environment_views(tmp_path, engine, schema) -> None:
    raw = f"{schema}_raw"
    engine.catalog.create_schema(raw)
    engine.session.execute(f"CREATE TABLE {raw}.orders USING parquet AS SELECT * FROM VALUES "
                           "(1, 10, DATE'2020-01-01'), (2, 20, DATE'2020-01-02'), (3, 30, DATE'2020-01-02') AS t(id, amount, ds)")
    root = write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}.orders\n  columns:\n    id: int\n    amount: int\n    ds: date\n",
        "seeds/items.csv": "item_id,label\n10,ten\n20,twenty\n30,thirty\n",
        "models/items.sql": f"""
            MODEL (name {schema}.items, kind SEED (path '../seeds/items.csv'), columns (item_id INT, label STRING));
            """,
        "models/orders.sql": f"""
            MODEL (name {schema}.orders, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');

            SELECT id, amount, ds FROM {raw}.orders WHERE ds BETWEEN @start_ds AND @end_ds
            """,
        "models/labelled.sql": f"""
            MODEL (name {schema}.labelled, kind EMBEDDED);

            SELECT o.id, o.amount, i.label FROM {schema}.orders AS o JOIN {schema}.items AS i ON o.amount = i.item_id
            """,
        "models/totals.sql": f"""
            MODEL (name {schema}.totals, kind FULL);

            SELECT label, SUM(amount) AS total FROM {schema}.labelled GROUP BY label
            """,
        "models/big.sql": f"""
            MODEL (name {schema}.big, kind VIEW);

            SELECT label FROM {schema}.totals WHERE total > 15
            """,
        "models/default_kind.sql": f"""
            MODEL (name {schema}.default_kind);

            SELECT COUNT(*) AS n FROM {schema}.items
            """,
        "models/per_day.sql": f"""
            MODEL (name {schema}.per_day, kind VIEW (materialized true));

            SELECT ds, COUNT(*) AS orders FROM {schema}.orders GROUP BY ds
            """,
    })
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-03")
    ctx.reviews.apply(plan)

    assert _rows(engine, f"SELECT * FROM {schema}.items") == [(10, "ten"), (20, "twenty"), (30, "thirty")]
    assert _rows(engine, f"SELECT id, amount FROM {schema}.orders") == [(1, 10), (2, 20), (3, 30)]
    assert _rows(engine, f"SELECT * FROM {schema}.totals") == [("ten", 10), ("thirty", 30), ("twenty", 20)]
    assert _rows(engine, f"SELECT * FROM {schema}.big") == [("thirty",), ("twenty",)]
    assert _rows(engine, f"SELECT * FROM {schema}.default_kind") == [(3,)]
    assert _rows(engine, f"SELECT CAST(ds AS STRING), orders FROM {schema}.per_day") == [
        ("2020-01-01", 1), ("2020-01-02", 2)]
    # Physical objects: views stay views, a materialized view is a table; EMBEDDED and EXTERNAL have none.
    tables = {name: plan.snapshots[f"{schema}.{name}"].table_name for name in ("big", "default_kind", "per_day")}
    assert _kind_of(engine, tables["big"]) == "view" and _kind_of(engine, tables["default_kind"]) == "view"
    assert _kind_of(engine, tables["per_day"]) == "table"
    assert not engine.catalog.table_exists(f"{schema}.labelled") and not engine.catalog.table_exists(f"{schema}.orders_raw")


# -- time columns -------------------------------------------------------------------------------

# Two rows per day over three days, for each time column type; the queries return every day, so
# each write must keep exactly its interval's rows, and the audit must see exactly those.
_TIME_MODELS = {
    "int_ds": ("ds, '%Y%m%d'", "", "(1, 20200101), (2, 20200101), (3, 20200102), (4, 20200102), "
                                   "(5, 20200103), (6, 20200103)"),
    "str_ds": ("ds, '%Y/%m/%d'", "columns (id INT, ds STRING),", "(1, '2020/01/01'), (2, '2020/01/01'), "
               "(3, '2020/01/02'), (4, '2020/01/02'), (5, '2020/01/03'), (6, '2020/01/03')"),
    "date_ds": ("ds", "", "(1, DATE'2020-01-01'), (2, DATE'2020-01-01'), (3, DATE'2020-01-02'), "
                          "(4, DATE'2020-01-02'), (5, DATE'2020-01-03'), (6, DATE'2020-01-03')"),
    "ts_ds": ("ds", "", "(1, TIMESTAMP'2020-01-01 00:00:00'), (2, TIMESTAMP'2020-01-01 23:59:59.999999'), "
                        "(3, TIMESTAMP'2020-01-02 00:00:00'), (4, TIMESTAMP'2020-01-02 12:00:00'), "
                        "(5, TIMESTAMP'2020-01-03 00:00:00.000001'), (6, TIMESTAMP'2020-01-03 23:00:00')"),
}


def test_writes_and_audits_bound_every_time_column_type_alike(tmp_path, engine, schema) -> None:
    files = {"audits/two_rows.sql": "AUDIT (name two_rows);\n"
                                    "SELECT 1 FROM (SELECT COUNT(*) AS n FROM @this_model) AS c WHERE n <> 2\n"}
    for name, (time_column, columns, values) in _TIME_MODELS.items():
        files[f"models/{name}.sql"] = f"""
            MODEL (
              name {schema}.{name},
              kind INCREMENTAL_BY_TIME_RANGE (time_column ({time_column}), batch_size 1),
              {columns}
              start '2020-01-01',
              audits (two_rows)
            );

            SELECT id, ds FROM VALUES {values} AS t(id, ds)
            """
    ctx = Context(write_project(tmp_path / "p", files), engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-04")
    ctx.reviews.apply(plan)  # each daily batch's audit saw exactly its two rows, or the apply would have failed
    for name in _TIME_MODELS:
        assert _rows(engine, f"SELECT id FROM {schema}.{name}") == [(i,) for i in range(1, 7)], name
        audit = ctx.inspection.audit([f"{schema}.{name}"])
        assert audit == [(f"{schema}.{name}", "two_rows", 1, True)]  # the whole table has 6 rows, not 2


# -- column descriptions -----------------------------------------------------------------------


def _comments(engine: SparkEngine, name: str) -> dict[str, str | None]:
    return {r[0]: r[2] for r in engine.session.fetchall(f"DESCRIBE TABLE {name}") if r[0] and not r[0].startswith("#")}


def test_column_descriptions_are_spark_column_comments(tmp_path, engine, schema) -> None:
    root = write_project(tmp_path / "p", {
        "seeds/s.csv": "id,name\n1,a\n",
        "models/s.sql": f"""
            MODEL (name {schema}.s, kind SEED (path '../seeds/s.csv'), columns (id INT, name STRING),
                   column_descriptions (id = 'the key'));
            """,
        "models/f.sql": f"""
            MODEL (name {schema}.f, kind FULL, column_descriptions (id = 'order id', name = 'a "quoted" name'));

            SELECT id, name FROM {schema}.s
            """,
        "models/v.sql": f"""
            MODEL (name {schema}.v, column_descriptions (name = 'upper name'));

            SELECT id, UPPER(name) AS name FROM {schema}.f
            """,
    })
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-02")
    ctx.reviews.apply(plan)
    ctx.reviews.apply(ctx.plans.plan("dev", execution_time="2020-01-02", include_unmodified=True))
    for name, expected in (("s", {"id": "the key", "name": None}),
                           ("f", {"id": "order id", "name": 'a "quoted" name'}),
                           ("v", {"id": "order id", "name": "upper name"})):  # Spark carries f.id's over
        physical = plan.snapshots[f"{schema}.{name}"].table_name
        for obj in (physical, f"{schema}.{name}", f"{schema}__dev.{name}"):
            assert _comments(engine, obj) == expected, obj
    assert _rows(engine, f"SELECT * FROM {schema}__dev.v") == [(1, "A")]


# -- batch concurrency ---------------------------------------------------------------------------


class MeetingWrites(TableWrites):
    """The real writes, except that interval writes wait for each other in pairs: batches that were
    not evaluated at the same time could never meet, so the apply would fail (no clock involved)."""

    def __init__(self, catalog: SparkCatalog, parties: int):
        super().__init__(catalog)
        self.meeting = threading.Barrier(parties, timeout=60)
        self.threads: set[str] = set()

    def insert_overwrite_interval(self, *args, **kwargs) -> None:
        self.threads.add(threading.current_thread().name)
        self.meeting.wait()
        super().insert_overwrite_interval(*args, **kwargs)


def _meeting(spark, parties: int) -> tuple[SparkEngine, MeetingWrites]:
    """The real engine, with `MeetingWrites` for its writes."""
    engine = SparkEngine(spark)
    engine.writes = writes = MeetingWrites(engine.catalog, parties)
    return engine, writes


class Recorder(ApplyListener):
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.threads: set[str] = set()

    def backfill_start(self, total_batches: int) -> None:
        self.events.append(("start", total_batches))

    def batch_done(self, name, index, count, description, seconds, audits_passed, audits_failed) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append(("batch", name.split(".")[-1], index, count, description, audits_passed))

    def backfill_done(self, total_batches: int) -> None:
        self.events.append(("done", total_batches))


def _concurrent_project(tmp_path, schema: str, bad_day: str = "1999-01-01"):
    return write_project(tmp_path / "p", {
        "models/daily.sql": f"""
            MODEL (
              name {schema}.daily,
              kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1, batch_concurrency 2),
              start '2020-01-01',
              audits (forall(criteria := (ds <> DATE'{bad_day}')))
            );

            SELECT id, ds FROM VALUES (1, DATE'2020-01-01'), (2, DATE'2020-01-02'), (3, DATE'2020-01-03'),
                                      (4, DATE'2020-01-04') AS t(id, ds)
            WHERE ds BETWEEN @start_ds AND @end_ds
            """,
    })


def test_batches_of_one_model_run_concurrently_and_report_progress(tmp_path, spark, schema) -> None:
    engine, writes = _meeting(spark, parties=2)
    ctx = Context(_concurrent_project(tmp_path, schema), engine=engine)
    listener = Recorder()
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-05"), listener)
    assert len(writes.threads) == 2 and threading.current_thread().name not in writes.threads
    assert listener.threads == {threading.current_thread().name}  # progress is reported from one thread
    assert listener.events[0] == ("start", 4) and listener.events[-1] == ("done", 4)
    batches = sorted(e[1:] for e in listener.events[1:-1])
    assert batches == [("daily", i, 4, f"insert 2020-01-0{i} - 2020-01-0{i}", 1) for i in range(1, 5)]
    assert _rows(engine, f"SELECT id FROM {schema}.daily") == [(1,), (2,), (3,), (4,)]


def test_concurrent_batches_of_a_materialization_create_the_table_once(tmp_path, spark, schema) -> None:
    """Dagster's path: no apply created the table first, the concurrent batches must not race to."""
    engine, writes = _meeting(spark, parties=2)
    ctx = Context(_concurrent_project(tmp_path, schema), engine=engine)
    [result] = list(ctx.runs.materialize([f"{schema}.daily"], "2020-01-01", "2020-01-05", environment="dev",
                                    execution_time="2020-01-05"))
    assert result.succeeded and len(writes.threads) == 2
    assert sorted(result.recorded) == [(1577836800000 + i * 86_400_000, 1577836800000 + (i + 1) * 86_400_000)
                                       for i in range(4)]
    assert _rows(engine, f"SELECT id FROM {result.snapshot.table_name}") == [(1,), (2,), (3,), (4,)]


def test_a_failing_concurrent_batch_records_nothing_of_its_own(tmp_path, engine, schema) -> None:
    ctx = Context(_concurrent_project(tmp_path, schema, bad_day="2020-01-02"), engine=engine)
    plan = ctx.plans.plan(execution_time="2020-01-05")
    with pytest.raises(AuditError, match="Audit 'forall' failed"):
        ctx.reviews.apply(plan)
    snap = plan.snapshots[f"{schema}.daily"]
    recorded = ctx.state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, [])
    day = 86_400_000
    jan2 = 1577836800000 + day
    assert all(end <= jan2 or start >= jan2 + day for start, end in recorded), recorded  # never Jan 2
    assert ctx.state.environments.get_environment("prod") is None  # nothing promoted
    assert not engine.catalog.table_exists(f"{schema}.daily")


# -- materialized views --------------------------------------------------------------------------


def _materialized_project(tmp_path, engine: SparkEngine, schema: str):
    raw = f"{schema}_raw"
    engine.catalog.create_schema(raw)
    engine.session.execute(f"CREATE TABLE {raw}.src USING parquet AS SELECT 1 AS id")
    return write_project(tmp_path / "p", {
        "external_models.yaml": f"- name: {raw}.src\n  columns:\n    id: int\n",
        "models/up.sql": f"MODEL (name {schema}.up, kind FULL);\n\nSELECT 1 AS id\n",
        "models/mv.sql": f"""
            MODEL (name {schema}.mv, kind VIEW (materialized true));

            SELECT s.id FROM {raw}.src AS s JOIN {schema}.up AS u ON s.id >= u.id
            """,
    })


def test_a_materialized_view_is_a_table_with_a_new_version_when_a_parent_has_one(tmp_path, engine, schema) -> None:
    root = _materialized_project(tmp_path, engine, schema)
    ctx = Context(root, engine=engine)
    first = ctx.plans.plan(execution_time="2020-01-02")
    ctx.reviews.apply(first)
    mv = f"{schema}.mv"
    assert _kind_of(engine, first.snapshots[mv].table_name) == "table"
    engine.session.execute(f"INSERT INTO {schema}_raw.src VALUES (2)")
    assert _rows(engine, f"SELECT id FROM {mv}") == [(1,)]  # a table holds the result, not a view

    up = root / "models" / "up.sql"
    up.write_text(up.read_text().replace("SELECT 1 AS id", "SELECT 2 AS id"))
    ctx.reload()
    second = ctx.plans.plan(execution_time="2020-01-02")
    assert second.snapshots[mv].version != first.snapshots[mv].version  # built on the parent's new table
    ctx.reviews.apply(second)
    assert _rows(engine, f"SELECT id FROM {mv}") == [(2,)]
    assert _kind_of(engine, second.snapshots[mv].table_name) == "table"


def test_a_materialized_view_is_rebuilt_by_each_run(tmp_path, engine, schema) -> None:
    """A materialized VIEW follows its cron in `mesh run`: rebuilt whole when due, like FULL."""
    ctx = Context(_materialized_project(tmp_path, engine, schema), engine=engine)
    ctx.reviews.apply(ctx.plans.plan(execution_time="2020-01-02"))
    engine.session.execute(f"INSERT INTO {schema}_raw.src VALUES (2)")
    assert _rows(engine, f"SELECT id FROM {schema}.mv") == [(1,)]
    assert ctx.runs.run(execution_time="2020-01-03") == 2  # up and mv: both crons are due again, both rebuilt
    assert _rows(engine, f"SELECT id FROM {schema}.mv") == [(1,), (2,)]
    assert ctx.runs.run(execution_time="2020-01-03") == 0
