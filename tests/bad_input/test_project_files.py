"""Bad project files: every one is refused at load, in one line naming the file and line, before
anything is written (no state row, no table, no file).

Each case starts from a fresh copy of the quickstart project, breaks one thing, and runs
`mesh plan --explain` (which loads the project exactly as `plan --auto-apply` would, without
starting Spark).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from bad_input.harness import EXAMPLE, assert_refused, copy_example, mesh, nothing_written

Edit = Callable[[Path], None]


def write(rel: str, text: str | bytes) -> Edit:
    def edit(project: Path) -> None:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text).lstrip())

    return edit


def model(text: str, rel: str = "models/x.sql") -> Edit:
    return write(rel, text)


def replace(rel: str, old: str, new: str) -> Edit:
    def edit(project: Path) -> None:
        path = project / rel
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1))

    return edit


def config(old: str, new: str) -> Edit:
    return replace("config.yaml", old, new)


ADDED = len((EXAMPLE / "config.yaml").read_text().splitlines()) + 2
"""The line number of the first line `add_config` appends (after the example's lines and a
blank one), computed so that the example's config can grow without breaking these cases."""


def at(anchor: str, below: int = 0) -> str:
    """`config.yaml:N:` for the example's line holding `anchor`, `below` lines further down:
    the cases name lines by what they hold, so the example's comments can grow."""
    lines = (EXAMPLE / "config.yaml").read_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if anchor in line)
    return f"config.yaml:{number + below}:"


def add_config(text: str | bytes) -> Edit:
    """Lines appended to config.yaml after a blank line; the first is line `ADDED`."""

    def edit(project: Path) -> None:
        path = project / "config.yaml"
        added = text if isinstance(text, bytes) else textwrap.dedent(text).lstrip().encode()
        path.write_bytes(path.read_bytes() + b"\n" + added)

    return edit


def seed_csv(text: str) -> Edit:
    return write("seeds/seed_data.csv", text)


SEED_MODEL = "models/seed_model.sql"
DEFAULTS = "model_defaults:\n"
FULL = "MODEL (\n  name s.x,\n  kind FULL{props}\n);\n\nSELECT\n  1 AS a,\n  2 AS b\n"


def full(props: str = "") -> Edit:
    return model(FULL.format(props=props))


