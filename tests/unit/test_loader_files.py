"""The files users write are read as UTF-8 with or without a byte-order mark; anything else is one
error naming the file, line and column (never a UnicodeDecodeError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.core.config.files import decode_text
from mesh_dagster.core.errors import ConfigError, ModelError
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots

BOM = b"\xef\xbb\xbf"
FILES = {
    "models/seed.sql": "MODEL (\n  name s.seed,\n  kind SEED (path '../seeds/s.csv'),\n  columns (id INT, d DATE)\n);\n",
    "models/m.sql": "MODEL (name s.m, kind FULL, audits (positive));\nSELECT id, d FROM s.seed\n",
    "audits/positive.sql": "AUDIT (name positive);\nSELECT * FROM @this_model WHERE id < 0\n",
    "seeds/s.csv": "id,d\n1,2020-01-01\n",
    "external_models.yaml": "- name: raw.events\n  columns:\n    id: INT\n",
}


def _project(tmp_path: Path, name: str, bom_in: str | None = None) -> Path:
    root = write_project(tmp_path / name, FILES, CONFIG)
    if bom_in is not None:
        path = root / bom_in
        path.write_bytes(BOM + path.read_bytes())
    return root


@pytest.mark.parametrize("rel", ["models/m.sql", "models/seed.sql", "audits/positive.sql", "external_models.yaml",
                                 "config.yaml"])
def test_a_byte_order_mark_changes_nothing(tmp_path: Path, rel: str) -> None:
    plain = load_project(_project(tmp_path, "plain"), use_cache=False)
    marked = load_project(_project(tmp_path, "marked", rel), use_cache=False)
    assert sorted(marked.models) == sorted(plain.models)
    assert {n: s.fingerprint for n, s in build_snapshots(marked).items()} == {
        n: s.fingerprint for n, s in build_snapshots(plain).items()}


def test_a_byte_order_mark_in_a_seed_changes_neither_its_columns_nor_its_content_hash(tmp_path: Path) -> None:
    plain = load_project(_project(tmp_path, "plain"), use_cache=False)
    marked = load_project(_project(tmp_path, "marked", "seeds/s.csv"), use_cache=False)
    assert marked.seeds["s.seed"] == plain.seeds["s.seed"]


def test_decode_errors_name_line_and_column() -> None:
    with pytest.raises(ModelError) as e:
        decode_text(b"SELECT 1\nSELECT 'caf\xe9'", "models/x.sql")
    assert str(e.value) == ("models/x.sql:2: Not UTF-8 text: byte 0xe9 at column 12 cannot be decoded "
                            "(save the file as UTF-8)")
    with pytest.raises(ConfigError, match=r"^config\.yaml:1: Binary file, not text \(NUL byte at column 3\)"):
        decode_text(b"ab\x00", "config.yaml", ConfigError)
    assert decode_text("caf\xe9".encode("latin-1"), "seeds/x.csv", encoding="latin-1") == "caf\xe9"


def test_python_file_defining_no_model_is_refused_not_skipped(tmp_path: Path) -> None:
    root = _project(tmp_path, "py")
    (root / "models" / "py_model.py").write_text("def execute(context):\n    return None\n")
    (root / "models" / "__init__.py").write_text("")
    with pytest.raises(ModelError, match=r"^models/py_model\.py:1: This Python file in models/ defines no model, but "
                                         r"a function named 'execute'"):
        load_project(root, use_cache=False)


def test_column_checks_wait_for_spark_when_the_columns_cannot_be_known(tmp_path: Path) -> None:
    """`SELECT *` over an external table with no declared columns: the loader cannot see whether
    the time column exists, so it does not guess; Spark refuses the model's table creation, before
    any row is written and before any view moves (the apply stops there and resumes after a fix)."""
    root = write_project(tmp_path / "p", {
        "external_models.yaml": "- name: raw.events\n",
        "models/m.sql": "MODEL (name s.m, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain id);\n"
                        "SELECT * FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds\n",
    })
    project = load_project(root, use_cache=False)
    assert project.columns("s.m") is None
