"""Accepted means honoured: every key the parsers accept changes behaviour, or is refused.

The keys are enumerated from the parsers themselves (the MODEL/audit tables of core.model_reader,
each kind class's properties and the CSV settings of core.kinds, the external model keys of core.project, the pydantic models of core.config),
so a key added to a parser without a probe here fails `test_every_*_key_has_a_probe`. Each probe
shows the key's effect on something the rest of mesh_dagster acts on: the loaded project, the
snapshot fingerprint, the plan, the rendered SQL, the Spark session settings, the CLI's answer -
or shows that it is refused with a message naming it. Two config keys can only be seen on Spark;
their probes are in tests/spark/test_config_keys.py (checked to exist here).
"""

from __future__ import annotations

import importlib
import os
import re
import textwrap
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from project_builder import CONFIG, write_project
from pydantic import BaseModel

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.config.connections import SparkConnectionConfig
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.models.kinds import CSV_SETTINGS, KIND_CLASSES
from mesh_dagster.core.models.seeds import check_seed
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project import model_reader
from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.core.project.external_model_files import EXTERNAL_MODEL_KEYS
from mesh_dagster.core.project.linter import lint
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.state.store import StateStore
from tests.team.config_probes import TEAM_CONFIG_PROBES
from tests.unit.test_plan_data_diff import DATA_DIFF_PROBES

# ---------------------------------------------------------------------------------------------
# What the parsers accept


def config_keys(model: type[BaseModel] = ProjectConfig, prefix: str = "") -> set[str]:
    """Dotted keys of every field, through nested models (`gateways.*` for mappings of models)."""
    keys = set()
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        keys.add(key)
        nested, wildcard = _nested_model(field.annotation)
        if nested is not None:
            keys |= config_keys(nested, f"{key}.*." if wildcard else f"{key}.")
    return keys


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is dict and len(args) == 2:
        inner, _ = _nested_model(args[1])
        return inner, inner is not None
    for arg in args:
        inner, wildcard = _nested_model(arg)
        if inner is not None:
            return inner, wildcard
    return None, False


MODEL_KEYS = model_reader.SUPPORTED_PROPERTIES | model_reader.UNSUPPORTED_PROPERTIES
KIND_KEYS = {(name.value, prop) for name, kind in KIND_CLASSES.items() for prop in kind.PROPERTY_READERS}
AUDIT_KEYS = set(model_reader.AUDIT_PROPERTIES)
CSV_KEYS = set(CSV_SETTINGS)
EXTERNAL_KEYS = set(EXTERNAL_MODEL_KEYS)


# ---------------------------------------------------------------------------------------------
# Observing a project


PARENT = "MODEL (name s.p, kind VIEW);\nSELECT 1 AS a\n"
MODEL = """MODEL (
  name s.m,
  kind {kind}{props}
);

SELECT 1 AS a, CAST('2020-01-01' AS DATE) AS ds, CAST('2020-01-01' AS DATE) AS ds2
"""
INCREMENTAL = "INCREMENTAL_BY_TIME_RANGE (time_column ds{kind_props})"
SEED_MODEL = "MODEL (\n  name s.m,\n  kind SEED (path '../seeds/{csv}'{kind_props}){props}\n);\n"
CSVS = {"seeds/s.csv": "a,ds\n1,2020-01-01\n", "seeds/t.csv": "a,ds\n2,2020-01-02\n", "seeds/semi.csv": "a;ds\n1;2020-01-01\n"}


def project_with(tmp_path: Path, kind: str = "FULL", props: str = "", kind_props: str = "", csv: str = "s.csv",
                 files: dict[str, str] | None = None, config: str = CONFIG) -> Path:
    root = tmp_path / f"p{len(list(tmp_path.iterdir())) if tmp_path.exists() else 0}"
    if kind == "SEED":
        text = SEED_MODEL.format(csv=csv, kind_props=kind_props, props=props)
    else:
        kind_text = INCREMENTAL.format(kind_props=kind_props) if kind == "INCREMENTAL" else kind + (
            f" ({kind_props.lstrip(', ')})" if kind_props else "")
        text = MODEL.format(kind=kind_text, props=props)
    return write_project(root, {"models/p.sql": PARENT, "models/m.sql": text, **CSVS, **(files or {})}, config)


def observe(root: Path, tmp_path: Path) -> dict[str, Any]:
    """Everything the rest of mesh_dagster acts on: models, parents, columns, fingerprints, plan."""
    project = load_project(root, use_cache=False)
    with StateStore(f"sqlite:///{tmp_path / (root.name + '_state.db')}") as state:
        plan = build_plan(project, state, execution_time="2020-01-04")
    snapshots = build_snapshots(project)
    return {
        "models": sorted(project.models),
        "parents": {n: project.parents(n) for n in project.models},
        "columns": {n: project.columns(n) for n in project.models},
        "fingerprints": {n: s.fingerprint for n, s in snapshots.items()},
        "backfills": {n: bf.intervals for n, bf in plan.backfills.items()},
    }


def refused(build: Callable[[], Any], *fragments: str) -> None:
    with pytest.raises(MeshError) as e:
        build()
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# MODEL properties

MODEL_VARIANTS = {
    "name": ",\n  name s.renamed",  # replaces `name s.m` below
    "kind": "VIEW",
    "dialect": ",\n  dialect duckdb",
    "cron": ",\n  cron '@hourly'",
    "start": ",\n  start '2020-01-02'",
    "end": ",\n  end '2020-01-02'",
    "grain": ",\n  grain a",
    "grains": ",\n  grains (a, ds)",
    "references": ",\n  references (a AS item_id)",
    "columns": ",\n  columns (a BIGINT, ds DATE, ds2 DATE)",
    "audits": ",\n  audits (not_null(columns := (a)))",
    "tags": ",\n  tags (finance)",
    "owner": ",\n  owner 'jen'",
    "description": ",\n  description 'Orders per item'",
    "partitioned_by": ",\n  partitioned_by ds",
    "storage_format": ",\n  storage_format orc",
    "depends_on": ",\n  depends_on (s.p)",
    "enabled": ",\n  enabled false",
    "stamp": ",\n  stamp 'v2'",
    "column_descriptions": ",\n  column_descriptions (a = 'The a')",
    "cron_tz": ",\n  cron_tz 'Asia/Tokyo'",  # due at Tokyo's midnight: the plan's last day moves
    "interval_unit": ",\n  interval_unit hour",
    "allow_partials": ",\n  allow_partials true",
    "signals": ",\n  signals (ready_through(day := '2020-01-02'))",
    "session_properties": ",\n  session_properties (spark.sql.shuffle.partitions = 3)",  # metadata hash
}
# Files a variant needs besides the model (the signal it names). What a signal's answer does to a
# backfill is shown in tests/unit/test_signals.py; here, that the reference is read and fingerprinted.
MODEL_VARIANT_FILES = {
    "signals": {"signals/__init__.py": "from datetime import date\n\nfrom mesh_dagster import signal\n\n\n"
                                       "@signal()\ndef ready_through(batch, day: date):\n    return True\n"},
}
# The kind a property is probed on (FULL otherwise): allow_partials only means something for time ranges.
MODEL_VARIANT_KINDS = {"allow_partials": "INCREMENTAL"}


# Properties that decide what the linter checks, not what is built (a plan does not change).
LINT_PROPERTIES = {"ignored_rules"}


def test_every_model_key_has_a_probe() -> None:
    assert set(MODEL_VARIANTS) | model_reader.UNSUPPORTED_PROPERTIES | LINT_PROPERTIES == MODEL_KEYS


