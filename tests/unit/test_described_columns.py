"""DESCRIBE TABLE's rows name a table's columns for a full rewrite (issue 36) only where they spell
every type as the table's schema does; otherwise the catalog is asked, as before."""

from __future__ import annotations

from mesh_dagster.engine.catalog import described_columns

PARTITIONED = [("id", "int", None), ("#tag", "string", None), ("amount", "decimal(10,2)", "money"),
               ("ds", "date", None), ("# Partition Information", "", ""), ("# col_name", "data_type", "comment"),
               ("ds", "date", None), ("", "", ""), ("# Detailed Table Information", "", ""),
               ("Location", "file:/w/t", "")]


def test_the_columns_are_the_rows_before_the_first_without_a_type() -> None:
    # A column named like a section header is a column still: it has a type.
    assert described_columns(PARTITIONED) == {"id": "int", "#tag": "string", "amount": "decimal(10,2)", "ds": "date"}


def test_a_type_spelled_otherwise_there_leaves_the_answer_to_the_catalog() -> None:
    for kind in ("varchar(5)", "char(2)", "struct<x:int>", "array<string>", "map<string,int>",
                 "string collate UTF8_LCASE", "interval day"):
        assert described_columns([("a", "int", None), ("b", kind, None), ("", "", "")]) is None, kind
    assert described_columns([]) is None
