"""INCREMENTAL_BY_UNIQUE_KEY, INCREMENTAL_BY_PARTITION and INCREMENTAL_UNMANAGED without Spark:
what each reads (in the model's dialect, kept as Spark SQL), every refusal with its file and line,
how a change of kind or of their settings is categorised, which engine call each batch makes (on
the in-memory engine), and that rewriting writes hold their table's lock in the state store."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import (
    FullKind,
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalUnmanagedKind,
)
from mesh_dagster.core.models.merge import Upsert
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.snapshots.snapshot import Snapshot, SnapshotFingerprint, hash_values
from mesh_dagster.execution.locking import describe_lock
from tests.execution.fake_engine import FakeEngine

QUERY = "SELECT 1 AS id, 'a' AS email, 2 AS v, CAST('2020-01-01' AS DATE) AS ds, 'eu' AS region"


def _load(tmp_path: Path, kind: str, props: str = "", query: str = QUERY, config: str = CONFIG) -> Model:
    root = write_project(tmp_path / "p", {"models/m.sql": f"MODEL (\n  name s.m,\n  kind {kind}{props}\n);\n{query}\n"},
                         config)
    return load_project(root, use_cache=False).models["s.m"]


def _refused(tmp_path: Path, kind: str, props: str = "", query: str = QUERY) -> str:
    with pytest.raises(ModelError) as e:
        _load(tmp_path, kind, props, query)
    return str(e.value)


# -- what each kind reads --------------------------------------------------------------------


def test_unique_key_properties_are_read_in_the_model_dialect_and_kept_as_spark_sql(tmp_path):
    model = _load(tmp_path, """INCREMENTAL_BY_UNIQUE_KEY (
    unique_key (id, email::TEXT),
    when_matched (WHEN MATCHED AND source.v::INT > 0 THEN UPDATE SET target.v = source.v, target.ds = source.ds),
    merge_filter target.ds > '2020-01-01'::DATE,
    batch_size 2,
    lookback 1,
    batch_concurrency 1
  )""", config=CONFIG.replace("dialect: spark", "dialect: duckdb"))
    kind = model.kind
    assert isinstance(kind, IncrementalByUniqueKeyKind)
    assert kind.unique_key == ("id", "CAST(email AS STRING)")
    assert kind.when_matched == ("WHEN MATCHED AND CAST(source.v AS INT) > 0 THEN UPDATE SET target.v = source.v, "
                                 "target.ds = source.ds")
    assert kind.merge_filter == "target.ds > CAST('2020-01-01' AS DATE)"
    assert (model.batch_size, model.lookback, model.batch_concurrency) == (2, 1, 1)
    assert kind.upsert == Upsert(kind.unique_key, kind.when_matched, kind.merge_filter)
    assert kind.named_columns() == {"unique_key": ["id", "email"], "when_matched": ["v", "ds"],
                                    "merge_filter": ["ds"]}
    # written differently, the same properties: the same kind (and fingerprint)
    again = _load(tmp_path / "again", """INCREMENTAL_BY_UNIQUE_KEY (unique_key [id, CAST(email AS VARCHAR)],
    when_matched WHEN MATCHED AND CAST(source.v AS INT) > 0 THEN UPDATE SET target.v = source.v,
    merge_filter (target.ds > CAST('2020-01-01' AS DATE)), batch_size 2, lookback 1)""")
    assert again.kind.model_dump(exclude={"when_matched"}) == kind.model_dump(exclude={"when_matched"})


def test_a_single_column_or_expression_key(tmp_path):
    assert _load(tmp_path, "INCREMENTAL_BY_UNIQUE_KEY (unique_key id)").kind.unique_key == ("id",)
    assert _load(tmp_path / "e", "INCREMENTAL_BY_UNIQUE_KEY (unique_key CONCAT(id, email))").kind.unique_key == (
        "CONCAT(id, email)",)


def test_by_partition_and_unmanaged_defaults(tmp_path):
    part = _load(tmp_path, "INCREMENTAL_BY_PARTITION", ",\n  partitioned_by region")
    assert isinstance(part.kind, IncrementalByPartitionKind)
    assert part.forward_only and not part.disable_restatement and part.effective_partitioned_by == ["region"]
    assert _load(tmp_path / "f", "INCREMENTAL_BY_PARTITION (forward_only true)", ",\n  partitioned_by region").kind \
        == part.kind
    unmanaged = _load(tmp_path / "u", "INCREMENTAL_UNMANAGED")
    assert isinstance(unmanaged.kind, IncrementalUnmanagedKind) and not unmanaged.kind.insert_overwrite
    assert unmanaged.forward_only and unmanaged.disable_restatement
    assert (unmanaged.batch_size, unmanaged.lookback) == (None, 0)
    opened = _load(tmp_path / "o", "INCREMENTAL_UNMANAGED (insert_overwrite true, disable_restatement false)")
    assert opened.kind.insert_overwrite and not opened.disable_restatement


# -- refusals: message and file:line ---------------------------------------------------------

UK = "INCREMENTAL_BY_UNIQUE_KEY ({})"


@pytest.mark.parametrize("kind, props, expected", [
    ("INCREMENTAL_BY_UNIQUE_KEY", "", "models/m.sql:3: INCREMENTAL_BY_UNIQUE_KEY models need a unique_key"),
    (UK.format("when_matched (WHEN MATCHED THEN DELETE)"), "",
     "models/m.sql:3: INCREMENTAL_BY_UNIQUE_KEY models need a unique_key"),
    (UK.format("unique_key (id, nope)"), "",
     "models/m.sql:3: unique_key names 'nope', not an output column of s.m (it outputs: id, email, v, ds, region)"),
    (UK.format("unique_key id,\n    when_matched (WHEN MATCHED THEN UPDATE SET target.gone = source.v)"), "",
     "models/m.sql:3: when_matched names 'gone', not an output column of s.m"),
    (UK.format("unique_key id,\n    merge_filter source.ds > target.missing"), "",
     "models/m.sql:3: merge_filter names 'missing', not an output column of s.m"),
    (UK.format("unique_key id,\n    batch_concurrency 2"), "",
     "models/m.sql:4: batch_concurrency is always 1 for INCREMENTAL_BY_UNIQUE_KEY models"),
    (UK.format("unique_key ()"), "", "models/m.sql:3: unique_key is written `unique_key id`"),
    (UK.format("unique_key source.id"), "", "models/m.sql:3: unique_key 'source.id' must name the row's columns "
                                             "unqualified (got source.id)"),
    (UK.format("unique_key MAX(id)"), "", "models/m.sql:3: unique_key 'MAX(id)' must be computed from one row"),
    (UK.format("unique_key 1"), "", "models/m.sql:3: unique_key '1' names no column"),
    (UK.format("unique_key @key"), "", "models/m.sql:3: Macros (@...) in unique_key are not supported"),
    (UK.format("unique_key id,\n    when_matched (WHEN NOT MATCHED THEN INSERT *)"), "",
     "models/m.sql:3: when_matched takes WHEN MATCHED clauses only, got 'WHEN NOT MATCHED THEN INSERT *'"),
    (UK.format("unique_key id,\n    when_matched (WHEN MATCHED THEN UPDATE SET target.v = v)"), "",
     "models/m.sql:3: when_matched must name columns as source.<column> or target.<column>, got v"),
    (UK.format("unique_key id,\n    when_matched (WHEN MATCHED THEN UPDATE SET source.v = target.v)"), "",
     "models/m.sql:3: when_matched can only set columns of target, got 'source.v = target.v'"),
    (UK.format("unique_key id,\n    when_matched (UPDATE SET target.v = source.v)"), "",
     "models/m.sql:3: Cannot read when_matched:"),
    (UK.format("unique_key id,\n    when_matched (WHEN MATCHED AND source.ds > @start_ds THEN DELETE)"), "",
     "models/m.sql:3: Macros (@...) in when_matched are not supported by mesh_dagster yet"),
    (UK.format("unique_key id,\n    merge_filter ds > '2020-01-01'"), "",
     "models/m.sql:3: merge_filter must name columns as source.<column> or target.<column>, got ds"),
    (UK.format("unique_key id,\n    merge_filter target.ds > (SELECT MAX(ds) FROM s.other)"), "",
     "models/m.sql:3: merge_filter may only use the columns of the source and target rows (no subquery)"),
    ("INCREMENTAL_BY_PARTITION", "", "models/m.sql:3: INCREMENTAL_BY_PARTITION models need partitioned_by"),
    ("INCREMENTAL_BY_PARTITION (forward_only false)", ",\n  partitioned_by region",
     "models/m.sql:3: forward_only is always true for INCREMENTAL_BY_PARTITION models"),
    ("INCREMENTAL_BY_PARTITION (batch_size 2)", ",\n  partitioned_by region",
     "models/m.sql:3: Unknown property 'batch_size' for kind INCREMENTAL_BY_PARTITION"),
    ("INCREMENTAL_BY_PARTITION", ",\n  partitioned_by nope",
     "models/m.sql:4: partitioned_by names 'nope', not an output column of s.m"),
    ("INCREMENTAL_UNMANAGED (batch_size 2)", "",
     "models/m.sql:3: batch_size is not supported by INCREMENTAL_UNMANAGED models"),
    ("INCREMENTAL_UNMANAGED (\n    insert_overwrite true,\n    batch_concurrency 2)", "",
     "models/m.sql:5: batch_concurrency is not supported by INCREMENTAL_UNMANAGED models"),
    ("INCREMENTAL_UNMANAGED (lookback 2)", "", "models/m.sql:3: Unknown property 'lookback' for kind "
                                               "INCREMENTAL_UNMANAGED"),
])
def test_refusals_name_the_file_and_line(tmp_path, kind, props, expected):
    assert expected in _refused(tmp_path, kind, props)


# -- categories --------------------------------------------------------------------------------


def _snapshot(model: Model) -> Snapshot:
    fingerprint = SnapshotFingerprint(data_hash=hash_values([model.model_dump_json()]), metadata_hash="0")
    return Snapshot(name=model.name, fingerprint=fingerprint, model=model, rendered_query=model.query)


def _category(old: dict, new: dict, old_sql: str = "SELECT id, ds FROM s.src", new_sql: str | None = None):
    from mesh_dagster.core.plan.categorizer import categorize_direct

    def snapshot(settings: dict, sql: str) -> Snapshot:
        return _snapshot(Model(name="s.m", query=sql, **{"kind": FullKind(), **settings}))

    return categorize_direct(snapshot(new, new_sql or old_sql), snapshot(old, old_sql), {})


UNIQUE = IncrementalByUniqueKeyKind(unique_key=("id",))
TIME = IncrementalByTimeRangeKind(time_column="ds")


@pytest.mark.parametrize("old, new, category", [
    # between kinds keeping history with the same partitioning, the (unchanged) query decides:
    # a new table for this model, its children keep theirs
    ({"kind": UNIQUE}, {"kind": IncrementalUnmanagedKind()}, C.NON_BREAKING),
    ({"kind": TIME}, {"kind": IncrementalByPartitionKind(), "partitioned_by": ["ds"]}, C.NON_BREAKING),
    ({"kind": UNIQUE, "partitioned_by": ["ds"]}, {"kind": TIME}, C.NON_BREAKING),
    # ... any other change of kind is breaking
    ({"kind": UNIQUE}, {"kind": TIME}, C.BREAKING),  # partitioned by ds now
    ({"kind": UNIQUE}, {"kind": IncrementalUnmanagedKind(), "partitioned_by": ["id"]}, C.BREAKING),
    ({"kind": UNIQUE}, {}, C.BREAKING),  # to FULL
    ({}, {"kind": UNIQUE}, C.BREAKING),  # from FULL
    # the settings deciding which rows the table holds are breaking, others are not
    ({"kind": UNIQUE}, {"kind": IncrementalByUniqueKeyKind(unique_key=("id", "ds"))}, C.BREAKING),
    ({"kind": UNIQUE}, {"kind": IncrementalByUniqueKeyKind(unique_key=("id",), merge_filter="target.ds > source.ds")},
     C.BREAKING),
    ({"kind": UNIQUE}, {"kind": IncrementalByUniqueKeyKind(
        unique_key=("id",), when_matched="WHEN MATCHED THEN UPDATE SET target.ds = source.ds")}, C.BREAKING),
    ({"kind": UNIQUE}, {"kind": IncrementalByUniqueKeyKind(unique_key=("id",), lookback=2)}, C.BREAKING),
    ({"kind": IncrementalUnmanagedKind()}, {"kind": IncrementalUnmanagedKind(insert_overwrite=True)}, C.BREAKING),
    ({"kind": UNIQUE}, {"kind": IncrementalByUniqueKeyKind(unique_key=("id",), batch_size=3)}, None),
])
def test_kind_changes_and_row_settings(old, new, category):
    assert _category(old, new) == category


def test_a_kind_change_between_history_kinds_still_sees_a_query_change():
    sql = "SELECT id, ds FROM s.src"
    assert _category({"kind": UNIQUE}, {"kind": IncrementalUnmanagedKind()}, sql,
                     "SELECT id, ds FROM s.src WHERE id > 0") == C.BREAKING


# -- the write of each batch, on the in-memory engine ------------------------------------------

FILES = {
    "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT 1 AS id, 'eu' AS region, CAST('2024-01-01' AS DATE) AS ds\n",
    "models/uk.sql": "MODEL (name s.uk, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, batch_size 1), "
                     "start '2024-01-01');\nSELECT id, region, ds FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds\n",
    "models/part.sql": "MODEL (name s.part, kind INCREMENTAL_BY_PARTITION, partitioned_by region, start '2024-01-01');\n"
                       "SELECT id, region, ds FROM s.src\n",
    "models/log.sql": "MODEL (name s.log, kind INCREMENTAL_UNMANAGED, start '2024-01-01');\nSELECT id, ds FROM s.src\n",
    "models/over.sql": "MODEL (name s.over, kind INCREMENTAL_UNMANAGED (insert_overwrite true), start '2024-01-01');\n"
                       "SELECT id, ds FROM s.src\n",
}


class LockWatchingEngine(FakeEngine):
    """Records, at each write of a table, who holds that table's lock in the state store."""

    def __init__(self):
        super().__init__({"id": "int", "region": "string", "ds": "date"})
        self.ctx: Context | None = None
        self.holders: dict[str, list[str | None]] = {}

    def _watch(self, table: str) -> None:
        assert self.ctx is not None
        holder = self.ctx.state.locks.lock_holder(f"table:{table}")
        self.holders.setdefault(table, []).append(holder.owner if holder else None)

    def upsert(self, table, query_sql, upsert, duplicates_shown=5, **options):
        self._watch(table)
        return super().upsert(table, query_sql, upsert, duplicates_shown, **options)

    def overwrite_partitions(self, table, query_sql, **options):
        self._watch(table)
        super().overwrite_partitions(table, query_sql, **options)

    def append(self, table, query_sql, **options):
        self._watch(table)
        super().append(table, query_sql, **options)