def test_ignored_rules_changes_what_is_linted(tmp_path: Path) -> None:
    config = "linter:\n  enabled: true\n  rules: [nomissingowner]\n"
    for props, expected in (("", {"s.p", "s.m"}), (",\n  ignored_rules [nomissingowner]", {"s.p"}),
                            (",\n  ignored_rules ALL", {"s.p"})):
        root = project_with(tmp_path, props=props, config=CONFIG + config)
        assert {f.model for f in lint(load_project(root, use_cache=False)).findings} == expected
    root = project_with(tmp_path, props=",\n  ignored_rules [nosuchrule]", config=CONFIG + config)
    refused(lambda: lint(load_project(root, use_cache=False)), "models/m.sql:4:", "unknown rule 'nosuchrule'")


@pytest.mark.parametrize("key", sorted(MODEL_VARIANTS))
def test_model_property_changes_what_is_built(tmp_path: Path, key: str) -> None:
    kind = MODEL_VARIANT_KINDS.get(key, "FULL")
    base = observe(project_with(tmp_path, kind=kind), tmp_path)
    if key == "kind":
        root = project_with(tmp_path, kind=MODEL_VARIANTS[key])
    elif key == "name":
        root = project_with(tmp_path)
        path = root / "models" / "m.sql"
        path.write_text(path.read_text().replace("name s.m", "name s.renamed"))
    else:
        root = project_with(tmp_path, kind=kind, props=MODEL_VARIANTS[key], files=MODEL_VARIANT_FILES.get(key))
    changed = observe(root, tmp_path)
    assert changed != base, f"MODEL property {key} changed nothing"


@pytest.mark.parametrize("key", sorted(model_reader.UNSUPPORTED_PROPERTIES))
def test_unsupported_model_property_is_refused(tmp_path: Path, key: str) -> None:
    root = project_with(tmp_path, props=f",\n  {key} 'x'")
    refused(lambda: load_project(root, use_cache=False), "models/m.sql:4:", f"Property '{key}' is not supported")


# ---------------------------------------------------------------------------------------------
# kind properties

KIND_VARIANTS: dict[tuple[str, str], dict[str, str]] = {
    ("INCREMENTAL_BY_TIME_RANGE", "time_column"): {"kind": "INCREMENTAL", "kind_props": "2"},  # ds → ds2
    ("INCREMENTAL_BY_TIME_RANGE", "batch_size"): {"kind": "INCREMENTAL", "kind_props": ", batch_size 2"},
    ("INCREMENTAL_BY_TIME_RANGE", "lookback"): {"kind": "INCREMENTAL", "kind_props": ", lookback 2"},
    ("INCREMENTAL_BY_TIME_RANGE", "batch_concurrency"): {"kind": "INCREMENTAL", "kind_props": ", batch_concurrency 2"},
    ("SEED", "path"): {"kind": "SEED", "csv": "t.csv"},
    ("SEED", "csv_settings"): {"kind": "SEED", "csv": "semi.csv", "kind_props": ", csv_settings (delimiter = ';')"},
    ("SEED", "batch_size"): {"kind": "SEED", "kind_props": ", batch_size 10"},  # in the data hash, as SQLMesh
    ("VIEW", "materialized"): {"kind": "VIEW", "kind_props": "materialized true"},
    ("INCREMENTAL_BY_TIME_RANGE", "forward_only"): {"kind": "INCREMENTAL", "kind_props": ", forward_only true"},
    ("INCREMENTAL_BY_TIME_RANGE", "disable_restatement"): {"kind": "INCREMENTAL",
                                                           "kind_props": ", disable_restatement true"},
    ("INCREMENTAL_BY_TIME_RANGE", "on_destructive_change"): {"kind": "INCREMENTAL",
                                                             "kind_props": ", on_destructive_change 'warn'"},
    ("INCREMENTAL_BY_TIME_RANGE", "on_additive_change"): {"kind": "INCREMENTAL",
                                                          "kind_props": ", on_additive_change error"},
}
SCD_BASES = {"SCD_TYPE_2_BY_TIME": "unique_key a, updated_at_name ds",
             "SCD_TYPE_2_BY_COLUMN": "unique_key a, columns [ds]"}
# Each SCD type 2 property as written over its kind's base (or replacing what the base writes).
SCD_VARIANTS = {
    ("SCD_TYPE_2_BY_TIME", "unique_key"): "unique_key (a, ds2), updated_at_name ds",
    ("SCD_TYPE_2_BY_TIME", "updated_at_name"): "unique_key a, updated_at_name ds2",
    ("SCD_TYPE_2_BY_TIME", "updated_at_as_valid_from"): ", updated_at_as_valid_from true",
    ("SCD_TYPE_2_BY_COLUMN", "unique_key"): "unique_key [a, ds2], columns [ds]",
    ("SCD_TYPE_2_BY_COLUMN", "columns"): "unique_key a, columns *",
    ("SCD_TYPE_2_BY_COLUMN", "execution_time_as_valid_from"): ", execution_time_as_valid_from true",
    ("SCD_TYPE_2_BY_COLUMN", "updated_at_name"): ", updated_at_name ds2",
    **{(kind, key): text for kind in SCD_BASES for key, text in {
        "valid_from_name": ", valid_from_name starts",
        "valid_to_name": ", valid_to_name ends",
        "invalidate_hard_deletes": ", invalidate_hard_deletes true",
        "time_data_type": ", time_data_type TIMESTAMP_NTZ",
        "batch_size": ", batch_size 2",
        "forward_only": ", forward_only false",
        "disable_restatement": ", disable_restatement false",
        "on_destructive_change": ", on_destructive_change warn",
        "on_additive_change": ", on_additive_change error",
    }.items()},
}
KIND_VARIANTS.update({
    key: {"kind": key[0], "kind_props": text if not text.startswith(",") else SCD_BASES[key[0]] + text}
    for key, text in SCD_VARIANTS.items()
})
UK, BY_PARTITION, UNMANAGED = "INCREMENTAL_BY_UNIQUE_KEY", "INCREMENTAL_BY_PARTITION", "INCREMENTAL_UNMANAGED"
KIND_BASES: dict[str, dict[str, str]] = {
    "INCREMENTAL_BY_TIME_RANGE": {"kind": "INCREMENTAL"}, "SEED": {"kind": "SEED"}, "VIEW": {"kind": "VIEW"},
    UK: {"kind": UK, "kind_props": "unique_key a"},
    BY_PARTITION: {"kind": BY_PARTITION, "props": ",\n  partitioned_by a"},
    UNMANAGED: {"kind": UNMANAGED},
    "CUSTOM": {"kind": "CUSTOM", "kind_props": "materialization 'mat'", "files": {
        "materializations/m.py": "from mesh_dagster import Materialization\n\n\nclass M(Materialization):\n"
                                 "    NAME = 'mat'\n\n    def insert(self, table, query, context):\n"
                                 "        context.append(table, query)\n\n\nclass N(M):\n    NAME = 'other'\n"}},
    **{kind: {"kind": kind, "kind_props": props} for kind, props in SCD_BASES.items()},
}


def _on_base(kind: str, kind_props: str) -> dict[str, str]:
    """`project_with` arguments: the kind's base project with `kind_props` added inside `kind (...)`."""
    base = KIND_BASES[kind]
    return {**base, "kind_props": base.get("kind_props", "") + kind_props}


