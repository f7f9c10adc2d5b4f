"""Reading MODEL blocks: properties, kinds and every malformed-input message."""

from pathlib import Path

import pytest

from mesh_dagster.core.config.config import ModelDefaults
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.kinds import KindName
from mesh_dagster.core.project.model_reader import read_audit_file, read_model_file

INCREMENTAL = """MODEL (
  name sqlmesh_example.incremental_model,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column (event_date, '%Y-%m-%d'),
    batch_size 10,
    lookback 2
  ),
  start '2020-01-01',
  cron '@daily',
  grain (id, event_date),
  tags (a, b),
  owner 'jen',
  audits (assert_positive_order_ids, not_null(columns := (id, item_id), blocking := false)),
);

@DEF(threshold, 1);

SELECT
  id,
  item_id,
  event_date,
FROM
  sqlmesh_example.seed_model
WHERE
  event_date between @start_date and @end_date
"""


def read(text: str, path: str = "models/m.sql"):
    return read_model_file(text, path, Path("/p") / path, ModelDefaults(start="2021-01-01"))


def test_reads_properties_and_statements():
    m = read(INCREMENTAL)
    assert m.name == "sqlmesh_example.incremental_model"
    assert m.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
    assert (m.kind.time_column, m.kind.time_column_format, m.kind.batch_size, m.kind.lookback) == (
        "event_date", "%Y-%m-%d", 10, 2)
    assert m.start == "2020-01-01" and m.cron == "@daily"
    assert m.grain == ["id", "event_date"] and m.tags == ["a", "b"] and m.owner == "jen"
    assert [a.name for a in m.audits] == ["assert_positive_order_ids", "not_null"]
    assert m.audits[1].args == {"columns": "(id, item_id)"} and m.audits[1].blocking is False
    assert m.macro_definitions == ["@DEF(threshold, 1)"]
    assert m.query.startswith("SELECT") and m.query_line == 18
    assert m.effective_partitioned_by == ["event_date"]


def test_join_keys_are_column_names_with_optional_aliases_as_sqlmesh_writes_them():
    """`grains`/`references` entries `column AS alias` (the name another model joins it by): kept
    as metadata, the columns checked like `grain`."""
    m = read("MODEL (name s.m, kind FULL, grains (id AS order_id, ds),\n  references (guest_id AS account_id, host));\n"
             "SELECT 1 AS id, 2 AS ds, 3 AS guest_id, 4 AS host")
    assert (m.grain, m.references) == (["id", "ds"], ["guest_id", "host"])
    assert m.key_aliases == {"id": "order_id", "guest_id": "account_id"}
    # a quoted column named with the word "as" in it is one column; AS splits only outside quotes
    m = read("MODEL (name s.m, kind FULL, grains (`price as of`, `valid as at` AS since));\n"
             "SELECT 1 AS `price as of`, 2 AS `valid as at`")
    assert (m.grain, m.key_aliases) == (["price as of", "valid as at"], {"valid as at": "since"})
    with pytest.raises(ModelError, match=r"models/m.sql:2: Alias 'a.b' is not supported"):
        read("MODEL (name s.m, kind FULL,\n  references (guest_id AS a.b));\nSELECT 3 AS guest_id")
    with pytest.raises(ModelError, match=r"models/m.sql:2: Expected column names, got the expression"):
        read("MODEL (name s.m, kind FULL,\n  references concat(a, b));\nSELECT 3 AS a, 4 AS b")


def test_defaults_apply():
    m = read("MODEL (name s.m, kind FULL); SELECT 1 AS a")
    assert m.start == "2021-01-01" and m.cron == "@daily" and m.dialect == "spark"


def test_seed_model_and_columns():
    m = read("MODEL (name s.seed, kind SEED (path '../seeds/x.csv'), columns (id INTEGER, d DATE), grain (id));",
             "models/seed.sql")
    assert m.kind.name == KindName.SEED and m.kind.path == "/p/seeds/x.csv"
    assert m.columns == {"id": "INT", "d": "DATE"} and m.query is None


def test_inline_audit():
    m = read("MODEL (name s.m, kind FULL, audits (positive));\nSELECT 1 AS a;\nAUDIT (name positive);\nSELECT * FROM @this_model WHERE a < 0;")
    assert m.inline_audits[0].name == "positive" and "a < 0" in m.inline_audits[0].query
    assert m.query == "SELECT 1 AS a"