@pytest.fixture
def applied(tmp_path):
    root = write_project(tmp_path / "w", FILES)
    engine = LockWatchingEngine()
    ctx = engine.ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-04")
    ctx.reviews.apply(plan)
    yield ctx, engine, plan.snapshots
    ctx.close()


def test_each_kind_writes_its_batches_with_its_own_engine_call(applied):
    _, engine, snapshots = applied
    writes = [(c.method, c.name) for c in engine.calls if c.method in ("upsert", "overwrite_partitions", "append")]
    uk, part, log, over = (snapshots[n].table_name for n in ("s.uk", "s.part", "s.log", "s.over"))
    assert writes.count(("upsert", uk)) == 3  # batch_size 1: one upsert per day, in order
    assert [c.args["query"] for c in engine.calls if c.method == "upsert"] == sorted(
        c.args["query"] for c in engine.calls if c.method == "upsert")  # '2024-01-01' first, then 02, 03
    assert writes.count(("overwrite_partitions", part)) == 1 and writes.count(("overwrite_partitions", over)) == 1
    assert writes.count(("append", log)) == 1  # no batch_size: the three days in one write
    upsert = next(c for c in engine.calls if c.method == "upsert")
    assert upsert.args["upsert"] == Upsert(("id",))


def test_every_write_holds_its_tables_lock(applied):
    ctx, engine, snapshots = applied
    uk, part, log = (snapshots[n].table_name for n in ("s.uk", "s.part", "s.log"))
    assert all(owner and "pid" in owner for owner in engine.holders[uk]) and len(engine.holders[uk]) == 3
    assert all(owner for owner in engine.holders[part])
    assert all(owner for owner in engine.holders[log]) and len(engine.holders[log]) == 1  # appends too
    assert ctx.state.locks.lock_holders() == []  # all released
    assert describe_lock(f"table:{uk}") == f"a write to table {uk}"