KIND_VARIANTS.update({
    (UK, "unique_key"): _on_base(UK, ", unique_key (a, ds)") | {"kind_props": "unique_key (a, ds)"},
    (UK, "when_matched"): _on_base(UK, ", when_matched (WHEN MATCHED THEN UPDATE SET target.ds2 = source.ds2)"),
    (UK, "merge_filter"): _on_base(UK, ", merge_filter target.ds > source.ds"),
    (UK, "batch_size"): _on_base(UK, ", batch_size 2"),
    (UK, "lookback"): _on_base(UK, ", lookback 2"),
    (UK, "forward_only"): _on_base(UK, ", forward_only true"),
    (UK, "disable_restatement"): _on_base(UK, ", disable_restatement true"),
    (UK, "on_destructive_change"): _on_base(UK, ", on_destructive_change warn"),
    (UK, "on_additive_change"): _on_base(UK, ", on_additive_change error"),
    (BY_PARTITION, "disable_restatement"): _on_base(BY_PARTITION, ", disable_restatement true"),
    (BY_PARTITION, "on_destructive_change"): _on_base(BY_PARTITION, ", on_destructive_change allow"),
    (BY_PARTITION, "on_additive_change"): _on_base(BY_PARTITION, ", on_additive_change warn"),
    (UNMANAGED, "insert_overwrite"): _on_base(UNMANAGED, ", insert_overwrite true"),
    (UNMANAGED, "forward_only"): _on_base(UNMANAGED, ", forward_only false"),
    (UNMANAGED, "disable_restatement"): _on_base(UNMANAGED, ", disable_restatement false"),
    (UNMANAGED, "on_destructive_change"): _on_base(UNMANAGED, ", on_destructive_change ignore"),
    (UNMANAGED, "on_additive_change"): _on_base(UNMANAGED, ", on_additive_change error"),
    ("CUSTOM", "materialization"): _on_base("CUSTOM", "") | {"kind_props": "materialization 'other'"},
    ("CUSTOM", "materialization_properties"): _on_base("CUSTOM", ", materialization_properties (k = 1)"),
    ("CUSTOM", "batch_size"): _on_base("CUSTOM", ", batch_size 2"),
    ("CUSTOM", "lookback"): _on_base("CUSTOM", ", lookback 2"),
    ("CUSTOM", "forward_only"): _on_base("CUSTOM", ", forward_only true"),
    ("CUSTOM", "disable_restatement"): _on_base("CUSTOM", ", disable_restatement true"),
    ("CUSTOM", "on_destructive_change"): _on_base("CUSTOM", ", on_destructive_change warn"),
    ("CUSTOM", "on_additive_change"): _on_base("CUSTOM", ", on_additive_change error"),
})
REFUSED_KIND_PROPERTIES = {
    (UK, "batch_concurrency"): (", batch_concurrency 2", "batch_concurrency is always 1 for INCREMENTAL_BY_UNIQUE_KEY"),
    (BY_PARTITION, "forward_only"): (", forward_only false", "forward_only is always true for INCREMENTAL_BY_PARTITION"),
    (UNMANAGED, "batch_size"): (", batch_size 2", "batch_size is not supported by INCREMENTAL_UNMANAGED models"),
    (UNMANAGED, "batch_concurrency"): (", batch_concurrency 2",
                                       "batch_concurrency is not supported by INCREMENTAL_UNMANAGED models"),
    **{(kind, "batch_concurrency"): (", batch_concurrency 2", "batch_concurrency cannot be set for SCD_TYPE_2 models")
       for kind in SCD_BASES},
    **{(kind, "lookback"): (", lookback 1", "lookback cannot be set for SCD_TYPE_2 models") for kind in SCD_BASES},
}


def test_every_kind_key_has_a_probe() -> None:
    accepted_as_default = {("INCREMENTAL_BY_TIME_RANGE", "partition_by_time_column")}
    assert set(KIND_VARIANTS) | set(REFUSED_KIND_PROPERTIES) | accepted_as_default == KIND_KEYS


@pytest.mark.parametrize("key", sorted(KIND_VARIANTS), ids="-".join)
def test_kind_property_changes_what_is_built(tmp_path: Path, key: tuple[str, str]) -> None:
    variant = dict(KIND_VARIANTS[key])
    if key == ("INCREMENTAL_BY_TIME_RANGE", "time_column"):
        base_root = project_with(tmp_path, kind="INCREMENTAL")
        root = project_with(tmp_path, kind="INCREMENTAL")
        path = root / "models" / "m.sql"
        path.write_text(path.read_text().replace("time_column ds", "time_column ds2"))
    else:
        base_root = project_with(tmp_path, **KIND_BASES[key[0]])
        root = project_with(tmp_path, **variant)
    assert observe(root, tmp_path) != observe(base_root, tmp_path), f"{key} changed nothing"


@pytest.mark.parametrize("key", sorted(REFUSED_KIND_PROPERTIES), ids="-".join)
def test_unsupported_kind_property_is_refused(tmp_path: Path, key: tuple[str, str]) -> None:
    text, message = REFUSED_KIND_PROPERTIES[key]
    root = project_with(tmp_path, **_on_base(key[0], text))
    load_project(project_with(tmp_path, **KIND_BASES[key[0]]), use_cache=False)  # the base alone loads
    refused(lambda: load_project(root, use_cache=False), "models/m.sql:3:", message)


def test_partition_by_time_column_true_is_what_happens_anyway_and_false_is_refused(tmp_path: Path) -> None:
    base = load_project(project_with(tmp_path, kind="INCREMENTAL"), use_cache=False).models["s.m"]
    explicit = load_project(project_with(tmp_path, kind="INCREMENTAL", kind_props=", partition_by_time_column true"),
                            use_cache=False).models["s.m"]
    assert explicit.effective_partitioned_by == base.effective_partitioned_by == ["ds"]
    assert explicit.kind == base.kind
    root = project_with(tmp_path, kind="INCREMENTAL", kind_props=", partition_by_time_column false")
    refused(lambda: load_project(root, use_cache=False), "models/m.sql:3:", "partition_by_time_column false")


# ---------------------------------------------------------------------------------------------
# csv_settings: each one changes how the seed is read (the evaluator passes the same keys to pandas)

CSV_PROBES: dict[str, tuple[bytes, str, str]] = {
    # key: (CSV bytes, the setting, declared columns) - refused without the setting, read with it
    "delimiter": (b"a;b\n1;2\n", "delimiter = ';'", "a INT, b INT"),
    "quotechar": (b"a,b\n|1,5|,2\n", "quotechar = '|'", "a STRING, b INT"),
    "escapechar": (b"a,b\nx^,y,2\n", "escapechar = '^'", "a STRING, b INT"),
    "encoding": ("a,b\ncaf\xe9,2\n".encode("latin-1"), "encoding = 'latin-1'", "a STRING, b INT"),
    "na_values": (b"a,b\nmissing,2\n", "na_values = ('missing')", "a INT, b INT"),
    "keep_default_na": (b"a,b\n,2\n", "keep_default_na = false", "a INT, b INT"),
}


def test_every_csv_setting_has_a_probe() -> None:
    assert set(CSV_PROBES) == CSV_KEYS


def _seed_project(tmp_path: Path, data: bytes, settings: str, columns: str) -> Project:
    root = tmp_path / f"seed{len(list(tmp_path.iterdir()))}"
    kind = f"SEED (path '../seeds/x.csv'{', csv_settings (' + settings + ')' if settings else ''})"
    write_project(root, {"models/m.sql": f"MODEL (\n  name s.m,\n  kind {kind},\n  columns ({columns})\n);\n"})
    (root / "seeds").mkdir()
    (root / "seeds" / "x.csv").write_bytes(data)
    return root


@pytest.mark.parametrize("key", sorted(CSV_PROBES))
def test_csv_setting_changes_how_the_seed_is_read(tmp_path: Path, key: str) -> None:
    data, setting, columns = CSV_PROBES[key]
    with_setting = _seed_project(tmp_path, data, setting, columns)
    without = _seed_project(tmp_path, data, "", columns)
    if key == "keep_default_na":  # the empty value is NULL by default, text (not an INT) without it
        load_project(without, use_cache=False)
        refused(lambda: load_project(with_setting, use_cache=False), "seeds/x.csv:2:", "column a")
    else:
        project = load_project(with_setting, use_cache=False)
        assert project.columns("s.m") is not None
        refused(lambda: load_project(without, use_cache=False), "seeds/x.csv")
    model = load_project(with_setting, use_cache=False).models["s.m"] if key != "keep_default_na" else None
    if model is not None:
        assert check_seed(model, "seeds/x.csv").header == ["a", "b"]


# ---------------------------------------------------------------------------------------------
# AUDIT properties