@pytest.mark.parametrize(
    "text, message, line",
    [
        ("MODEL (name s.m, kind FULL\nSELECT 1", "never closed", 1),
        ("MODEL (\n  name s.m,\n  kind FULL,\n  bogus 1\n);\nSELECT 1", "Unknown model property 'bogus'", 4),
        ("MODEL (\n  name s.m,\n  kind INCREMENTAL_BY_SOMETHING\n);\nSELECT 1", "Unknown model kind 'INCREMENTAL_BY_SOMETHING'", 3),
        ("MODEL (\n  name s.m,\n  kind INCREMENTAL_BY_TIME_RANGE\n);\nSELECT 1", "need a time_column", 3),
        ("MODEL (\n  name s.m,\n  kind MANAGED\n);\nSELECT 1", "not supported", 3),
        ("MODEL (\n  name s.m,\n  cron 'every day'\n);\nSELECT 1", "Invalid cron 'every day'", 3),
        ("MODEL (\n  name s.m,\n  start 'last tuesdayish'\n);\nSELECT 1", "Invalid start", 3),
        ("MODEL (\n  kind FULL\n);\nSELECT 1", "needs a name", 1),
        ("MODEL (name s.m, kind FULL)\nSELECT 1", "must be followed by ';'", 2),
        ("MODEL (\n  name s.m,\n  name s.n\n);\nSELECT 1", "set twice", 3),
        ("MODEL (name s.m, kind FULL);\n", "has no query", 1),
        ("SELECT 1", "must start with a MODEL", 1),
        ("MODEL (\n  name s.m,\n  columns (id)\n);\nSELECT 1", "needs a type", 3),
        ("MODEL (\n  name s.m,\n  kind FULL (batch_size 3)\n);\nSELECT 1", "Unknown property 'batch_size' for kind FULL", 3),
        ("MODEL (\n  name s.m,\n  gateway 'other'\n);\nSELECT 1", "not supported by mesh_dagster yet", 3),
        ("MODEL (\n  name s.m,\n  cron_tz 'Europe/Pari'\n);\nSELECT 1", "did you mean Europe/Paris", 3),
        ("MODEL (\n  name s.m,\n  cron '@hourly',\n  interval_unit day\n);\nSELECT 1",
         "Invalid interval_unit 'day' for cron '@hourly'", 4),
        ("MODEL (\n  name s.m,\n  interval_unit week\n);\nSELECT 1", "expected one of year, month, day", 3),
        ("MODEL (\n  name s.m,\n  kind VIEW,\n  allow_partials true\n);\nSELECT 1",
         "allow_partials does not apply to VIEW models", 4),
        ("MODEL (\n  name s.m,\n  signals (1 + 2)\n);\nSELECT 1", "Signals are written `name`", 3),
        ("MODEL (name s.m, kind FULL);\nSELECT 'unterminated", "Cannot read SQL", None),
    ],
)
def test_malformed_model_blocks(text, message, line):
    with pytest.raises(ModelError) as e:
        read(text)
    assert message in e.value.message
    assert e.value.path == "models/m.sql"
    if line is not None:
        assert e.value.line == line


def test_audit_file_with_several_audits():
    audits = read_audit_file("AUDIT (name a, blocking false);\nSELECT 1;\n\nAUDIT (name b, defaults (threshold = 3));\nSELECT 2;",
                             "audits/x.sql")
    assert [(a.name, a.blocking, a.line) for a in audits] == [("a", False, 1), ("b", True, 4)]
    assert audits[1].defaults == {"threshold": "3"}


def test_audit_without_query():
    with pytest.raises(ModelError, match="has no query"):
        read_audit_file("AUDIT (name a);", "audits/x.sql")


# -- model_defaults.audits ------------------------------------------------------------------------

DEFAULT_AUDITS = ModelDefaults(audits=["not_null(columns := (a))", "assert_positive"])


@pytest.mark.parametrize("kind, attached", [("FULL", ["not_null", "assert_positive"]), ("VIEW", ["not_null", "assert_positive"]),
                                            ("EMBEDDED", [])])
