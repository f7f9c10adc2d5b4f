"""Seed CSVs are checked at load: header, row shape, and every value against Spark's ANSI casts.

CAST_CASES is the table of (type, text, does Spark cast it) that the predictor must follow;
tests/spark/test_seed_casts.py runs the same table through Spark itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import CONFIG, write_project

from mesh_dagster.core.config.cache import ProjectCache
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.models.seeds import cast_check
from mesh_dagster.core.project.project import load_project

CAST_CASES: list[tuple[str, str, bool]] = [
    ("INT", "1", True), ("INT", " 1 ", True), ("INT", "+1", True), ("INT", "-1", True), ("INT", "\t7\n", True),
    ("INT", "01", True), ("INT", "1.0", False), ("INT", "1.5", False), ("INT", "1e3", False), ("INT", "abc", False),
    ("INT", "", False), ("INT", "0x1F", False), ("INT", "1_000", False), ("INT", "\u0661\u0662", False),
    ("INT", "1 2", False), ("INT", "2147483647", True), ("INT", "2147483648", False), ("INT", "-2147483648", True),
    ("TINYINT", "127", True), ("TINYINT", "128", False), ("SMALLINT", "32768", False),
    ("BIGINT", "9223372036854775807", True), ("BIGINT", "9223372036854775808", False),
    ("DOUBLE", "1.5", True), ("DOUBLE", "1e10", True), ("DOUBLE", ".5", True), ("DOUBLE", "5.", True),
    ("DOUBLE", "inf", True), ("DOUBLE", "-Infinity", True), ("DOUBLE", "NaN", True), ("DOUBLE", "1d", True),
    ("DOUBLE", "1_0", False), ("DOUBLE", "abc", False), ("DOUBLE", "1e", False), ("DOUBLE", "--1", False),
    ("FLOAT", "1.5", True), ("FLOAT", "abc", False),
    ("DECIMAL(5, 2)", "123.45", True), ("DECIMAL(5, 2)", "123.456", True), ("DECIMAL(5, 2)", "999.995", False),
    ("DECIMAL(5, 2)", "1234.5", False), ("DECIMAL(5, 2)", "-999.99", True), ("DECIMAL(5, 2)", "1e2", True),
    ("DECIMAL(5, 2)", "1e3", False), ("DECIMAL(5, 2)", "abc", False), ("DECIMAL(5, 2)", "Infinity", False),
    ("DECIMAL(10, 0)", "9999999999", True), ("DECIMAL(10, 0)", "10000000000", False),
    ("BOOLEAN", "true", True), ("BOOLEAN", "T", True), ("BOOLEAN", "yes", True), ("BOOLEAN", "0", True),
    ("BOOLEAN", " false ", True), ("BOOLEAN", "2", False), ("BOOLEAN", "on", False),
    ("DATE", "2020-01-01", True), ("DATE", "2020-1-1", True), ("DATE", "2020-01", True), ("DATE", "2020", True),
    ("DATE", "2020-13-01", False), ("DATE", "2020-02-30", False), ("DATE", "2020-02-29", True),
    ("DATE", "2019-02-29", False), ("DATE", "2020-01-01 12:00:00", True), ("DATE", "2020-01-01T12:00", True),
    ("DATE", "2020/01/01", False), ("DATE", "01/02/2020", False), ("DATE", "20200101", False),
    ("DATE", "0000-01-01", True), ("DATE", "12345-01-01", True), ("DATE", "-0001-01-01", True),
    ("DATE", "2100-02-29", False), ("DATE", "2000-02-29", True), ("DATE", "abc", False),
    ("TIMESTAMP", "2020-01-01", True), ("TIMESTAMP", "2020-01-01 12:00:00", True),
    ("TIMESTAMP", "2020-01-01T12:00:00", True), ("TIMESTAMP", "2020-01-01 12:00", True),
    ("TIMESTAMP", "2020-01-01 12", True), ("TIMESTAMP", "2020-01-01 24:00:00", False),
    ("TIMESTAMP", "2020-01-01 23:60:00", False), ("TIMESTAMP", "2020-01-01 12:00:00.123456", True),
    ("TIMESTAMP", "2020-01-01 12:00:00Z", True), ("TIMESTAMP", "2020-01-01 12:00:00+01:00", True),
    ("TIMESTAMP", "2020-01-01 12:00:00 UTC", True), ("TIMESTAMP", "2020-01-01 12:00:00 America/New_York", True),
    ("TIMESTAMP", "2020-01-01 12:00:00 Foo/Bar", False), ("TIMESTAMP", "2020-01-01 garbage", False),
    ("TIMESTAMP", "2020-01-01T", False), ("TIMESTAMP", "2020-13-01", False), ("TIMESTAMP", "12:00:00", True),
    ("TIMESTAMP", "abc", False),
    ("TIMESTAMP_NTZ", "2020-01-01 12:00:00", True), ("TIMESTAMP_NTZ", "12:00", False), ("TIMESTAMP_NTZ", "abc", False),
    ("STRING", "anything at all", True),
]
# Writing into a VARCHAR(n)/CHAR(n) column checks the length (the cast alone does not).
LENGTH_CASES = [("VARCHAR(3)", "abc", True), ("VARCHAR(3)", "abcd", False), ("CHAR(2)", "abc", False)]


@pytest.mark.parametrize("type_text, value, casts", CAST_CASES + LENGTH_CASES)
def test_cast_check_follows_spark(type_text: str, value: str, casts: bool) -> None:
    check = cast_check(type_text)
    assert (check is None or check(value)) is casts


SEED = "MODEL (\n  name s.seed,\n  kind SEED (path '../seeds/s.csv'{settings}),\n  columns (id INT, d DATE, x STRING)\n);\n"


def seed_project(tmp_path: Path, csv: str | bytes, settings: str = "", config: str = CONFIG) -> Path:
    root = write_project(tmp_path / "p", {"models/seed.sql": SEED.format(settings=settings)}, config)
    (root / "seeds").mkdir(exist_ok=True)
    data = csv if isinstance(csv, bytes) else csv.encode()
    (root / "seeds" / "s.csv").write_bytes(data)
    return root


def refusal(root: Path) -> str:
    with pytest.raises(ModelError) as e:
        load_project(root, use_cache=False)
    return str(e.value)


def test_default_na_values_are_null_not_cast_errors(tmp_path: Path) -> None:
    root = seed_project(tmp_path, "id,d,x\n1,2020-01-01,a\n,NULL,b\nNA,nan,\n")
    assert load_project(root, use_cache=False).columns("s.seed") == {"id": "INT", "d": "DATE", "x": "STRING"}


def test_na_settings_decide_what_is_null(tmp_path: Path) -> None:
    root = seed_project(tmp_path, "id,d,x\n-,2020-01-01,a\n", ", csv_settings (na_values = ('-'))")
    load_project(root, use_cache=False)
    root = seed_project(tmp_path, "id,d,x\n,2020-01-01,a\n", ", csv_settings (keep_default_na = false)")
    assert refusal(root).startswith("seeds/s.csv:2: Value '' of column id is not a valid INT")


def test_row_lines_count_quoted_line_breaks(tmp_path: Path) -> None:
    root = seed_project(tmp_path, 'id,d,x\n1,2020-01-01,"two\nlines"\n\n2,2020-01-01,a,extra\n')
    assert refusal(root).startswith("seeds/s.csv:5: Row has 4 fields, the header has 3")


def test_bom_and_windows_line_ends_are_read(tmp_path: Path) -> None:
    root = seed_project(tmp_path, b"\xef\xbb\xbfid,d,x\r\n1,2020-01-01,a\r\n")
    assert load_project(root, use_cache=False).seeds["s.seed"].header == ["id", "d", "x"]


def test_declared_encoding_is_honoured(tmp_path: Path) -> None:
    data = "id,d,x\n1,2020-01-01,caf\xe9\n".encode("latin-1")
    assert "Not UTF-8 text" in refusal(seed_project(tmp_path, data))
    load_project(seed_project(tmp_path, data, ", csv_settings (encoding = 'latin-1')"), use_cache=False)


def test_values_are_not_checked_when_ansi_mode_is_off(tmp_path: Path) -> None:
    """With `spark.sql.ansi.enabled: false` Spark turns a bad value into NULL, as the user asked;
    the row shape is still checked."""
    config = "gateways:\n  local:\n    connection:\n      config:\n        spark.sql.ansi.enabled: false\n" + CONFIG
    load_project(seed_project(tmp_path, "id,d,x\nx,2020-01-01,a\n", config=config), use_cache=False)
    assert "Row has 2 fields" in refusal(seed_project(tmp_path, "id,d,x\n1,a\n", config=config))


def test_verdict_is_cached_by_content(tmp_path: Path) -> None:
    root = seed_project(tmp_path, "id,d,x\n1,2020-01-01,a\n")
    project = load_project(root)
    cached = ProjectCache(root / ".mesh" / "cache", project.cache.salt)
    assert list(cached._other.get("seeds-2", {}).values()) == [(("id", "d", "x"), ())]
    (root / "seeds" / "s.csv").write_text("id,d,x\n1,2020-01-01,a\nbad,2020-01-01,b\n")
    assert "Value 'bad' of column id" in refusal(root)  # new content, new key: checked again


def test_rows_of_empty_fields_are_rows_and_blank_lines_are_not(tmp_path: Path) -> None:
    load_project(seed_project(tmp_path, "id,d,x\n\n1,2020-01-01,a\n,,\n   \n"), use_cache=False)
    assert refusal(seed_project(tmp_path, "id,d,x\n,,,,\n")).startswith("seeds/s.csv:2: Row has 5 fields")


def test_undeclared_header_names_must_be_column_names(tmp_path: Path) -> None:
    root = write_project(tmp_path / "h", {"models/seed.sql": "MODEL (name s.seed, kind SEED (path '../seeds/s.csv'));\n"})
    (root / "seeds").mkdir()
    (root / "seeds" / "s.csv").write_text("id,order.date\n1,2020-01-01\n")
    assert refusal(root) == ("seeds/s.csv:1: Column name 'order.date' is not supported: use letters, digits and "
                             "underscores (words may be separated by spaces or hyphens)")
    (root / "seeds" / "s.csv").write_text("id,order date,ship-to\n1,2020-01-01,x\n")  # as SQLMesh projects name them
    assert load_project(root, use_cache=False).seeds["s.seed"].header == ["id", "order date", "ship-to"]