AUDIT = "AUDIT (\n  name positive{props}\n);\nSELECT * FROM @this_model WHERE a < @threshold\n"
AUDITED = ",\n  audits (positive(threshold := 0))"
AUDIT_VARIANTS = {
    "dialect": ",\n  dialect duckdb",
    "blocking": ",\n  blocking false",
}


def _audited(tmp_path: Path, audit_props: str = "", attach: str = AUDITED) -> Project:
    root = project_with(tmp_path, props=attach, files={"audits/a.sql": AUDIT.format(props=audit_props)})
    return load_project(root, use_cache=False)


def test_every_audit_key_has_a_probe() -> None:
    probed = set(AUDIT_VARIANTS) | {"name", "defaults", "skip", "standalone", "description"}
    assert probed == AUDIT_KEYS


@pytest.mark.parametrize("key", sorted(AUDIT_VARIANTS))
def test_audit_property_changes_the_fingerprint(tmp_path: Path, key: str) -> None:
    base = build_snapshots(_audited(tmp_path))["s.m"].fingerprint
    changed = build_snapshots(_audited(tmp_path, AUDIT_VARIANTS[key]))["s.m"].fingerprint
    assert changed != base


def test_audit_name_is_what_models_attach(tmp_path: Path) -> None:
    assert "positive" in _audited(tmp_path).audits
    refused(lambda: _audited(tmp_path, attach=",\n  audits (negative)"), "unknown audit 'negative'")


def test_audit_defaults_change_the_rendered_audit(tmp_path: Path) -> None:
    from mesh_dagster.core.project.audits import audit_query
    from mesh_dagster.core.sql.renderer import RenderContext

    def rendered(project: Project) -> str:
        model = project.models["s.m"]
        sql, _ = audit_query(model.audits[0], model, project.audits, RenderContext(), project.macros)
        return sql

    base = rendered(_audited(tmp_path, attach=",\n  audits (positive(threshold := 0))"))
    defaulted = rendered(_audited(tmp_path, ",\n  defaults (threshold = 5)", attach=",\n  audits (positive)"))
    assert "< 0" in base and "< 5" in defaulted


@pytest.mark.parametrize("key", ["skip", "standalone"])
def test_audit_skip_and_standalone_false_change_nothing(tmp_path: Path, key: str) -> None:
    base = build_snapshots(_audited(tmp_path))["s.m"].fingerprint
    assert build_snapshots(_audited(tmp_path, f",\n  {key} false"))["s.m"].fingerprint == base


def test_audit_skip_true_is_refused(tmp_path: Path) -> None:
    refused(lambda: _audited(tmp_path, ",\n  skip true"), "audits/a.sql:3:", "not supported by mesh_dagster yet")


def test_audit_standalone_true_makes_a_node(tmp_path: Path) -> None:
    """tests/unit/test_standalone_audits.py checks the node and its properties (NODE_PROPERTIES)."""
    project = _audited(tmp_path, ",\n  standalone true,\n  defaults (threshold = 0)", attach="")
    assert project.models["positive"].kind.is_standalone_audit


def test_audit_description_is_kept(tmp_path: Path) -> None:
    assert _audited(tmp_path, ",\n  description 'No negative a'").audits["positive"].description == "No negative a"


# ---------------------------------------------------------------------------------------------
# external models


def test_every_external_model_key_has_a_probe() -> None:
    # `start` and `audits`: tests/unit/test_standalone_audits.py, tests/spark/test_standalone_audits_spark.py
    assert EXTERNAL_KEYS == {"name", "columns", "description", "dialect", "gateway", "start", "audits"}


def test_external_model_keys(tmp_path: Path) -> None:
    def external(entry: str) -> Project:
        root = project_with(tmp_path, files={"external_models.yaml": textwrap.dedent(entry).lstrip()})
        return load_project(root, use_cache=False)

    plain = external("- name: raw.events\n")
    assert "raw.events" in plain.models and plain.columns("raw.events") is None
    typed = external("- name: raw.events\n  columns:\n    ts: TIMESTAMP\n")
    assert typed.columns("raw.events") == {"ts": "TIMESTAMP"}
    assert external("- name: raw.events\n  columns:\n    ts: TIMESTAMP\n  dialect: duckdb\n").columns("raw.events") == {
        "ts": "TIMESTAMP_NTZ"}
    assert external("- name: raw.events\n  description: Raw events\n").models["raw.events"].description == "Raw events"
    refused(lambda: external("- name: raw.events\n  owner: jen\n"), "external_models.yaml:2:", "owner")


def test_external_models_folder_and_gateways(tmp_path: Path) -> None:
    """SQLMesh reads every YAML file of `external_models/` beside `external_models.yaml`, and keeps
    an entry naming a `gateway` only for that gateway."""
    config = CONFIG + "gateways:\n  local: {}\n  other: {}\n"
    root = project_with(tmp_path, config=config, files={
        "external_models.yaml": "- name: raw.top\n",
        "external_models/a.yaml": "- name: raw.a\n  columns:\n    id: INT\n",
        "external_models/b.yml": "- name: raw.b\n  gateway: other\n- name: raw.c\n  gateway: LOCAL\n",
        "external_models/notes.txt": "not read",
    })
    local = load_project(root, use_cache=False)
    assert {"raw.top", "raw.a", "raw.c"} <= set(local.models) and "raw.b" not in local.models
    assert local.columns("raw.a") == {"id": "INT"}
    other = load_project(root, gateway="other", use_cache=False)
    assert "raw.b" in other.models and "raw.c" not in other.models
    (root / "external_models" / "bad.yaml").write_text("- name: raw.d\n  audits: [not_null]\n")
    refused(lambda: load_project(root, use_cache=False), "external_models/bad.yaml:2:", "not_null", "columns")


# ---------------------------------------------------------------------------------------------
# config.yaml

SPARK_PROBES = {
    "gateways.*.connection.catalog": "test_connection_catalog_is_set_on_the_session",
    "plan.auto_apply": "test_plan_auto_apply_applies_without_asking",
}


def _config(tmp_path: Path, text: str) -> ProjectConfig:
    root = tmp_path / f"c{len(list(tmp_path.iterdir())) if tmp_path.exists() else 0}"
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(textwrap.dedent(text).lstrip())
    return load_config(root)


def _session_settings(tmp_path: Path, conn: SparkConnectionConfig) -> dict[str, str]:
    from mesh_dagster.engine.session import local_session_config

    return local_session_config(conn, tmp_path / "mesh")


def _cli(root: Path, *args: str, input: str | None = None) -> str:
    from click.testing import CliRunner

    from mesh_dagster.cli.main import cli

    result = CliRunner().invoke(cli, ["-p", str(root), *args], input=input)
    return result.output


def probe_gateways(tmp_path: Path) -> None:
    config = _config(tmp_path, "gateways:\n  a:\n    variables: {x: 1}\n  b:\n    variables: {x: 2}\n")
    assert config.variables_for("a") == {"x": 1} and config.variables_for("b") == {"x": 2}


def probe_default_gateway(tmp_path: Path) -> None:
    config = _config(tmp_path, "gateways:\n  a: {}\n  b:\n    variables: {x: 2}\ndefault_gateway: b\n")
    assert config.variables_for() == {"x": 2}


def probe_connection(tmp_path: Path) -> None:
    """The connection section as a whole selects the Spark the session is built for."""
    probe_connection_master(tmp_path)


def probe_connection_type(tmp_path: Path) -> None:
    """Another engine's gateway is accepted while not selected (SQLMesh connects to the selected one)."""
    two = "gateways:\n  a:\n    connection:\n      type: duckdb\n  b:\n    connection:\n      type: spark\n"
    assert _config(tmp_path, two).gateway("b").connection.type == "spark"
    refused(lambda: _config(tmp_path, two).gateway("a"), "config.yaml:4: Gateway 'a' connects to duckdb")