def test_default_audits_attach_to_models_with_data(kind: str, attached: list[str]) -> None:
    m = read_model_file(f"MODEL (name s.m, kind {kind});\nSELECT 1 AS a", "models/m.sql", Path("/p/models/m.sql"),
                        DEFAULT_AUDITS)
    assert [r.name for r in m.audits] == attached
    assert all(r.default for r in m.audits)


def test_a_models_own_attachment_wins_over_the_default() -> None:
    m = read_model_file("MODEL (name s.m, kind FULL, audits (not_null(columns := (b), blocking := false)));\n"
                        "SELECT 1 AS a, 2 AS b", "models/m.sql", Path("/p/models/m.sql"), DEFAULT_AUDITS)
    assert [(r.name, r.args, r.blocking, r.default) for r in m.audits] == [
        ("not_null", {"columns": "(b)"}, False, False), ("assert_positive", {}, None, True)]


def test_unreadable_default_audit_is_a_value_error_naming_it() -> None:
    from mesh_dagster.core.project.model_reader import default_audit_refs

    with pytest.raises(ValueError, match=r"cannot read the audit 'not_null\(\(a\)\)'"):
        default_audit_refs(("not_null((a))",))


# -- names, kinds, csv_settings --------------------------------------------------------------------


@pytest.mark.parametrize("text, name", [("S.T", "s.t"), ("`s`.`t`", "s.t"), ('"s"."t1"', "s.t1"), ("t", "t"),
                                        ("s_1.t_2", "s_1.t_2")])
def test_model_names(text: str, name: str) -> None:
    assert read(f"MODEL (name {text}, kind FULL);\nSELECT 1 AS a").name == name


@pytest.mark.parametrize("text", ["c.s.t", "s.", ".t", "`s.t`.u", "s.`t x`", "s.`t;drop`", "s.t-1", "s.tâble"])
def test_model_names_spark_cannot_hold_are_refused(text: str) -> None:
    with pytest.raises(ModelError) as e:
        read(f"MODEL (\n  name {text},\n  kind FULL\n);\nSELECT 1 AS a")
    assert e.value.line == 2 and "not supported" in e.value.message


def test_csv_settings_are_read_as_the_values_pandas_expects() -> None:
    m = read("MODEL (name s.seed, kind SEED (path 'x.csv', csv_settings (delimiter = ';', keep_default_na = false, "
             "na_values = ('-', 'n/a'), encoding = 'latin-1')), columns (a INT));")
    assert m.kind.csv_settings == {"delimiter": ";", "keep_default_na": False, "na_values": ["-", "n/a"],
                                   "encoding": "latin-1"}


@pytest.mark.parametrize("cron, fmt, ok", [("@daily", "%Y%m%d", True), ("@daily", "%d/%m/%Y", True),
                                           ("@monthly", "%Y-%m", True), ("@daily", "%Y-%m", False),
                                           ("@hourly", "%Y-%m-%d", False), ("@hourly", "%Y-%m-%d %H", True),
                                           ("@daily", "nope", False)])
def test_time_column_format_must_tell_the_intervals_apart(cron: str, fmt: str, ok: bool) -> None:
    text = (f"MODEL (\n  name s.m,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '{fmt}')),\n  cron '{cron}'\n);\n"
            "SELECT '1' AS ds")
    if ok:
        assert read(text).kind.time_column_format == fmt
    else:
        with pytest.raises(ModelError, match="cannot tell the .* intervals") as e:
            read(text)
        assert e.value.line == 3


def test_property_lines_are_kept_for_later_messages() -> None:
    m = read(INCREMENTAL)
    assert (m.line_of("kind"), m.line_of("grain"), m.line_of("audits"), m.line_of("columns")) == (3, 10, 13, 1)


def test_declared_column_types_are_read_in_the_models_dialect() -> None:
    m = read("MODEL (name s.m, kind FULL, columns (a INT64, b TIMESTAMP), dialect bigquery);\nSELECT 1 AS a, 2 AS b")
    assert m.columns == {"a": "BIGINT", "b": "TIMESTAMP"}
    m = read("MODEL (name s.m, kind FULL, dialect duckdb, columns (b TIMESTAMP));\nSELECT 1 AS b")
    assert m.columns == {"b": "TIMESTAMP_NTZ"}