CASES: list[tuple[str, list[Edit], tuple[str, ...]]] = [
    # -- unreadable files: one line naming the file (no UnicodeDecodeError traceback)
    ("binary model", [write("models/logo.sql", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")],
     ("models/logo.sql:3:", "Binary file")),
    ("latin-1 model", [write("models/x.sql", "MODEL (name s.x, kind FULL);\nSELECT 'caf\xe9' AS a".encode("latin-1"))],
     ("models/x.sql:2:", "Not UTF-8 text", "0xe9")),
    ("latin-1 audit", [write("audits/x.sql", "AUDIT (name x);\nSELECT * FROM @this_model WHERE a = '\xe9'".encode("latin-1"))],
     ("audits/x.sql:2:", "Not UTF-8 text")),
    ("latin-1 seed", [seed_csv("id,item_id,event_date\n1,2,2020-01-01\n".encode("latin-1") + b"\xe9,1,2020-01-02\n")],
     ("seeds/seed_data.csv:3:", "Not UTF-8 text")),
    ("latin-1 config.yaml", [add_config(b"# caf\xe9")], (f"config.yaml:{ADDED}:", "Not UTF-8 text")),
    ("latin-1 external models", [write("external_models.yaml", "- name: raw.events  # \xe9\n".encode("latin-1"))],
     ("external_models.yaml:1:", "Not UTF-8 text")),
    # -- names Spark or mesh cannot quote
    ("model name injection", [model("MODEL (\n  name `a.x; DROP TABLE y`,\n  kind FULL\n);\nSELECT 1 AS a")],
     ("models/x.sql:2:", "letters, digits and underscores")),
    ("model name with a space", [model("MODEL (\n  name s.'my table',\n  kind FULL\n);\nSELECT 1 AS a")],
     ("models/x.sql:2:", "Model name part 'my table' is not supported")),
    ("model name with three parts", [model("MODEL (\n  name c.s.t,\n  kind FULL\n);\nSELECT 1 AS a")],
     ("models/x.sql:2:", "schema.table")),
    ("model name with an empty part", [model("MODEL (\n  name s..t,\n  kind FULL\n);\nSELECT 1 AS a")],
     ("models/x.sql:2:", "no empty parts")),
    ("schema name too long", [model(f"MODEL (\n  name {'s' * 123}.t,\n  kind FULL\n);\nSELECT 1 AS a")],
     ("models/x.sql:2:", "too long", "128")),
    ("depends_on an unquotable name", [full(",\n  depends_on (`a b`.c)")], ("models/x.sql:4:", "a b", "letters, digits and underscores")),
    ("column name with a dot", [model("MODEL (name s.x, kind FULL);\n\nSELECT\n  1 AS a,\n  2 AS `my.col`")],
     ("models/x.sql:5:", "'my.col'")),
    ("column name with a backtick", [model("MODEL (name s.x, kind FULL);\nSELECT 1 AS `a``b`")],
     ("models/x.sql:2:", "letters, digits and underscores")),
    ("declared column name with a quote", [full(",\n  columns (a INT, \"b'c\" INT)")], ("models/x.sql:4:", "b'c")),
    ("unnamed output column", [model("MODEL (name s.x, kind FULL);\n\nSELECT\n  1 AS a,\n  COUNT(*)\nFROM s.y"),
                               model("MODEL (name s.y, kind VIEW);\nSELECT 1 AS z", "models/y.sql")],
     ("models/x.sql:", "`COUNT(*)` needs a name")),
    ("duplicate output column", [model("MODEL (name s.x, kind FULL);\n\nSELECT\n  1 AS a,\n  2 AS A")],
     ("models/x.sql:5:", "column 'a' twice", "line 4")),
    ("external model name", [write("external_models.yaml", "- name: raw.events\n- name: 'raw.my events'\n")],
     ("external_models.yaml:2:", "'my events'")),
    ("external model column name", [write("external_models.yaml", "- name: raw.events\n  columns:\n    'a.b': int\n")],
     ("external_models.yaml:3:", "'a.b'")),
    ("SQLMesh metrics", [write("metrics/revenue.sql", "-- revenue\n\nMETRIC (\n  name total,\n  expression SUM(x.a)\n);\n")],
     ("metrics/revenue.sql:3:", "SQLMesh metrics are not supported", "Move the metrics/ folder out of the project")),
    # -- properties naming columns the model does not output
    ("time_column not in the query", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds)\n);"
                                            "\nSELECT 1 AS a")], ("models/x.sql:3:", "time_column 'ds' is not an output column", "it outputs: a")),
    ("INT time_column with a date format", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds)\n);"
                                                  "\nSELECT 20200101 AS ds")],
     ("models/x.sql:3:", "time_column ds", "not a number", "'%Y%m%d'")),
    ("time_column of a type that holds no time", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_TIME_RANGE "
                                                        "(time_column ok)\n);\nSELECT TRUE AS ok")],
     ("models/x.sql:3:", "BOOLEAN cannot hold time")),
    ("partitioned_by names a missing column", [full(",\n  partitioned_by nope")], ("models/x.sql:4:", "partitioned_by names 'nope'")),
    ("column_descriptions names a missing column", [full(",\n  column_descriptions (a = 'A', nope = 'N')")],
     ("models/x.sql:4:", "column_descriptions names 'nope'")),
    ("declared columns the query does not produce", [full(",\n  columns (a INT, c INT)")],
     ("models/x.sql:4:", "columns declares 'c', which the query does not output")),
    ("audit on a missing column", [full(",\n  audits (not_null(columns := (a, nope)))")], ("models/x.sql:4:", "nope")),
    ("default audit on a missing column", [config(DEFAULTS, DEFAULTS + "  audits:\n    - not_null(columns := (id))\n")],
     ("models/full_model.sql:", "model_defaults.audits", "id")),
    ("@STAR over a parent whose columns are unknown",
     [write("external_models.yaml", "- name: raw.events\n"),
      model("MODEL (name s.x, kind FULL);\n\nSELECT @STAR(raw.events) FROM raw.events")],
     ("models/x.sql:3:", "@STAR", "raw.events")),
    # -- seeds: file, row and column named
    ("seed value that does not cast", [seed_csv("id,item_id,event_date\n1,2,2020-01-01\nx,1,2020-01-02\n")],
     ("seeds/seed_data.csv:3:", "'x'", "column id", "INT")),
    ("seed date that does not exist", [seed_csv("id,item_id,event_date\n1,2,2020-02-30\n")],
     ("seeds/seed_data.csv:2:", "event_date", "DATE")),
    ("seed decimal overflow", [replace(SEED_MODEL, "item_id INTEGER", "item_id DECIMAL(3, 1)"),
                               seed_csv("id,item_id,event_date\n1,2.5,2020-01-01\n2,123.4,2020-01-02\n")],
     ("seeds/seed_data.csv:3:", "DECIMAL(3, 1)")),
    ("seed row with too many fields", [seed_csv("id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-02,9\n")],
     ("seeds/seed_data.csv:3:", "4 fields", "header has 3")),
    ("seed row with too few fields", [seed_csv("id,item_id,event_date\n1,2\n")],
     ("seeds/seed_data.csv:2:", "2 fields")),
    ("seed header mismatch", [seed_csv("id,item,event_date\n1,2,2020-01-01\n")],
     ("seeds/seed_data.csv:1:", "item_id", "not declared in columns: item")),
    ("seed header names a column twice", [replace(SEED_MODEL, "  columns (\n    id INTEGER,\n    item_id INTEGER,\n"
                                                               "    event_date DATE\n  ),\n", ""),
                                          seed_csv("id,id,event_date\n1,2,2020-01-01\n")],
     ("seeds/seed_data.csv:1:", "'id' appears twice")),
    ("seed file missing", [replace(SEED_MODEL, "seed_data.csv", "nope.csv")], ("models/seed_model.sql:3:", "seeds/nope.csv")),
    ("seed column of a type no text casts to", [replace(SEED_MODEL, "item_id INTEGER", "item_id ARRAY<INT>")],
     ("models/seed_model.sql:6:", "ARRAY<INT>")),
    # -- accepted today and ignored: refused, naming the key
    ("forward_only", [replace("models/incremental_model.sql", "time_column event_date", "time_column event_date,\n"
                                                                                          "    forward_only maybe")],
     ("models/incremental_model.sql:5:", "maybe")),
    ("on_destructive_change", [replace("models/incremental_model.sql", "time_column event_date",
                                       "time_column event_date,\n    on_destructive_change 'sometimes'")],
     ("models/incremental_model.sql:5:", "on_destructive_change must be one of error, warn, allow, ignore",
      "'sometimes'")),
    ("on_additive_change", [replace("models/incremental_model.sql", "time_column event_date",
                                    "time_column event_date,\n    on_additive_change never")],
     ("models/incremental_model.sql:5:", "on_additive_change must be one of", "'never'")),
    ("partition_by_time_column false", [replace("models/incremental_model.sql", "time_column event_date",
                                                "time_column event_date,\n    partition_by_time_column false")],
     ("models/incremental_model.sql:5:", "partition_by_time_column false")),
    ("linter rule nobody defines", [add_config("linter:\n  enabled: true\n  rules: [noselectstar, nosuchrule]\n")],
     (f"config.yaml:{ADDED + 2}:", "linter.rules", "unknown rule 'nosuchrule'")),
    ("Python file defining no model", [write("models/py_model.py", "def execute(context, **kwargs):\n    return None\n")],
     ("models/py_model.py:1:", "defines no model")),
    ("concurrent_tasks 0", [config("master: local[*]", "master: local[*]\n      concurrent_tasks: 0")],
     (at("master: local[*]", 1), "concurrent_tasks", "greater than or equal to 1")),
    ("audit skip true", [write("audits/x.sql", "AUDIT (\n  name x,\n  skip true\n);\nSELECT 1")],
     ("audits/x.sql:3:", "skip true")),
    ("blocking standalone audit", [write("audits/x.sql", "AUDIT (\n  name x,\n  standalone true,\n  blocking true\n);"
                                           "\nSELECT 1")],
     ("audits/x.sql:4:", "Standalone audits cannot be blocking")),
    ("csv_settings key the seed reader ignores", [replace(SEED_MODEL, "path '../seeds/seed_data.csv'",
                                                          "path '../seeds/seed_data.csv',\n    csv_settings (skipinitialspace = true)")],
     ("models/seed_model.sql:5:", "skipinitialspace")),
    ("batch_size 0 on a SEED", [replace(SEED_MODEL, "path '../seeds/seed_data.csv'", "path '../seeds/seed_data.csv',\n"
                                                                                   "    batch_size 0")],
     ("models/seed_model.sql:5:", "batch_size must be at least 1, got 0")),
    ("sqlite state connection with a host", [config("default_gateway: local", "state_connection:\n  type: sqlite\n"
                                                                               "  host: db.example.com\ndefault_gateway: local")],
     (at("default_gateway: local", 2), "state_connection.host", "postgres")),
    ("state connection url beside other fields", [config("default_gateway: local", "state_connection:\n"
                                                         "  url: sqlite:///x.db\n  database: y.db\ndefault_gateway: local")],
     (at("default_gateway: local", 2), "state_connection.database", "url")),
    ("variables differing only in case", [add_config("variables:\n  Limit: 1\n  limit: 2\n")],
     (f"config.yaml:{ADDED + 2}:", "variables.limit", "case-insensitive")),
    ("default_gateway unknown", [config("default_gateway: local", "default_gateway: prod_cluster")],
     (at("default_gateway: local"), "unknown gateway 'prod_cluster'")),
    # -- bad config.yaml values
    ("config.yaml not YAML", [add_config("model_defaults: [unclosed\n")], ("config.yaml:", "Invalid YAML")),
    ("unknown config key", [add_config("snapshot_time_to_live: 1 week\n")], (f"config.yaml:{ADDED}:", "snapshot_time_to_live", "unknown setting")),
    ("model_defaults.cron", [config("cron: '@daily'", "cron: 'every day'")], (at("cron: '@daily'"), "Invalid cron 'every day'")),
    ("model_defaults.start", [config("start: 2025-06-12", "start: someday")], (at("start: 2025-06-12"), "someday")),
    ("model_defaults.dialect", [config("dialect: spark", "dialect: sparkle")], (at("dialect: spark"), "unknown SQL dialect 'sparkle'")),
    ("model_defaults.storage_format", [config(DEFAULTS, DEFAULTS + "  storage_format: excel\n")],
     (at("model_defaults:", 1), "storage_format 'excel'")),
    ("snapshot_ttl", [add_config("snapshot_ttl: forever\n")], (f"config.yaml:{ADDED}:", "snapshot_ttl", "forever")),
    ("model_defaults.audits unknown audit", [config(DEFAULTS, DEFAULTS + "  audits:\n    - no_such_audit\n")],
     (at("model_defaults:", 2), "unknown audit 'no_such_audit'")),
    ("model_defaults.audits unreadable", [config(DEFAULTS, DEFAULTS + "  audits:\n    - 'not_null(columns := '\n")],
     (at("model_defaults:", 1), "model_defaults.audits", "not_null(columns :=")),
    # -- malformed models (issue 2's cases)
    ("MODEL block never closed", [model("MODEL (\n  name s.x,\n  kind FULL\nSELECT 1 AS a")], ("models/x.sql:1:", "never closed")),
    ("unknown kind", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_SOMETHING\n);\nSELECT 1 AS a")],
     ("models/x.sql:3:", "Unknown model kind")),
    ("unknown property", [full(",\n  colour 'blue'")], ("models/x.sql:4:", "Unknown model property 'colour'")),
    ("INCREMENTAL without time_column", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_TIME_RANGE\n);\nSELECT 1 AS a")],
     ("models/x.sql:3:", "need a time_column")),
    ("SQL syntax error", [model("MODEL (name s.x, kind FULL);\n\nSELECT 1 AS a,\nFROM WHERE")], ("models/x.sql:", "Cannot parse")),
    ("reference to a catalog-qualified table", [model("MODEL (name s.x, kind FULL);\n\nSELECT a FROM c.s.nowhere")],
     ("models/x.sql:3:", "reads c.s.nowhere, which cannot be an external table", "catalogs are not supported")),
    ("cycle", [model("MODEL (name s.x, kind FULL);\nSELECT a FROM s.y"),
               model("MODEL (name s.y, kind FULL);\nSELECT a FROM s.x", "models/y.sql")], ("models/x.sql:1:", "cycle")),
    ("duplicate model names", [model("MODEL (name sqlmesh_example.full_model, kind FULL);\nSELECT 1 AS a")],
     ("full_model", "Duplicate model name")),
    ("invalid model cron", [full(",\n  cron 'often'")], ("models/x.sql:4:", "Invalid cron 'often'")),
    ("end before start", [full(",\n  start '2021-01-01',\n  end '2020-01-01'")], ("models/x.sql:5:", "before start")),
    ("time_column format that loses the day", [model("MODEL (\n  name s.x,\n  kind INCREMENTAL_BY_TIME_RANGE "
                                                     "(time_column (ds, '%Y-%m'))\n);\nSELECT '2020-01' AS ds")],
     ("models/x.sql:3:", "'%Y-%m'", "day")),
    ("kind EXTERNAL in a model file", [model("MODEL (\n  name s.x,\n  kind EXTERNAL\n);\nSELECT 1 AS a")],
     ("models/x.sql:3:", "external_models.yaml")),
    ("declared type Spark has no column for", [full(",\n  dialect bigquery,\n  columns (a BIGNUMERIC, b INT64)")],
     ("models/x.sql:5:", "BIGNUMERIC", "no Spark column type")),
    ("unknown model dialect", [full(",\n  dialect sparkle")], ("models/x.sql:4:", "unknown SQL dialect")),
    ("unknown storage_format", [full(",\n  storage_format excel")], ("models/x.sql:4:", "storage_format 'excel'")),
    ("batch_size 0", [replace("models/incremental_model.sql", "time_column event_date", "time_column event_date,\n"
                                                                                       "    batch_size 0")],
     ("models/incremental_model.sql:5:", "batch_size must be at least 1")),
    ("negative lookback", [replace("models/incremental_model.sql", "time_column event_date", "time_column event_date,\n"
                                                                                            "    lookback -1")],
     ("models/incremental_model.sql:5:", "lookback must be at least 0")),
    ("grain as an expression", [full(",\n  grain (a + 1)")], ("models/x.sql:4:", "'a + 1'")),
    # -- macros
    ("macro file syntax error", [write("macros/helpers.py", "def broken(:\n    pass\n")],
     ("macros/helpers.py:1:", "SyntaxError")),
    ("error in macros/__init__.py", [write("macros/__init__.py", "LIMIT = 10\nWINDOW = LIMIT / 0\n")],
     ("macros/__init__.py:2:", "ZeroDivisionError")),
    ("error inside a file imported by macros/__init__.py",
     [write("macros/__init__.py", "from .helpers import *\n"),
      write("macros/helpers.py", "import os\n\nVALUE = 1 / 0\n")],
     ("macros/helpers.py:3:", "ZeroDivisionError")),
]


@pytest.mark.parametrize("edits, fragments", [pytest.param(e, f, id=name) for name, e, f in CASES])
def test_refused_at_load(tmp_path: Path, edits: list[Edit], fragments: tuple[str, ...]) -> None:
    project = copy_example(tmp_path / "project")
    (project / ".mesh").mkdir()  # where the refusal's log file goes (ours, not the user's data)
    for edit in edits:
        edit(project)
    with nothing_written(project):
        outcome = mesh(project, "plan", "--explain")
    assert_refused(outcome, *fragments)


def test_at_least_the_agreed_number_of_cases() -> None:
    assert len(CASES) >= 35