def probe_connection_master(tmp_path: Path) -> None:
    local = _session_settings(tmp_path, SparkConnectionConfig(master="local[2]"))
    cluster = _session_settings(tmp_path, SparkConnectionConfig(master="spark://host:7077"))
    assert "spark.sql.warehouse.dir" in local and "spark.sql.warehouse.dir" not in cluster


def probe_connection_remote(tmp_path: Path) -> None:
    remote = SparkConnectionConfig(remote="sc://spark.example.com:15002")
    assert not remote.is_local and "spark.sql.warehouse.dir" not in _session_settings(tmp_path, remote)


def probe_connection_config(tmp_path: Path) -> None:
    settings = _session_settings(tmp_path, SparkConnectionConfig(config={"spark.executor.cores": 3}))
    assert settings["spark.executor.cores"] == "3"


def probe_connection_concurrent_tasks(tmp_path: Path) -> None:
    config = _config(tmp_path, "gateways:\n  a:\n    connection:\n      concurrent_tasks: 3\n")
    assert config.gateway("a").connection.concurrent_tasks == 3
    assert SparkConnectionConfig().concurrent_tasks == 4  # SQLMesh's default on Spark
    refused(lambda: _config(tmp_path, "gateways:\n  a:\n    connection:\n      concurrent_tasks: 0\n"),
            "config.yaml:4:", "concurrent_tasks", "greater than or equal to 1")


def probe_connection_server(tmp_path: Path) -> None:
    """Honoured by the warm server's tests (tests/spark/test_warm_server.py); here: read, and refused
    where no server runs."""
    config = _config(tmp_path, "gateways:\n  a:\n    connection:\n      server:\n        enabled: false\n")
    assert config.gateway("a").connection.server.enabled is False
    refused(lambda: _config(tmp_path, "gateways:\n  a:\n    connection:\n      master: yarn\n      server:\n"
                                      "        enabled: true\n"), "config.yaml:5:", "server", "embedded Derby metastore only")


def probe_connection_server_enabled(tmp_path: Path) -> None:
    from mesh_dagster.engine.connect_server import server_requested
    from mesh_dagster.engine.server_record import SERVER_ENV

    saved = os.environ.pop(SERVER_ENV, None)
    try:
        assert server_requested(SparkConnectionConfig()) is True  # the default
        assert server_requested(SparkConnectionConfig(server={"enabled": False})) is False
    finally:
        if saved is not None:
            os.environ[SERVER_ENV] = saved


def probe_connection_server_idle_minutes(tmp_path: Path) -> None:
    config = _config(tmp_path, "gateways:\n  a:\n    connection:\n      server:\n        idle_minutes: 0.5\n")
    assert config.gateway("a").connection.server.idle_minutes == 0.5
    assert SparkConnectionConfig().server.idle_minutes == 30
    refused(lambda: _config(tmp_path, "gateways:\n  a:\n    connection:\n      server:\n        idle_minutes: 0\n"),
            "config.yaml:5:", "idle_minutes", "greater than 0")


STATE_FIELDS = {"type": "postgres", "database": "mesh", "host": "db.example.com", "port": 6543, "user": "me",
                "password": "secret", "url": "postgresql+psycopg://other/db"}


def _state_url(tmp_path: Path, section: str, body: dict[str, Any]) -> str:
    import yaml

    raw = {"gateways": {"a": {"state_connection": body}}} if section == "gateway" else {"state_connection": body}
    return _config(tmp_path, yaml.safe_dump(raw)).state_connection_for().to_url(tmp_path)


def state_probe(section: str, field: str) -> Callable[[Path], None]:
    """The state store's URL without and with the field (postgres fields on a postgres store)."""

    def probe(tmp_path: Path) -> None:
        base = {"type": "postgres"} if field not in ("type", "url") else {}
        with_field = _state_url(tmp_path, section, {**base, field: STATE_FIELDS[field]})
        assert _state_url(tmp_path, section, base) != with_field, f"state_connection.{field} changed nothing"

    return probe


def probe_gateway_state_connection(tmp_path: Path) -> None:
    config = _config(tmp_path, "state_connection: {database: top.db}\ngateways:\n  a:\n    state_connection: {database: a.db}\n")
    assert config.state_connection_for().to_url(tmp_path).endswith("/a.db")


def probe_state_connection(tmp_path: Path) -> None:
    assert _config(tmp_path, "state_connection: {database: top.db}\n").state_connection_for().to_url(tmp_path).endswith("/top.db")


def probe_gateway_variables(tmp_path: Path) -> None:
    config = _config(tmp_path, "variables: {x: 1}\ngateways:\n  a:\n    variables: {x: 2}\n")
    assert config.variables_for() == {"x": 2}


def _defaults_model(tmp_path: Path, defaults: str) -> Any:
    root = write_project(tmp_path / f"d{len(list(tmp_path.iterdir()))}", {"models/m.sql": MODEL.format(kind="FULL", props="")},
                         "model_defaults:\n" + textwrap.indent(textwrap.dedent(defaults), "  "))
    return load_project(root, use_cache=False).models["s.m"]


def defaults_probe(key: str, value: str, field: str, expected: Any) -> Callable[[Path], None]:
    def probe(tmp_path: Path) -> None:
        model = _defaults_model(tmp_path, f"{key}: {value}\n")
        found = getattr(model, field)
        assert (expected(found) if callable(expected) else found == expected), found

    return probe


def policy_probe(key: str) -> Callable[[Path], None]:
    """A model_defaults policy reaches incremental models that set none, and not those that do."""

    def probe(tmp_path: Path) -> None:
        own = f", {key} allow" if key == "on_destructive_change" else f", {key} error"
        models = {"models/m.sql": MODEL.format(kind=INCREMENTAL.format(kind_props=""), props=""),
                  "models/own.sql": MODEL.format(kind=INCREMENTAL.format(kind_props=own), props="").replace("s.m", "s.own")}
        root = write_project(tmp_path, models, CONFIG + f"  {key}: warn\n")  # CONFIG ends in model_defaults
        loaded = load_project(root, use_cache=False).models
        assert getattr(loaded["s.m"].kind, key).value == "warn"
        assert getattr(loaded["s.own"].kind, key).value != "warn"

    return probe


def probe_variables(tmp_path: Path) -> None:
    query = "MODEL (name s.m, kind FULL);\nSELECT @threshold AS a\n"
    fingerprints = []
    for value in (1, 2):
        root = write_project(tmp_path / f"v{value}", {"models/m.sql": query}, CONFIG + f"variables:\n  threshold: {value}\n")
        fingerprints.append(build_snapshots(load_project(root, use_cache=False))["s.m"].fingerprint.data_hash)
    assert fingerprints[0] != fingerprints[1]


def probe_project(tmp_path: Path) -> None:
    """A multi-repo project's repositories name their models (tests/unit/test_repos.py has the rest)."""
    first = write_project(tmp_path / "one", {"models/p.sql": PARENT}, CONFIG + "project: one\n")
    second = write_project(tmp_path / "two", {"models/c.sql": "MODEL (name s.c, kind FULL);\nSELECT a FROM s.p\n"},
                           CONFIG + "project: two\n")
    project = load_project(first, use_cache=False, repos=[second])
    assert (project.models["s.p"].project, project.models["s.c"].project) == ("one", "two")
    assert project.parents("s.c") == ["s.p"]


def probe_snapshot_ttl(tmp_path: Path) -> None:
    """The janitor forgets unreferenced snapshots older than the TTL (symbolic models: no engine)."""
    from mesh_dagster.execution.apply.janitor import run_janitor

    files = {"external_models.yaml": "- name: raw.events\n",
             "models/m.sql": "MODEL (name s.m, kind EMBEDDED);\nSELECT 1 AS a FROM raw.events\n"}
    kept = []
    for ttl in ("in 1 week", "0 seconds"):
        root = write_project(tmp_path / f"ttl{len(kept)}", files, CONFIG + f"snapshot_ttl: {ttl}\n")
        project = load_project(root, use_cache=False)
        with StateStore(f"sqlite:///{root / 'state.db'}") as state:
            state.snapshots.push_snapshots(build_plan(project, state, "dev", execution_time="2020-01-04").new_snapshots)
            run_janitor(project.config, state, engine_factory=_no_engine)
            kept.append(len(state.snapshots.all_snapshot_ids()))
    assert kept == [2, 0]


