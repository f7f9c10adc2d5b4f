"""SCD type 2 kinds as written: every property, its default, and every way of getting one wrong,
each refused with its message at the file and line that wrote it (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import ScdType2ByColumnKind, ScdType2ByTimeKind
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.plan.categorizer import categorize_direct
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory, Snapshot, SnapshotFingerprint

EXTERNAL = ("- name: raw.menu\n  columns:\n    id: INT\n    name: STRING\n    price: DOUBLE\n"
            "    updated_at: TIMESTAMP\n    ds: DATE\n")
QUERY = "SELECT id, name, price, updated_at, ds FROM raw.menu"


def load(tmp_path: Path, kind: str, query: str = QUERY, extra: dict[str, str] | None = None) -> Project:
    """A project whose model `s.m` (models/m.sql) has `kind` written on line 3."""
    text = f"MODEL (\n  name s.m,\n  kind {kind}\n);\n\n{query}\n"
    root = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
    return load_project(write_project(root, {"external_models.yaml": EXTERNAL, "models/m.sql": text, **(extra or {})}),
                        use_cache=False)


def refused(tmp_path: Path, kind: str, where: str, message: str, query: str = QUERY) -> None:
    with pytest.raises(ModelError) as e:
        load(tmp_path, kind, query)
    assert f"{where}: {message}" in str(e.value), str(e.value)


# -- defaults ----------------------------------------------------------------------------------


def test_scd_type_2_is_by_time_with_its_defaults(tmp_path: Path) -> None:
    project = load(tmp_path, "SCD_TYPE_2 (unique_key id)")
    model = project.models["s.m"]
    assert model.kind == ScdType2ByTimeKind(unique_key=["id"])
    kind = model.kind
    assert isinstance(kind, ScdType2ByTimeKind)
    assert (kind.valid_from_name, kind.valid_to_name, kind.invalidate_hard_deletes, kind.time_data_type,
            kind.updated_at_name, kind.updated_at_as_valid_from, kind.batch_size) == (
        "valid_from", "valid_to", False, "TIMESTAMP", "updated_at", False, None)
    # History cannot be rebuilt from a source holding the present: forward-only, no restatement.
    assert model.forward_only and model.disable_restatement
    assert model.depends_on_past and model.batch_concurrency == 1 and model.batch_size is None
    assert model.schema_change_policies == (SchemaChangePolicy.ERROR, SchemaChangePolicy.ALLOW)
    # The table: the query's columns, then the two validity columns children may read.
    assert project.columns("s.m") == {"id": "INT", "name": "STRING", "price": "DOUBLE", "updated_at": "TIMESTAMP",
                                      "ds": "DATE", "valid_from": "TIMESTAMP", "valid_to": "TIMESTAMP"}


def test_by_column_defaults(tmp_path: Path) -> None:
    model = load(tmp_path, "SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, price])").models["s.m"]
    kind = model.kind
    assert isinstance(kind, ScdType2ByColumnKind)
    assert (kind.columns, kind.execution_time_as_valid_from, kind.updated_at_name, kind.invalidate_hard_deletes) == (
        ["name", "price"], False, None, False)
    assert kind.stamp_column is None and kind.first_valid_from == "epoch"
    assert model.forward_only and model.disable_restatement and model.depends_on_past


# -- every property ------------------------------------------------------------------------------


def test_every_by_time_property_is_read(tmp_path: Path) -> None:
    project = load(tmp_path, "SCD_TYPE_2_BY_TIME (unique_key (ID, name), valid_from_name starts, valid_to_name ends, "
                             "invalidate_hard_deletes true, time_data_type DATETIME, updated_at_name ds, "
                             "updated_at_as_valid_from true, batch_size 1, forward_only false, "
                             "disable_restatement false, on_destructive_change warn, on_additive_change error)")
    model = project.models["s.m"]
    kind = model.kind
    assert kind == ScdType2ByTimeKind(
        unique_key=["id", "name"], valid_from_name="starts", valid_to_name="ends", invalidate_hard_deletes=True,
        time_data_type="TIMESTAMP", updated_at_name="ds", updated_at_as_valid_from=True, batch_size=1,
        forward_only=False, disable_restatement=False, on_destructive_change=SchemaChangePolicy.WARN,
        on_additive_change=SchemaChangePolicy.ERROR)
    assert isinstance(kind, ScdType2ByTimeKind)
    assert kind.stamp_column == "ds" and kind.first_valid_from == "updated_at" and kind.change_columns(["a"]) is None
    assert not model.forward_only and not model.disable_restatement and model.batch_size == 1
    assert list(project.columns("s.m") or {})[-2:] == ["starts", "ends"]


def test_every_by_column_property_is_read(tmp_path: Path) -> None:
    kind = load(tmp_path, "SCD_TYPE_2_BY_COLUMN (unique_key [id], columns *, execution_time_as_valid_from true, "
                          "updated_at_name updated_at, time_data_type TIMESTAMP_NTZ, batch_size 1)").models["s.m"].kind
    assert isinstance(kind, ScdType2ByColumnKind)
    assert (kind.columns, kind.execution_time_as_valid_from, kind.updated_at_name, kind.time_data_type) == (
        "*", True, "updated_at", "TIMESTAMP_NTZ")
    assert kind.stamp_column == "updated_at" and kind.first_valid_from == "execution_time"
    # `*`: every column but the key and the stamp opens a new version when it changes.
    assert kind.change_columns(["id", "name", "price", "updated_at"]) == ["name", "price"]
    assert kind.added_columns() == {"valid_from": "TIMESTAMP_NTZ", "valid_to": "TIMESTAMP_NTZ"}


@pytest.mark.parametrize("written", ["columns '*'", "columns name", "columns (name)"])
def test_columns_spellings(tmp_path: Path, written: str) -> None:
    kind = load(tmp_path, f"SCD_TYPE_2_BY_COLUMN (unique_key id, {written})").models["s.m"].kind
    assert isinstance(kind, ScdType2ByColumnKind)
    assert kind.columns == ("*" if "*" in written else ["name"])


def test_a_child_selects_the_validity_columns(tmp_path: Path) -> None:
    child = "MODEL (name s.child, kind FULL);\nSELECT id, valid_from, valid_to FROM s.m\n"
    project = load(tmp_path, "SCD_TYPE_2 (unique_key id)", extra={"models/child.sql": child})
    assert project.columns("s.child") == {"id": "INT", "valid_from": "TIMESTAMP", "valid_to": "TIMESTAMP"}


def test_declared_columns_get_the_validity_columns_after_them(tmp_path: Path) -> None:
    project = load(tmp_path, "SCD_TYPE_2 (unique_key id),\n  columns (id INT, updated_at TIMESTAMP)",
                   "SELECT id, updated_at FROM raw.menu")
    assert project.columns("s.m") == {"id": "INT", "updated_at": "TIMESTAMP", "valid_from": "TIMESTAMP",
                                      "valid_to": "TIMESTAMP"}


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "message"), [
    ("SCD_TYPE_2", "SCD_TYPE_2_BY_TIME models need a unique_key"),
    ("SCD_TYPE_2_BY_TIME (updated_at_name ds)", "SCD_TYPE_2_BY_TIME models need a unique_key"),
    ("SCD_TYPE_2_BY_COLUMN (columns [name])", "SCD_TYPE_2_BY_COLUMN models need a unique_key"),
    ("SCD_TYPE_2_BY_COLUMN (unique_key id)", "SCD_TYPE_2_BY_COLUMN models need the columns whose change opens a "
                                             "new version"),
    ("SCD_TYPE_2 (unique_key id, valid_from_name x, valid_to_name x)",
     "valid_from_name and valid_to_name are both 'x'"),
])
def test_missing_or_contradicting_properties_are_refused_at_the_kind(tmp_path: Path, kind: str, message: str) -> None:
    refused(tmp_path, kind, "models/m.sql:3", message)


@pytest.mark.parametrize(("kind", "message"), [
    ("SCD_TYPE_2 (unique_key CONCAT(id, name))", "unique_key must name output columns of the query; "
                                                 "'CONCAT(id, name)' is not a column name"),
    ("SCD_TYPE_2 (unique_key (id, id || name))", "unique_key must name output columns of the query; 'id || name'"),
    ("SCD_TYPE_2 (unique_key id, invalidate_hard_deletes maybe)", "Expected true or false, got 'maybe'"),
    ("SCD_TYPE_2 (unique_key id, updated_at_as_valid_from 2)", "Expected true or false, got '2'"),
    ("SCD_TYPE_2 (unique_key id, time_data_type INT)", "time_data_type must be a timestamp type (TIMESTAMP, "
                                                       "TIMESTAMP_NTZ, TIMESTAMP_LTZ), got 'INT'"),
    ("SCD_TYPE_2 (unique_key id, time_data_type DATE)", "time_data_type must be a timestamp type"),
    ("SCD_TYPE_2 (unique_key id, time_data_type NOPE)", "time_data_type: unknown type 'NOPE'"),
    ("SCD_TYPE_2 (unique_key id, batch_size 0)", "batch_size must be at least 1, got 0"),
    ("SCD_TYPE_2 (unique_key id, valid_from_name 'my.from')", "valid_from_name 'my.from' is not supported"),
    ("SCD_TYPE_2 (unique_key id, batch_concurrency 2)", "batch_concurrency cannot be set for SCD_TYPE_2 models"),
    ("SCD_TYPE_2 (unique_key id, lookback 1)", "lookback cannot be set for SCD_TYPE_2 models"),
    ("SCD_TYPE_2 (unique_key id, time_column ds)", "Unknown property 'time_column' for kind SCD_TYPE_2_BY_TIME"),
    ("SCD_TYPE_2 (unique_key id, execution_time_as_valid_from true)",
     "Unknown property 'execution_time_as_valid_from' for kind SCD_TYPE_2_BY_TIME"),
    ("SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, updated_at_as_valid_from true)",
     "Unknown property 'updated_at_as_valid_from' for kind SCD_TYPE_2_BY_COLUMN"),
    ("SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, on_destructive_change never)",
     "on_destructive_change must be one of error, warn, allow, ignore, got 'never'"),
])
def test_bad_values_are_refused_at_their_line(tmp_path: Path, kind: str, message: str) -> None:
    refused(tmp_path, kind, "models/m.sql:3", message)


@pytest.mark.parametrize(("kind", "message"), [
    ("SCD_TYPE_2 (unique_key (id, code))", "unique_key names 'code', not an output column of s.m"),
    ("SCD_TYPE_2_BY_COLUMN (unique_key id, columns [name, colour])", "columns names 'colour', not an output column"),
    ("SCD_TYPE_2_BY_COLUMN (unique_key id, columns *, updated_at_name changed)",
     "updated_at_name names 'changed', not an output column"),
])
def test_properties_naming_columns_the_query_lacks_are_refused(tmp_path: Path, kind: str, message: str) -> None:
    refused(tmp_path, kind, "models/m.sql:3", message)


def test_by_time_needs_its_updated_at_column(tmp_path: Path) -> None:
    refused(tmp_path, "SCD_TYPE_2 (unique_key id)", "models/m.sql:3",
            "updated_at_name names 'updated_at', not an output column of s.m", query="SELECT id, name FROM raw.menu")


def test_a_query_column_named_like_a_validity_column_is_refused_where_the_query_names_it(tmp_path: Path) -> None:
    query = "SELECT id,\n  updated_at,\n  ds AS valid_to\nFROM raw.menu"
    refused(tmp_path, "SCD_TYPE_2 (unique_key id)", "models/m.sql:8",
            "The query outputs a column 'valid_to', which SCD_TYPE_2_BY_TIME adds itself", query=query)


def test_the_kind_is_no_longer_refused_as_unsupported(tmp_path: Path) -> None:
    for kind in ("SCD_TYPE_2 (unique_key id)", "SCD_TYPE_2_BY_TIME (unique_key id)",
                 "SCD_TYPE_2_BY_COLUMN (unique_key id, columns *)"):
        assert load(tmp_path, kind).models["s.m"].kind.restates_full_history


# -- what a change of a property means -------------------------------------------------------------


def _snapshot(kind: ScdType2ByTimeKind) -> Snapshot:
    model = Model(name="s.m", kind=kind, query=QUERY)
    return Snapshot(name="s.m", fingerprint=SnapshotFingerprint(data_hash=str(kind.data_hash_values()),
                                                                metadata_hash="0"), model=model, rendered_query=QUERY)


@pytest.mark.parametrize("change", [{"unique_key": ["id", "name"]}, {"valid_to_name": "ends"},
                                    {"invalidate_hard_deletes": True}, {"updated_at_name": "ds"},
                                    {"batch_size": 1}])
def test_changing_what_decides_the_history_is_breaking(change: dict) -> None:
    old = ScdType2ByTimeKind(unique_key=["id"])
    new = ScdType2ByTimeKind(**{"unique_key": ["id"], **change})
    assert categorize_direct(_snapshot(new), _snapshot(old), {}) == ChangeCategory.BREAKING
