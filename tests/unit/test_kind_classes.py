"""Model kinds: one class per kind, and everything that must not move when kinds got classes.

The fingerprints below were computed by the single `ModelKind` class that came before the kind
classes: an unchanged model must keep its fingerprint, or every existing project would see every
model as changed. Stored snapshots written then (every kind carrying every kind's properties at
their defaults) must load, and a project cache written by other classes must not.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from project_builder import record_plan, write_project
from pydantic import ValidationError

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import (
    KIND_CLASSES,
    BaseKind,
    EmbeddedKind,
    ExternalKind,
    FullKind,
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalUnmanagedKind,
    KindName,
    ModelKind,
    ScdType2ByColumnKind,
    ScdType2ByTimeKind,
    SeedKind,
    ViewKind,
)
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project import project as project_module
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import Snapshot
from mesh_dagster.state.store import StateStore

FILES = {
    "seeds/s.csv": "a,ds\n1,2020-01-01\n",
    "seeds/semi.csv": "a;ds\n1;2020-01-01\n",
    "external_models.yaml": "- name: raw.ext\n  columns:\n    a: INT\n    ds: DATE\n",
    "models/seed_plain.sql": "MODEL (name s.seed_plain, kind SEED (path '../seeds/s.csv'));\n",
    "models/seed_csv.sql": "MODEL (name s.seed_csv, kind SEED (path '../seeds/semi.csv', csv_settings "
                           "(delimiter = ';', keep_default_na = false)));\n",
    "models/full.sql": "MODEL (name s.full, kind FULL);\nSELECT a, ds FROM s.seed_plain\n",
    "models/full_props.sql": "MODEL (name s.full_props, kind FULL, partitioned_by a, storage_format orc, "
                             "owner 'jen');\nSELECT a, ds FROM raw.ext\n",
    "models/view.sql": "MODEL (name s.view, kind VIEW);\nSELECT a, ds FROM s.full\n",
    "models/view_default.sql": "MODEL (name s.view_default);\nSELECT a FROM s.full\n",
    "models/view_mat.sql": "MODEL (name s.view_mat, kind VIEW (materialized true));\nSELECT a, ds FROM s.emb\n",
    "models/inc.sql": "MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
                      "SELECT a, ds FROM raw.ext WHERE ds BETWEEN @start_ds AND @end_ds\n",
    "models/inc_all.sql": "MODEL (name s.inc_all, kind INCREMENTAL_BY_TIME_RANGE (time_column (d, '%Y%m%d'), "
                          "lookback 2, batch_size 3, batch_concurrency 2));\n"
                          "SELECT a, DATE_FORMAT(ds, 'yyyyMMdd') AS d FROM s.inc\n",
    "models/emb.sql": "MODEL (name s.emb, kind EMBEDDED);\nSELECT a, ds FROM s.seed_csv\n",
}
# (data hash, metadata hash, identifier) as computed before kinds had classes (commit ab82c86).
PINNED = {
    "raw.ext": ("2257636942", "3575161532", "3122572239"),
    "s.emb": ("1815756826", "1856672335", "3399334593"),
    "s.full": ("4010010753", "6250024", "2354761700"),
    "s.full_props": ("2117753511", "2446215793", "2307264760"),
    "s.inc": ("223272591", "360419960", "2456912098"),
    "s.inc_all": ("1496643627", "1290676636", "587946910"),
    "s.seed_csv": ("1498532077", "1974072506", "528460321"),
    "s.seed_plain": ("761001652", "1974072506", "3111328320"),
    "s.view": ("4006165313", "2534214800", "1337888015"),
    "s.view_default": ("1679053986", "2534151764", "3014669100"),
    "s.view_mat": ("2868622720", "3076154182", "1748490435"),
}
# Every property of the one ModelKind class, at its default: what old records carry on every kind.
OLD_KIND_FIELDS: dict[str, Any] = {"time_column": None, "time_column_format": "%Y-%m-%d", "batch_size": None,
                   "batch_concurrency": 1, "lookback": 0, "materialized": False, "path": None, "csv_settings": {}}
# A snapshot exactly as the state store held it before kinds had classes.
OLD_PAYLOAD = (
    '{"name":"s.inc","fingerprint":{"data_hash":"4190262172","metadata_hash":"1548491825","parent_data_hash":"0",'
    '"parent_metadata_hash":"0"},"model":{"name":"s.inc","kind":{"name":"INCREMENTAL_BY_TIME_RANGE",'
    '"time_column":"ds","time_column_format":"%Y-%m-%d","batch_size":2,"batch_concurrency":1,"lookback":0,'
    '"materialized":false,"path":null,"csv_settings":{}},"dialect":"spark","cron":"@daily","start":"2020-01-01",'
    '"end":null,"grain":[],"columns":null,"column_descriptions":{},"audits":[],"tags":[],"owner":null,'
    '"description":null,"partitioned_by":[],"storage_format":null,"depends_on":[],"enabled":true,"stamp":null,'
    '"query":"SELECT 1 AS a, CAST(\'2020-01-01\' AS DATE) AS ds","pre_statements":[],"post_statements":[],'
    '"macro_definitions":[],"inline_audits":[],"path":"models/inc.sql","line":1,"query_line":2,'
    '"property_lines":{"name":1,"kind":1}},"parents":[],"version":"3055151970","change_category":null,'
    '"previous_versions":[],"created_ts":0,"rendered_query":null}'
)


@pytest.fixture
def project_root(tmp_path: Path) -> Path:
    return write_project(tmp_path / "p", FILES)


def test_fingerprints_of_unchanged_models_are_those_computed_before_kinds_had_classes(project_root: Path) -> None:
    snapshots = build_snapshots(load_project(project_root, use_cache=False))
    found = {n: (s.fingerprint.data_hash, s.fingerprint.metadata_hash, s.identifier) for n, s in snapshots.items()}
    assert found == PINNED


def test_each_kind_is_its_own_class_with_only_its_properties(project_root: Path) -> None:
    models = load_project(project_root, use_cache=False).models
    classes = {n: type(m.kind) for n, m in models.items()}
    assert classes == {
        "raw.ext": ExternalKind, "s.emb": EmbeddedKind, "s.full": FullKind, "s.full_props": FullKind,
        "s.inc": IncrementalByTimeRangeKind, "s.inc_all": IncrementalByTimeRangeKind, "s.seed_csv": SeedKind,
        "s.seed_plain": SeedKind, "s.view": ViewKind, "s.view_default": ViewKind, "s.view_mat": ViewKind,
    }
    assert set(FullKind.model_fields) == {"name"}
    assert set(ViewKind.model_fields) == {"name", "materialized"}
    assert set(SeedKind.model_fields) == {"name", "path", "csv_settings", "batch_size"}
    with pytest.raises(ValidationError):
        FullKind(time_column="ds")  # type: ignore[call-arg]
    inc = models["s.inc_all"].kind
    assert isinstance(inc, IncrementalByTimeRangeKind)
    assert (inc.time_column, inc.time_column_format, inc.lookback, inc.batch_size, inc.batch_concurrency) == (
        "d", "%Y%m%d", 2, 3, 2)
    seed = models["s.seed_csv"].kind
    assert isinstance(seed, SeedKind) and seed.path == str(project_root / "seeds" / "semi.csv")
    assert seed.csv_settings == {"delimiter": ";", "keep_default_na": False}
    assert models["s.inc"].time_column == "ds" and models["s.full"].time_column is None
    assert models["s.inc"].effective_partitioned_by == ["ds"] and models["s.full_props"].effective_partitioned_by == ["a"]


FLAGS = ("is_incremental", "is_materialized", "is_view", "is_timeless", "is_symbolic", "is_inlined", "is_external",
         "has_query")
KINDS: dict[str, BaseKind] = {
    "SEED": SeedKind(path="/p/s.csv"), "FULL": FullKind(), "VIEW": ViewKind(),
    "VIEW (materialized true)": ViewKind(materialized=True),
    "INCREMENTAL_BY_TIME_RANGE": IncrementalByTimeRangeKind(time_column="ds"), "EMBEDDED": EmbeddedKind(),
    "EXTERNAL": ExternalKind(), "SCD_TYPE_2_BY_TIME": ScdType2ByTimeKind(unique_key=["id"]),
    "SCD_TYPE_2_BY_COLUMN": ScdType2ByColumnKind(unique_key=["id"], columns="*"),
    "INCREMENTAL_BY_UNIQUE_KEY": IncrementalByUniqueKeyKind(unique_key=("id",)),
    "INCREMENTAL_BY_PARTITION": IncrementalByPartitionKind(), "INCREMENTAL_UNMANAGED": IncrementalUnmanagedKind(),
}
EXPECTED_FLAGS = {
    "SEED": (False, True, False, True, False, False, False, False),
    "FULL": (False, True, False, False, False, False, False, True),
    "VIEW": (False, False, True, True, False, False, False, True),
    "VIEW (materialized true)": (False, True, False, False, False, False, False, True),
    "INCREMENTAL_BY_TIME_RANGE": (True, True, False, False, False, False, False, True),
    "INCREMENTAL_BY_UNIQUE_KEY": (True, True, False, False, False, False, False, True),
    "INCREMENTAL_BY_PARTITION": (True, True, False, False, False, False, False, True),
    "INCREMENTAL_UNMANAGED": (True, True, False, False, False, False, False, True),
    "EMBEDDED": (False, False, False, False, True, True, False, True),
    "EXTERNAL": (False, False, False, False, True, False, True, False),
    "SCD_TYPE_2_BY_TIME": (True, True, False, False, False, False, False, True),
    "SCD_TYPE_2_BY_COLUMN": (True, True, False, False, False, False, False, True),
}


@pytest.mark.parametrize("label", sorted(EXPECTED_FLAGS))
def test_flags_of_each_kind(label: str) -> None:
    kind = KINDS[label]
    assert tuple(getattr(kind, flag) for flag in FLAGS) == EXPECTED_FLAGS[label]
    # only the kinds whose writes build on the table's history restate it whole
    assert kind.restates_full_history == label.startswith(("INCREMENTAL_BY_UNIQUE", "INCREMENTAL_BY_PART",
                                                           "INCREMENTAL_UNMANAGED", "SCD_TYPE_2"))


# The kinds that came after the kind classes: their fingerprints are pinned as first computed, so a
# change to how they hash (which would show every model of theirs as changed) cannot go unnoticed.
NEW_KIND_FILES = {
    "models/uk.sql": "MODEL (name s.uk, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (id, LOWER(email)), "
                     "when_matched (WHEN MATCHED AND source.v IS NOT NULL THEN UPDATE SET target.v = source.v), "
                     "merge_filter target.ds > DATE '2020-01-01', batch_size 2, lookback 1));\n"
                     "SELECT 1 AS id, 'a' AS email, 2 AS v, DATE '2020-01-02' AS ds\n",
    "models/uk_plain.sql": "MODEL (name s.uk_plain, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id));\nSELECT 1 AS id\n",
    "models/part.sql": "MODEL (name s.part, kind INCREMENTAL_BY_PARTITION, partitioned_by region);\n"
                       "SELECT 1 AS id, 'eu' AS region\n",
    "models/unmanaged.sql": "MODEL (name s.unmanaged, kind INCREMENTAL_UNMANAGED);\nSELECT 1 AS id\n",
    "models/overwrite.sql": "MODEL (name s.overwrite, kind INCREMENTAL_UNMANAGED (insert_overwrite true));\n"
                            "SELECT 1 AS id\n",
}
PINNED_NEW = {
    "s.overwrite": ("824265765", "585191344", "1238666993"),
    "s.part": ("1328819226", "575532183", "3689534490"),
    "s.uk": ("175472736", "1682188627", "1602941485"),
    "s.uk_plain": ("592430799", "585191344", "822654784"),
    "s.unmanaged": ("2405524014", "585191344", "4071802672"),
}


def test_fingerprints_of_the_newer_kinds_are_pinned(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", NEW_KIND_FILES)
    snapshots = build_snapshots(load_project(root, use_cache=False))
    found = {n: (s.fingerprint.data_hash, s.fingerprint.metadata_hash, s.identifier) for n, s in snapshots.items()}
    assert found == PINNED_NEW


def test_every_kind_name_has_one_class() -> None:
    assert set(KIND_CLASSES) == set(KindName)
    assert all(cls.kind_name() == name for name, cls in KIND_CLASSES.items())


OWN_FIELDS: dict[str, dict[str, Any]] = {"INCREMENTAL_BY_TIME_RANGE": {"time_column": "ds", "lookback": 3},
                                         "SEED": {"path": "/p/s.csv"}, "VIEW": {"materialized": True},
                                         "SCD_TYPE_2_BY_TIME": {"unique_key": ["id"]},
                                         "SCD_TYPE_2_BY_COLUMN": {"unique_key": ["id"], "columns": ["name"]},
                                         "INCREMENTAL_BY_UNIQUE_KEY": {"unique_key": ["id"], "lookback": 1},
                                         "CUSTOM": {"materialization": "m"}}


@pytest.mark.parametrize("name", [k.value for k in KindName])
def test_a_kind_stored_before_kinds_had_classes_loads_as_its_class(name: str) -> None:
    own = OWN_FIELDS.get(name, {})
    stored = {"name": name, **OLD_KIND_FIELDS, **own}
    model = Model.model_validate_json(json.dumps({"name": "s.m", "kind": stored}))
    assert type(model.kind) is KIND_CLASSES[KindName(name)]
    assert model.kind == ModelKind(name=name, **own)
    assert Model.model_validate_json(model.model_dump_json()) == model


def test_a_stored_kind_with_another_kinds_property_set_is_refused() -> None:
    stored = {"name": "FULL", **OLD_KIND_FIELDS, "time_column": "ds"}
    with pytest.raises(ValidationError, match="time_column is not a property of FULL models"):
        Model.model_validate_json(json.dumps({"name": "s.m", "kind": stored}))


def test_a_snapshot_payload_stored_before_kinds_had_classes_loads_and_matches_the_model_today(tmp_path: Path) -> None:
    snapshot = Snapshot.model_validate_json(OLD_PAYLOAD)
    kind = snapshot.model.kind
    assert isinstance(kind, IncrementalByTimeRangeKind) and (kind.time_column, kind.batch_size) == ("ds", 2)
    root = write_project(tmp_path / "p", {"models/inc.sql": "MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE "
                                          "(time_column ds, batch_size 2));\nSELECT 1 AS a, CAST('2020-01-01' AS DATE) AS ds\n"})
    today = build_snapshots(load_project(root, use_cache=False))["s.inc"]
    assert today.fingerprint == snapshot.fingerprint
    assert today.model.kind == kind


def _old_shaped(payload: str) -> str:
    """A stored snapshot as the old ModelKind wrote it: every kind with every property."""
    data = json.loads(payload)
    data["model"]["kind"] = {**OLD_KIND_FIELDS, **data["model"]["kind"]}
    return json.dumps(data)


def test_state_written_before_kinds_had_classes_plans_no_change(project_root: Path, tmp_path: Path) -> None:
    project = load_project(project_root, use_cache=False)
    db = tmp_path / "state.db"
    with StateStore(f"sqlite:///{db}") as state:
        record_plan(build_plan(project, state, execution_time="2020-01-04"), state)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, identifier, payload FROM mesh_snapshots").fetchall()
        assert len(rows) == len(FILES) - 2  # every model but the two CSV files
        for name, identifier, payload in rows:
            conn.execute("UPDATE mesh_snapshots SET payload = ? WHERE name = ? AND identifier = ?",
                         (_old_shaped(payload), name, identifier))
        stored = conn.execute("SELECT payload FROM mesh_snapshots WHERE name = 's.full'").fetchone()[0]
        assert json.loads(stored)["model"]["kind"]["time_column_format"] == "%Y-%m-%d"
    with StateStore(f"sqlite:///{db}") as state:
        plan = build_plan(load_project(project_root, use_cache=False), state, execution_time="2020-01-04")
        loaded = state.snapshots.get_snapshots(s.snapshot_id for s in plan.snapshots.values())
    assert not plan.new_snapshots and not plan.added and not plan.changed
    assert {n.name: type(s.model.kind) for n, s in loaded.items()} == {
        n: type(s.model.kind) for n, s in plan.snapshots.items()}


def test_a_cache_written_for_another_model_format_is_not_loaded(project_root: Path, monkeypatch) -> None:
    load_project(project_root)  # writes the cache
    read: list[str] = []
    real = project_module.read_model_file

    def counting(text, path, *args):
        read.append(path)
        return real(text, path, *args)

    monkeypatch.setattr(project_module, "read_model_file", counting)
    load_project(project_root)
    assert read == []  # warm: every model from the cache
    monkeypatch.setattr(project_module, "MODEL_FORMAT", project_module.MODEL_FORMAT + 1)
    load_project(project_root)
    assert len(read) == len([f for f in FILES if f.startswith("models/")])


@pytest.mark.parametrize(("kind", "message"), [
    ("FULL (time_column ds)", "models/m.sql:1: Unknown property 'time_column' for kind FULL"),
    ("VIEW (path 'x.csv')", "models/m.sql:1: Unknown property 'path' for kind VIEW"),
    ("EMBEDDED (materialized true)", "models/m.sql:1: Unknown property 'materialized' for kind EMBEDDED"),
    ("SEED (csv_settings (delimiter = ';'))", "models/m.sql:1: SEED models need a path"),
])
def test_a_kind_reads_only_its_own_properties(tmp_path: Path, kind: str, message: str) -> None:
    root = write_project(tmp_path / "p", {"models/m.sql": f"MODEL (name s.m, kind {kind});\nSELECT 1 AS a\n"})
    with pytest.raises(ModelError) as e:
        load_project(root, use_cache=False)
    assert message in str(e.value)


# SCD type 2 kinds came after the kind classes: their fingerprints as first computed (commit 0e77def),
# so a change to what their kinds hash shows up here instead of as every SCD model changing.
SCD_FILES = {
    "external_models.yaml": "- name: raw.menu\n  columns:\n    id: INT\n    name: STRING\n    updated_at: TIMESTAMP\n",
    "models/scd.sql": "MODEL (name s.scd, kind SCD_TYPE_2 (unique_key id));\nSELECT id, name, updated_at FROM raw.menu\n",
    "models/scd_all.sql": "MODEL (name s.scd_all, kind SCD_TYPE_2_BY_TIME (unique_key (id, name), valid_from_name vf, "
                          "valid_to_name vt, invalidate_hard_deletes true, time_data_type TIMESTAMP_NTZ, "
                          "updated_at_name changed, updated_at_as_valid_from true, batch_size 1, forward_only false));\n"
                          "SELECT id, name, updated_at AS changed FROM raw.menu\n",
    "models/scd_col.sql": "MODEL (name s.scd_col, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name]));\n"
                          "SELECT id, name FROM raw.menu\n",
    "models/scd_col_all.sql": "MODEL (name s.scd_col_all, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, "
                              "execution_time_as_valid_from true, updated_at_name updated_at, disable_restatement "
                              "false));\nSELECT id, name, updated_at FROM raw.menu\n",
}
SCD_PINNED = {
    "s.scd": ("2810699621", "2435111347", "1442191789"),
    "s.scd_all": ("2342472970", "310400788", "451863018"),
    "s.scd_col": ("3970227094", "166524043", "3301046761"),
    "s.scd_col_all": ("3061917465", "1527105348", "1364436375"),
}


def test_fingerprints_of_scd_type_2_models_are_pinned(tmp_path: Path) -> None:
    snapshots = build_snapshots(load_project(write_project(tmp_path / "p", SCD_FILES), use_cache=False))
    found = {n: (s.fingerprint.data_hash, s.fingerprint.metadata_hash, s.identifier) for n, s in snapshots.items()
             if n.startswith("s.")}
    assert found == SCD_PINNED