def _no_engine() -> None:
    raise AssertionError("the janitor needed Spark for symbolic models")


def _expiration(tmp_path: Path, extra: str, environment: str) -> int | None:
    from mesh_dagster.execution.apply.apply import _expiration

    root = write_project(tmp_path / f"e{len(list(tmp_path.iterdir()))}", {"models/p.sql": PARENT}, CONFIG + extra)
    project = load_project(root, use_cache=False)
    with StateStore(f"sqlite:///{root / 'state.db'}") as state:
        plan = build_plan(project, state, environment, execution_time="2020-01-04")
    return _expiration(plan, project)


def probe_environment_ttl(tmp_path: Path) -> None:
    from mesh_dagster.core.time.dates import now_ms

    week = _expiration(tmp_path, "environment_ttl: in 1 week\n", "dev")
    year = _expiration(tmp_path, "environment_ttl: in 1 year\n", "dev")
    assert week is not None and year is not None and year - week > 300 * 86_400_000 and week > now_ms()


def probe_pinned_environments(tmp_path: Path) -> None:
    assert _expiration(tmp_path, "", "dev") is not None
    assert _expiration(tmp_path, "pinned_environments: [dev]\n", "dev") is None


def probe_default_target_environment(tmp_path: Path) -> None:
    root = write_project(tmp_path / "dte", {"models/p.sql": PARENT}, CONFIG + "default_target_environment: feature_x\n")
    assert "New environment `feature_x`" in _cli(root, "plan", "--explain")


def probe_plan(tmp_path: Path) -> None:
    probe_plan_include_unmodified(tmp_path)


def probe_plan_include_unmodified(tmp_path: Path) -> None:
    promoted = []
    for flag in ("false", "true"):
        root = write_project(tmp_path / f"inc_{flag}", {"models/p.sql": PARENT, "models/m.sql": MODEL.format(kind="FULL", props="")},
                             CONFIG + f"plan:\n  include_unmodified: {flag}\n")
        project = load_project(root, use_cache=False)
        with StateStore(f"sqlite:///{root / 'state.db'}") as state:
            from project_builder import record_plan

            record_plan(build_plan(project, state, execution_time="2020-01-04"), state)
            (root / "models" / "m.sql").write_text((root / "models" / "m.sql").read_text().replace("1 AS a", "2 AS a"))
            plan = build_plan(load_project(root, use_cache=False), state, "dev", execution_time="2020-01-04")
            promoted.append(sorted(plan.promoted))
    assert promoted == [["s.m"], ["s.m", "s.p"]]


def probe_plan_no_prompts(tmp_path: Path) -> None:
    outputs = []
    for extra in ("", "plan:\n  no_prompts: true\n"):
        root = write_project(tmp_path / f"np{len(outputs)}", {"models/p.sql": PARENT}, CONFIG + extra)
        outputs.append(_cli(root, "plan", "--skip-tests", input="n\n"))
    assert "Apply - " in outputs[0] and "Plan not applied." in outputs[0]
    assert "Apply - " not in outputs[1] and "use --auto-apply" in outputs[1]


def _second_plan(tmp_path: Path, plan_config: str, files: dict[str, str], edit: tuple[str, str, str]) -> Any:
    """A dev plan after recording prod, with one file edited, under `plan:` settings."""
    from project_builder import record_plan

    root = write_project(tmp_path / f"pc{len(list(tmp_path.iterdir()))}", files, CONFIG + plan_config)
    with StateStore(f"sqlite:///{root / 'state.db'}") as state:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-04"), state)
        path = root / edit[0]
        path.write_text(path.read_text().replace(edit[1], edit[2]))
        return build_plan(load_project(root, use_cache=False), state, "dev", execution_time="2020-01-04")


INCREMENTAL_FILES = {"models/m.sql": MODEL.format(kind=INCREMENTAL.format(kind_props=""), props="")}
INCREMENTAL_EDIT = ("models/m.sql", "1 AS a", "2 AS a")


def probe_plan_forward_only(tmp_path: Path) -> None:
    categories = [_second_plan(tmp_path, f"plan:\n  forward_only: {flag}\n", INCREMENTAL_FILES,
                               INCREMENTAL_EDIT).category("s.m").name for flag in ("false", "true")]
    assert categories == ["BREAKING", "FORWARD_ONLY"]


def categorize_probe(source: str) -> Callable[[Path], None]:
    """`plan.auto_categorize_changes.<source>: off` makes the plan ask about that source's changes only."""
    from mesh_dagster.core.plan.manual_categories import needs_choice

    python_model = ("from mesh_dagster import model\n\n\n@model('s.m', columns={'a': 'int'})\n"
                    "def execute(context, start, end, execution_time):\n    return 1\n")
    files = {"sql": INCREMENTAL_FILES,
             "python": {"models/m.py": python_model},
             "seed": {"models/m.sql": SEED_MODEL.format(csv="t.csv", kind_props="", props=""), "seeds/t.csv": "a\n1\n"},
             "external": {"external_models.yaml": "- name: raw.t\n  columns:\n    a: int\n",
                          "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT a FROM raw.t\n"}}[source]
    edit = {"sql": INCREMENTAL_EDIT, "python": ("models/m.py", "return 1", "return 2"), "seed": ("seeds/t.csv", "1", "2"),
            "external": ("external_models.yaml", "a: int", "a: bigint")}[source]
    name = "raw.t" if source == "external" else "s.m"

    def probe(tmp_path: Path) -> None:
        asked = []
        for mode in ("full", "off"):
            config = f"plan:\n  auto_categorize_changes:\n    {source}: {mode}\n"
            plan = _second_plan(tmp_path, config, files, edit)
            asked.append(needs_choice(plan, load_config(plan_root(tmp_path)).plan.auto_categorize_changes))
        assert asked == [[], [name]], asked

    return probe


def plan_root(tmp_path: Path) -> Path:
    return max(tmp_path.iterdir(), key=lambda p: p.stat().st_mtime)


def _linted(tmp_path: Path, linter: str) -> set[tuple[str, bool]]:
    """(rule, is an error) of what the linter finds on models with no owner and no audits."""
    report = lint(load_project(project_with(tmp_path, config=CONFIG + linter), use_cache=False))
    return {(f.rule, f.error) for f in report.findings}


def probe_linter(tmp_path: Path) -> None:
    assert _linted(tmp_path, "linter:\n  enabled: false\n  rules: [nomissingowner]\n") == set()  # SQLMesh's default
    refused(lambda: _config(tmp_path, "linter:\n  enabled: false\n  rulez: all\n"), "config.yaml:3:",
            "linter.rulez", "unknown setting")


LINTER_PROBES = {
    "linter.enabled": ("linter:\n  enabled: true\n  rules: [nomissingowner]\n", {("nomissingowner", True)}),
    "linter.rules": ("linter:\n  enabled: true\n  rules: [NoMissingAudits]\n", {("nomissingaudits", True)}),
    "linter.warn_rules": ("linter:\n  enabled: true\n  rules: [nomissingowner]\n  warn_rules: [nomissingaudits]\n",
                          {("nomissingowner", True), ("nomissingaudits", False)}),
    "linter.ignored_rules": ("linter:\n  enabled: true\n  rules: ALL\n  ignored_rules: [nomissingaudits]\n",
                             {("nomissingowner", True)}),
}


def linter_probe(key: str) -> Callable[[Path], None]:
    def probe(tmp_path: Path) -> None:
        text, expected = LINTER_PROBES[key]
        assert _linted(tmp_path, text) == expected
        refused(lambda: _linted(tmp_path, re.sub("(?i)nomissing", "nomisssing", text)), "config.yaml:", "unknown rule")

    return probe