def test_a_repeated_key_is_refused_naming_the_keys_and_nothing_is_recorded(tmp_path):
    root = write_project(tmp_path / "d", {k: v for k, v in FILES.items() if k in ("models/src.sql", "models/uk.sql")})
    engine = FakeEngine({"id": "int", "region": "string", "ds": "date"})
    engine.duplicates = [(1, 2), (7, 3), (8, 2), (9, 2), (10, 2)]
    ctx = Context(root, engine=engine)
    plan = ctx.plans.plan(execution_time="2024-01-02")
    with pytest.raises(ModelError) as e:
        ctx.reviews.apply(plan)
    assert str(e.value) == (
        "models/uk.sql:1: unique_key id of s.uk is not unique in the query's output for [2024-01-01 - 2024-01-01]: "
        "id=1 (2 rows); id=7 (3 rows); id=8 (2 rows); id=9 (2 rows); id=10 (2 rows) and maybe more. Nothing was "
        "written: make the query return one row per key (e.g. keep the latest with QUALIFY ROW_NUMBER() OVER "
        "(PARTITION BY <key> ORDER BY <column> DESC) = 1)")
    snap = plan.snapshots["s.uk"]
    assert ctx.state.intervals.get_intervals([snap.interval_key]).get(snap.interval_key, []) == []
    ctx.close()


def test_update_set_star_replaces_the_whole_row_when_its_condition_holds(tmp_path):
    model = _load(tmp_path, "INCREMENTAL_BY_UNIQUE_KEY (unique_key id, when_matched (WHEN MATCHED AND "
                            "source.ds > target.ds THEN UPDATE SET *))")
    upsert = model.kind.upsert
    assert upsert.when_matched == "WHEN MATCHED AND source.ds > target.ds THEN UPDATE SET *"
    merged = upsert.merged_sql("`t`", "`s`", ["id", "v"])
    # newer rows replace the old one whole; older ones leave it as it is
    assert "WHEN source.ds > target.ds THEN source.`v` ELSE target.`v` END AS `v`" in merged
    assert "ON target.id <=> source.id" in merged and "FULL OUTER JOIN" in merged
    assert upsert.duplicates_sql("`s`", 5) == ("SELECT id AS `k0`, COUNT(*) AS `n` FROM `s` GROUP BY 1 "
                                               "HAVING COUNT(*) > 1 ORDER BY 1 LIMIT 5")