def test_a_python_config_beside_config_yaml_is_refused_not_ignored(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (root / "config.py").write_text("from sqlmesh.core.config import Config\nconfig = Config()\n")
    refused(lambda: load_config(root), "config.py:1:", "Both config.yaml and config.py", "reads one")
    (root / "config.yaml").unlink()
    assert load_config(root).model_defaults.dialect == "spark"  # config.py alone: read (tests/unit/test_python_config.py)


def probe_model_defaults(tmp_path: Path) -> None:
    defaults_probe("owner", "jen", "owner", "jen")(tmp_path)


def probe_default_session_properties(tmp_path: Path) -> None:
    """Every model gets them; a model's own setting of a key wins; a static setting is refused."""
    models = {"models/m.sql": MODEL.format(kind="FULL", props=",\n  session_properties (spark.sql.ansi.enabled = true)")}
    config = CONFIG + "  session_properties:\n    spark.sql.ansi.enabled: false\n    spark.sql.shuffle.partitions: 4\n"
    model = load_project(write_project(tmp_path / "d", models, config), use_cache=False).models["s.m"]
    assert model.session_properties == {"spark.sql.shuffle.partitions": "4", "spark.sql.ansi.enabled": "true"}
    static = CONFIG + "  session_properties:\n    spark.executor.memory: 2g\n"
    refused(lambda: load_config(write_project(tmp_path / "s", {}, static)), "spark.executor.memory",
            "fixed when the session starts")


def probe_default_allow_partials(tmp_path: Path) -> None:
    """It reaches time-range models; kinds it means nothing for load without it rather than fail."""
    models = {"models/m.sql": MODEL.format(kind=INCREMENTAL.format(kind_props=""), props=""),
              "models/view.sql": MODEL.format(kind="VIEW", props="").replace("s.m", "s.view")}
    loaded = load_project(write_project(tmp_path, models, CONFIG + "  allow_partials: true\n"), use_cache=False).models
    assert (loaded["s.m"].allow_partials, loaded["s.view"].allow_partials) == (True, False)


def protection_probe(key: str) -> Callable[[Path], None]:
    """A protected prod refuses a direct apply; approvers decide; allow_self_approval lets the author."""

    def probe(tmp_path: Path) -> None:
        import os

        from mesh_dagster.context import Context
        from mesh_dagster.core.plan.review import ProtectionError
        from tests.execution.fake_engine import FakeEngine

        self_ok = "true" if key == "protected_environments.*.allow_self_approval" else "false"
        config = CONFIG + f"protected_environments:\n  prod:\n    approvers: [ann]\n    allow_self_approval: {self_ok}\n"
        context = Context(write_project(tmp_path / "prot", {"models/p.sql": PARENT}, config), engine=FakeEngine())
        old = os.environ.get("MESH_USER")
        os.environ["MESH_USER"] = "ann"
        try:
            plan = context.plans.plan(execution_time="2020-01-04")
            refused(lambda: context.reviews.apply(plan), "'prod' is a protected environment")
            context.reviews.record(plan)
            if key == "protected_environments.*.approvers":
                os.environ["MESH_USER"] = "zed"
                refused(lambda: context.decide(plan.plan_id, "approve"), "zed may not approve", "its approvers are ann")
            elif self_ok == "true":
                assert context.decide(plan.plan_id, "approve").status.value == "approved"
            else:
                with pytest.raises(ProtectionError, match="ann made plan"):
                    context.decide(plan.plan_id, "approve")
        finally:
            os.environ.pop("MESH_USER") if old is None else os.environ.__setitem__("MESH_USER", old)

    return probe


def notification_probe(key: str) -> Callable[[Path], None]:
    """Targets get the events they ask for (tests/state/test_plan_reviews.py posts to a real server);
    here: each key is read, and a bad value is refused naming it."""

    def probe(tmp_path: Path) -> None:
        target = "  - url: http://127.0.0.1:9/h\n    type: webhook\n    events: [run_failed]\n"
        (loaded,) = _config(tmp_path, f"notification_targets:\n{target}").notification_targets
        assert (loaded.url, loaded.type, loaded.events) == ("http://127.0.0.1:9/h", "webhook", ["run_failed"])
        assert loaded.wants("run_failed") and not loaded.wants("plan_applied")
        bad = {"notification_targets": "  - 7\n", "notification_targets.url": "  - url: nowhere\n",
               "notification_targets.type": "  - url: http://x\n    type: email\n",
               "notification_targets.events": "  - url: http://x\n    events: [someday]\n"}[key]
        refused(lambda: _config(tmp_path, f"notification_targets:\n{bad}"), "notification_targets")

    return probe


def git_probe(key: str) -> Callable[[Path], None]:
    """Each `git:` key is read (the git-driven flow itself is tests/state/test_git_plans.py, on real
    repositories), and a bad value is refused naming it."""

    def probe(tmp_path: Path) -> None:
        text = ("protected_environments:\n  prod:\n    approvers: [bob@example.com]\n"
                "git:\n  repo: ../w.git\n  branches: ['feature/*']\n  protected: [release]\n  project_path: sub\n"
                "  tick_timeout_s: 5\n  poll_interval_s: 7\n  plan_timeout_s: 60\n  worker_env: [SPARK_TOKEN]\n")
        watch = _config(tmp_path, text).git
        assert watch is not None
        assert (watch.repo, watch.branches, watch.protected, watch.project_path, watch.tick_timeout_s,
                watch.poll_interval_s, watch.plan_timeout_s, watch.worker_env) == (
            "../w.git", ["feature/*"], ["release"], "sub", 5.0, 7, 60.0, ["SPARK_TOKEN"])
        bad = {"git": "git: yes\n", "git.repo": "git:\n  branches: ['*']\n",
               "git.branches": "git:\n  repo: r\n  branches: 3\n", "git.protected": "git:\n  repo: r\n  protected: 3\n",
               "git.project_path": "git:\n  repo: r\n  project_path: [a]\n",
               "git.tick_timeout_s": "git:\n  repo: r\n  tick_timeout_s: 0\n",
               "git.poll_interval_s": "git:\n  repo: r\n  poll_interval_s: 0\n",
               "git.plan_timeout_s": "git:\n  repo: r\n  plan_timeout_s: -1\n",
               "git.worker_env": "git:\n  repo: r\n  worker_env: ['sk-live-123 secret']\n"}[key]
        refused(lambda: _config(tmp_path, bad), key.split(".")[-1] if key != "git" else "git")

    return probe


def statements_probe(key: str) -> Callable[[Path], None]:
    """The entries run on the engine, first (`before_all`) or last (`after_all`) of an apply."""

    def probe(tmp_path: Path) -> None:
        from mesh_dagster.context import Context
        from tests.execution.fake_engine import FakeEngine

        root = write_project(tmp_path / key, {"models/p.sql": PARENT},
                             CONFIG + f"{key}:\n  - \"INSERT INTO audit.log SELECT @this_env\"\n")
        engine = FakeEngine()
        context = Context(root, engine=engine)
        context.reviews.apply(context.plans.plan("dev", start="2020-01-01", end="2020-01-01", execution_time="2020-01-04"))
        call = engine.calls[0 if key == "before_all" else -1]
        assert (call.method, call.args.get("sql")) == ("execute", "INSERT INTO audit.log SELECT 'dev'"), engine.calls

    return probe


def dagster_probe(key: str) -> Callable[[Path], None]:
    """Each `dagster.storage` key lands in the dagster.yaml `mesh ui` writes (or its environment),
    and a bad value is refused naming it (tests/dagster/test_instance_postgres.py runs it on Postgres)."""

    def probe(tmp_path: Path) -> None:
        import yaml

        from mesh_dagster.dagster.ui.workspace import dagster_env, instance_config

        text = ("dagster:\n  storage:\n    type: postgres\n    host: db\n    port: 6543\n    database: dg\n"
                "    user: u\n    password_env: PW\n    event_batch_size: 50\n")
        storage = _config(tmp_path, text).dagster.storage
        written = yaml.safe_load(instance_config(storage))["storage"]["postgres"]["postgres_db"]
        assert (written["hostname"], written["port"], written["db_name"], written["username"], written["password"]) \
            == ("db", 6543, "dg", "u", {"env": "PW"})
        assert dagster_env(tmp_path / "w.yaml", storage)["DAGSTER_EVENT_BATCH_SIZE"] == "50"
        bad = {"dagster": "dagster: 3\n", "dagster.storage": "dagster:\n  storage: 3\n",
               "dagster.storage.type": "dagster:\n  storage:\n    type: mysql\n",
               "dagster.storage.host": "dagster:\n  storage:\n    host: db\n",
               "dagster.storage.port": "dagster:\n  storage:\n    type: postgres\n    database: d\n    port: 0\n",
               "dagster.storage.database": "dagster:\n  storage:\n    type: postgres\n",
               "dagster.storage.user": "dagster:\n  storage:\n    user: u\n",
               "dagster.storage.password_env": "dagster:\n  storage:\n    type: postgres\n    database: d\n"
                                               "    password_env: a b\n",
               "dagster.storage.event_batch_size": "dagster:\n  storage:\n    type: postgres\n    database: d\n"
                                                   "    event_batch_size: -1\n"}[key]
        refused(lambda: _config(tmp_path, bad), key.split(".")[-1])

    return probe


def probe_sensor_interval(tmp_path: Path) -> None:
    """The re-stamp and plan status sensors of every environment look that often; out of 5..3600
    refused naming the key."""
    from mesh_dagster.dagster import definitions

    root = write_project(tmp_path / "p", {"models/m.sql": "MODEL (name s.m, kind FULL); SELECT 1 AS a"},
                         CONFIG + "dagster:\n  sensor_interval_s: 7\n")
    defs = definitions(root, ["prod", "dev"], shared_spark=False)
    intervals = {s.name: s.minimum_interval_seconds for s in defs.sensors or []
                 if s.name.startswith(("restamp_", "plan_status_"))}
    assert intervals == {f"{kind}_{env}_sensor": 7 for kind in ("restamp", "plan_status") for env in ("prod", "dev")}
    refused(lambda: _config(tmp_path, "dagster:\n  sensor_interval_s: 1\n"), "sensor_interval_s")


CONFIG_PROBES: dict[str, Callable[[Path], None]] = {
    "gateways": probe_gateways,
    "default_gateway": probe_default_gateway,
    "gateways.*.connection": probe_connection,
    "gateways.*.connection.type": probe_connection_type,
    "gateways.*.connection.master": probe_connection_master,
    "gateways.*.connection.remote": probe_connection_remote,
    "gateways.*.connection.config": probe_connection_config,
    "gateways.*.connection.concurrent_tasks": probe_connection_concurrent_tasks,
    "gateways.*.connection.server": probe_connection_server,
    "gateways.*.connection.server.enabled": probe_connection_server_enabled,
    "gateways.*.connection.server.idle_minutes": probe_connection_server_idle_minutes,
    **TEAM_CONFIG_PROBES,  # metastore, warehouse, connect_timeout: tests/team/config_probes.py
    "gateways.*.state_connection": probe_gateway_state_connection,
    **{f"gateways.*.state_connection.{f}": state_probe("gateway", f) for f in STATE_FIELDS},
    "gateways.*.variables": probe_gateway_variables,
    "model_defaults": probe_model_defaults,
    "model_defaults.dialect": defaults_probe("dialect", "duckdb", "dialect", "duckdb"),
    "model_defaults.start": defaults_probe("start", "2021-03-04", "start", "2021-03-04"),
    "model_defaults.cron": defaults_probe("cron", "'@hourly'", "cron", "@hourly"),
    "model_defaults.owner": defaults_probe("owner", "jen", "owner", "jen"),
    "model_defaults.cron_tz": defaults_probe("cron_tz", "Europe/Paris", "cron_tz", "Europe/Paris"),
    "model_defaults.interval_unit": defaults_probe("interval_unit", "hour", "interval_unit", IntervalUnit.HOUR),
    "model_defaults.allow_partials": probe_default_allow_partials,
    "model_defaults.storage_format": defaults_probe("storage_format", "orc", "storage_format", "orc"),
    "model_defaults.audits": defaults_probe("audits", "['not_null(columns := (a))']", "audits",
                                            lambda refs: [r.name for r in refs] == ["not_null"]),
    "model_defaults.on_destructive_change": policy_probe("on_destructive_change"),
    "model_defaults.on_additive_change": policy_probe("on_additive_change"),
    "model_defaults.session_properties": probe_default_session_properties,
    "variables": probe_variables,
    "snapshot_ttl": probe_snapshot_ttl,
    "environment_ttl": probe_environment_ttl,
    "pinned_environments": probe_pinned_environments,
    "default_target_environment": probe_default_target_environment,
    "project": probe_project,
    "plan": probe_plan,
    "plan.include_unmodified": probe_plan_include_unmodified,
    "plan.no_prompts": probe_plan_no_prompts,
    "plan.forward_only": probe_plan_forward_only,
    "plan.auto_categorize_changes": categorize_probe("sql"),
    **{f"plan.auto_categorize_changes.{k}": categorize_probe(k) for k in ("sql", "python", "seed", "external")},
    **DATA_DIFF_PROBES,  # plan.data_diff.*: tests/unit/test_plan_data_diff.py
    "state_connection": probe_state_connection,
    **{f"state_connection.{f}": state_probe("top", f) for f in STATE_FIELDS},
    "linter": probe_linter,
    **{k: linter_probe(k) for k in LINTER_PROBES},
    "protected_environments": protection_probe("protected_environments"),
    "protected_environments.*.approvers": protection_probe("protected_environments.*.approvers"),
    "protected_environments.*.allow_self_approval": protection_probe("protected_environments.*.allow_self_approval"),
    **{k: notification_probe(k) for k in ("notification_targets", "notification_targets.url",
                                           "notification_targets.type", "notification_targets.events")},
    **{k: git_probe(k) for k in ("git", "git.repo", "git.branches", "git.protected", "git.project_path",
                                 "git.tick_timeout_s", "git.poll_interval_s", "git.plan_timeout_s", "git.worker_env")},
    "before_all": statements_probe("before_all"),
    "after_all": statements_probe("after_all"),
    **{k: dagster_probe(k) for k in ("dagster", "dagster.storage", *(f"dagster.storage.{f}" for f in (
        "type", "host", "port", "database", "user", "password_env", "event_batch_size")))},
    "dagster.sensor_interval_s": probe_sensor_interval,
}


def test_every_config_key_has_a_probe() -> None:
    assert set(CONFIG_PROBES) | set(SPARK_PROBES) == config_keys()


def test_spark_probes_exist() -> None:
    module = importlib.import_module("tests.spark.test_config_keys")
    for test_name in SPARK_PROBES.values():
        assert callable(getattr(module, test_name, None)), test_name


@pytest.mark.parametrize("key", sorted(CONFIG_PROBES))
def test_config_key_is_honoured_or_refused(tmp_path: Path, key: str) -> None:
    CONFIG_PROBES[key](tmp_path)


def test_blueprints_are_named_when_refused(tmp_path: Path) -> None:
    """SQLMesh's blueprints are refused by name, at their line, not as the error they would cause
    further on ("Model name part '@name'"). (Jinja blocks are supported: tests/unit/test_jinja.py.)"""
    root = write_project(tmp_path / "b", {"models/b.sql": (
        "MODEL (\n  name s.@name,\n  kind FULL,\n  blueprints @make_blueprints()\n);\nSELECT 1 AS x\n")})
    refused(lambda: load_project(root, use_cache=False), "models/b.sql:4:", "Unknown macro @make_blueprints")
